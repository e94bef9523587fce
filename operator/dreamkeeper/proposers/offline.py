"""The offline proposer: deterministic, no network. It only proposes what is provably redundant.

Within each offered near-duplicate cluster, an entry whose specifics are a subset of a sibling's is folded into
that sibling: the merged text is the sibling's own text, so nothing is reworded and nothing is invented. It never
proposes a standalone prune.
"""

from __future__ import annotations

from dreamkeeper.consolidation import BatchReply, MergeProposal, Proposal, ProposalRequest, ProposerUsage, RepairRequest
from dreamkeeper.coverage import (
    DEFAULT_VOCABULARY,
    Inventory,
    SourceText,
    Vocabulary,
    keep_inventory,
    known_inventory,
    missing_from,
)
from dreamkeeper.memory import Entry


class OfflineProposer:
    name = "offline"

    def __init__(self, vocabulary: Vocabulary | None = None) -> None:
        # The extraction and inventory memos are keyed by vocabulary content, so the default shares them with a
        # cycle running on the built-in vocabulary (the cycle's checks then reuse this proposer's work).
        self.vocabulary = vocabulary if vocabulary is not None else DEFAULT_VOCABULARY
        self._usage = ProposerUsage()

    async def propose(self, request: ProposalRequest) -> list[BatchReply]:
        replies = []
        for batch in request.batches:
            by_id = {o.entry.id: o.entry for o in batch.entries}
            saves: list[MergeProposal] = []
            for group in batch.groups:
                if group.is_cluster:
                    saves.extend(self._fold_cluster([by_id[i] for i in group.ids]))
            replies.append(BatchReply(batch.index, Proposal(to_save=saves)))
        return replies

    def _fold_cluster(self, members: list[Entry]) -> list[MergeProposal]:
        # Hosts are tried largest first (the likeliest supersets), candidates smallest first; ties by id.
        ordered = sorted(members, key=lambda e: (-len(e.content), e.id))
        hosts: dict[str, list[Entry]] = {}
        absorbed: set[str] = set()
        inventories: dict[str, Inventory] = {}  # host text -> its inventory, for this cluster's pairwise checks
        for candidate in reversed(ordered):
            if candidate.id in hosts:
                continue
            for host in ordered:
                if host.id == candidate.id or host.id in absorbed:
                    continue
                if self._covers(host, candidate, inventories):
                    hosts.setdefault(host.id, []).append(candidate)
                    absorbed.add(candidate.id)
                    break
        by_id = {e.id: e for e in members}
        proposals = []
        for host_id in sorted(hosts):
            host = by_id[host_id]
            # Validation, the census and the loss check ask about this text again; the hosts merely tried stay
            # out of the shared memo so they cannot push the cycle's merges out of it.
            keep_inventory(host.content, inventories[host.content])
            proposals.append(
                MergeProposal(
                    content=host.content,
                    category=host.category,
                    tags=list(host.tags),
                    source_ids=[host.id, *sorted(f.id for f in hosts[host_id])],
                )
            )
        return proposals

    def _covers(self, host: Entry, candidate: Entry, inventories: dict[str, Inventory]) -> bool:
        if host.category != candidate.category:
            return False
        inventory = inventories.get(host.content)
        if inventory is None:
            # Subsumption built the inventories of most clustered texts already (the same text, the same tokens).
            inventory = known_inventory(host.content)
            if inventory is None:
                inventory = Inventory.of(host.content)
            inventories[host.content] = inventory
        sources = [SourceText(text=candidate.content, category=candidate.category)]
        return not missing_from(inventory, sources, self.vocabulary)

    async def repair(self, request: RepairRequest) -> str | None:
        return None  # it never proposes a lossy merge, so there is nothing to repair

    def usage(self) -> ProposerUsage:
        return self._usage

    async def aclose(self) -> None:
        return None
