"""A scripted proposer for tests and simulations: replies are given, not generated."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from dreamkeeper.consolidation import Batch, BatchReply, Proposal, ProposalRequest, ProposerUsage, RepairRequest

Script = Callable[[Batch, ProposalRequest], Proposal | dict[str, Any] | str | None]
RepairScript = Callable[[RepairRequest], str | None]


class ScriptedProposer:
    """``script`` maps each batch to a reply: a Proposal, a RockBot-shaped dict, raw text (parsed tolerantly by the
    engine's rules) or None (an unusable reply)."""

    name = "scripted"

    def __init__(
        self,
        script: Script | Sequence[Proposal | dict[str, Any] | None],
        repair: RepairScript | Sequence[str | None] | None = None,
    ) -> None:
        self._script = script
        self._repair = repair
        self._usage = ProposerUsage()
        self.requests: list[ProposalRequest] = []
        self.repairs: list[RepairRequest] = []
        self._replay = 0
        self._repair_replay = 0

    async def propose(self, request: ProposalRequest) -> list[BatchReply]:
        self.requests.append(request)
        replies = []
        for batch in request.batches:
            self._usage.calls += 1
            if callable(self._script):
                raw = self._script(batch, request)
            else:
                raw = self._script[self._replay] if self._replay < len(self._script) else None
                self._replay += 1
            replies.append(self._to_reply(batch, raw))
        return replies

    def _to_reply(self, batch: Batch, raw: Proposal | dict[str, Any] | str | None) -> BatchReply:
        if raw is None:
            self._usage.invalid_replies += 1
            return BatchReply(batch.index, None, "no reply")
        if isinstance(raw, Proposal):
            return BatchReply(batch.index, raw)
        try:
            proposal = Proposal.model_validate_json(raw) if isinstance(raw, str) else Proposal.model_validate(raw)
        except ValueError as exc:
            self._usage.invalid_replies += 1
            return BatchReply(batch.index, None, f"invalid reply: {str(exc)[:200]}")
        return BatchReply(batch.index, proposal)

    async def repair(self, request: RepairRequest) -> str | None:
        self.repairs.append(request)
        self._usage.calls += 1
        if self._repair is None:
            return None
        if callable(self._repair):
            return self._repair(request)
        value = self._repair[self._repair_replay] if self._repair_replay < len(self._repair) else None
        self._repair_replay += 1
        return value

    def usage(self) -> ProposerUsage:
        return self._usage

    async def aclose(self) -> None:
        return None
