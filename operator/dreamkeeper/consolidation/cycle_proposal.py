"""The stages of a cycle that decide what to propose and what stands: subsumption, the proposal, validation, and
the proposer's usage. ``Cycle`` (cycle.py) inherits them; they read the cycle's state and write nothing (the plan
they return is applied by ``Cycle``'s effects).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from dreamkeeper.consolidation.agent_view import AgentView
from dreamkeeper.consolidation.backoff import backoff_stamps
from dreamkeeper.consolidation.counts import CycleCounts
from dreamkeeper.consolidation.cycle_options import CycleOptions
from dreamkeeper.consolidation.decisions import Decisions, ValidationState
from dreamkeeper.consolidation.directives import load_directives, load_feedback
from dreamkeeper.consolidation.gating import make_batches, near_duplicates
from dreamkeeper.consolidation.pacing import LossBudget, pace_subsumptions
from dreamkeeper.consolidation.plan import Plan
from dreamkeeper.consolidation.proposal import BatchReply, ProposalRequest, Proposer
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.consolidation.sourceless import SourcelessGate
from dreamkeeper.consolidation.stages import Decayed, Gated, Proposed, Subsumed, Usage, Validated
from dreamkeeper.consolidation.stamps import review_stamps
from dreamkeeper.consolidation.subsume import find_subsumptions, merge_of
from dreamkeeper.consolidation.validate import validate_replies
from dreamkeeper.coverage import Vocabulary

log = logging.getLogger("dreamkeeper.consolidation.cycle")  # the cycle's own logger: one stream for its stages

STOP_POLL_SECONDS = 0.25  # how often a running proposal stage checks for a requested stop


class ProposalStages:
    """The proposal half of ``Cycle``: what it needs of the cycle is declared here, set by ``Cycle.__init__``."""

    options: CycleOptions
    proposer: Proposer
    settings: CycleSettings
    agent_dir: Path
    agent: AgentView
    now: datetime
    cycle_id: str
    _stage: Callable[[str], None]
    _budget: LossBudget | None

    def _subsume(self, gated: Gated, vocabulary: Vocabulary) -> Subsumed:
        """Clusters one member of which already says everything: settled without the model (subsume.py)."""
        if not self.settings.subsume or not gated.asks:
            return Subsumed()
        self._stage("subsumption")
        gating = gated.gating
        found = find_subsumptions(gating.clusters, gating.eligible, vocabulary, near_duplicates(gating, self.settings))
        # What RockBot's audit allows to leave before its next run bounds these too; the rest go to the model.
        found, _ = pace_subsumptions(found, lambda f: len(f.covered), self._budget)
        merges = tuple(merge_of(f, self.now) for f in found)
        settled = frozenset(i for f in found for i in (f.kept.id, *(c.id for c in f.covered)))
        return Subsumed(merges, settled)  # counted by validation: what stood after the census

    async def _propose(self, gated: Gated, decayed: Decayed, subsumed: Subsumed) -> Proposed:
        gating, live = gated.gating, decayed.live
        if not gated.asks:
            log.info(
                "%d of %d entries already reviewed and unchanged with no duplicate siblings — nothing eligible",
                gating.withheld,
                len(live),
            )
            return Proposed()
        self._stage("proposal")
        # Clustering failed: every entry looks lone. RockBot's layout shows them together, so a model can still merge
        # them; asked one by one, they could only be pruned.
        shape = "batches" if gating.degraded else self.settings.offer_shape
        batches = make_batches(gating, self.settings.batch_max_entries, shape, settled=subsumed.settled)
        if not batches:
            log.info("every offered cluster was settled without the model; nothing to ask")
            return Proposed()
        directives = load_directives(self.agent_dir, self.agent.directive.path)  # re-read every cycle, as RockBot
        request = ProposalRequest(
            batches=tuple(batches),
            total_entries=len(live),
            withheld=gating.withheld,
            now=self.now,
            directive=directives.dream,
            degraded=gating.degraded,
            memory_rules=directives.memory_rules,
            feedback=load_feedback(self.agent_dir, self.now, self.agent.feedback_dir.path),
        )
        replies = await self._asked(request)
        return Proposed(tuple(batches), tuple(replies), feedback=tuple(f.line() for f in request.feedback))

    async def _asked(self, request: ProposalRequest) -> list[BatchReply]:
        """The proposer's replies; when a stop is requested meanwhile, none: its requests are cancelled (a model
        answering slowly, batch after batch, would outlast a pod's grace period; this stage writes nothing)."""
        asked = asyncio.ensure_future(self.proposer.propose(request))
        stop = self.options.stop_requested
        while stop is not None:
            done, _ = await asyncio.wait({asked}, timeout=STOP_POLL_SECONDS)
            if done:
                break
            if stop():
                asked.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await asked
                log.warning("proposal stopped by request: %d batch(es) left unasked", len(request.batches))
                return []
        return list(await asked)

    async def _validate(
        self, gated: Gated, proposed: Proposed, decayed: Decayed, vocabulary: Vocabulary, subsumed: Subsumed
    ) -> Validated:
        if not gated.asks:
            return Validated(Decisions(), Plan(), vocabulary)
        self._stage("validation")
        gate = SourcelessGate(proposed.feedback, self.settings.sourceless_saves_max_per_cycle)
        gate.bind(decayed.live)
        state = ValidationState(
            self.settings, vocabulary, self.cycle_id, self.now, left_floor=decayed.left_floor, sourceless=gate
        )
        state.settle(subsumed.merges)
        gating = gated.gating
        decisions = await validate_replies(
            proposed.batches, proposed.replies, gating, decayed.live, self.proposer, state
        )
        batch_of = {i: b.index for b in proposed.batches for i in b.ids}
        stamps = review_stamps(gating, decisions, proposed.offered_ids, self.now, batch_of)
        backoff = backoff_stamps(gating.eligible, decisions.backoff | stamps.undecided, self.now)
        plan = Plan(merges=list(decisions.merges), prunes=list(decisions.prunes), stamps=[*stamps.stamps, *backoff])
        return Validated(
            decisions,
            plan,
            vocabulary,
            stamps.declined,
            undecided=stamps.undecided_clusters,
            undecided_entries=len(stamps.undecided - decisions.backoff),
        )

    def _usage(self) -> Usage:
        usage = self.proposer.usage()
        counts = CycleCounts(
            llm_calls=usage.calls,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            invalid_replies=usage.invalid_replies,
            failed_calls=usage.failed_calls,
            format_refusals=usage.format_refusals,
        )
        return Usage(counts, usage.budget_exhausted, usage.estimated_cost, tuple(usage.notes))
