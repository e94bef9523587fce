"""What validation decides, as values: ``Decisions`` (what comes out, the only way its verdicts reach the cycle)
and ``ValidationState`` (the working state of one pass). Kept apart from the checks themselves (``validate.py``)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from dreamkeeper.consolidation.counts import CycleCounts
from dreamkeeper.consolidation.fold import LiveTexts
from dreamkeeper.consolidation.plan import MergeAction, Plan, PruneAction
from dreamkeeper.consolidation.quarantine import displayable
from dreamkeeper.consolidation.refusals import REASON_PREFIX
from dreamkeeper.consolidation.replies import BatchTally
from dreamkeeper.consolidation.report import Protection, Rejection
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.consolidation.sourceless import SourcelessGate
from dreamkeeper.consolidation.successor_gaps import SuccessorGaps
from dreamkeeper.coverage import CoverageIndex, Vocabulary
from dreamkeeper.memory import StoredEntry, shown, shown_all


@dataclass(frozen=True)
class Decisions:
    """What validation decided, returned as a value: the only way its verdicts reach the cycle."""

    merges: tuple[MergeAction, ...] = ()
    prunes: tuple[PruneAction, ...] = ()
    rejections: tuple[Rejection, ...] = ()
    refusals: tuple[Rejection, ...] = ()  # useless or misleading proposals refused before any check (refusals.py)
    protections: tuple[Protection, ...] = ()
    refused_prunes: tuple[Protection, ...] = ()  # by the census: the last live mention of an identity specific
    merge_only_ignored: int = 0
    census_refusals: int = 0
    invented_merges: int = 0  # rejections for specifics no source states
    rejected_clusters: Mapping[str, list[str]] = field(default_factory=dict)  # id -> cluster ids it was rejected in
    unstamped: frozenset[str] = frozenset()  # offered in a batch whose reply was unusable
    backoff: frozenset[str] = frozenset()  # offered in a batch the model answered unusably: back-off stamps
    named: frozenset[str] = frozenset()  # offered ids a usable reply named (in a merge or a prune), decided about
    undecided_batches: frozenset[int] = frozenset()  # RockBot-layout batches: a cluster they leave unnamed is undecided
    batches: BatchTally = field(default_factory=BatchTally)
    # The census's index as it stands at the end: the planned live corpus (live minus leaving, plus successors),
    # or None when no question needed the whole corpus. The post-apply loss measurement starts from it, if any,
    # instead of indexing the whole corpus a second time.
    census_index: CoverageIndex | None = None
    sourceless_saved: int = 0
    sourceless_refused: int = 0

    @property
    def counts(self) -> CycleCounts:
        return CycleCounts(
            rejected=len(self.rejections),
            invented=self.invented_merges,
            repaired=sum(1 for m in self.merges if m.repaired),
            protected=len(self.protections),
            prunes_refused=len(self.refused_prunes),
            merge_only_ignored=self.merge_only_ignored,
            census_refusals=self.census_refusals,
            ephemeral_specifics=sum(len(p.lost_specifics) for p in self.prunes),
            batches_usable=self.batches.usable,
            batches_unusable=self.batches.unusable,
            batches_failed=self.batches.failed,
            invented_replies=self.batches.invented,
            backed_off=len(self.backoff),
            subsumed=sum(1 for m in self.merges if m.subsumed),
            refused_restating=sum(1 for r in self.refusals if r.reason.startswith(REASON_PREFIX["restates"])),
            refused_layout=sum(1 for r in self.refusals if r.reason.startswith(REASON_PREFIX["layout"])),
            refused_notation=sum(1 for r in self.refusals if r.reason.startswith(REASON_PREFIX["notation"])),
            sourceless_saved=self.sourceless_saved,
            sourceless_refused=self.sourceless_refused,
        )

    def leaving_ids(self) -> set[str]:
        return {s.id for m in self.merges for s in m.sources} | {p.target.id for p in self.prunes}


@dataclass
class ValidationState:
    """The working state of one validation pass; ``decisions()`` is what comes out of it."""

    settings: CycleSettings
    vocabulary: Vocabulary
    cycle_id: str
    now: datetime
    left_floor: frozenset[str] = frozenset()  # ids decay took below the high-value floor this cycle: still protected
    plan: Plan = field(default_factory=Plan)
    shielded: set[str] = field(default_factory=set)  # sources of rejected/blank merges: never pruned
    consumed: set[str] = field(default_factory=set)  # sources of accepted merges
    unstamped: set[str] = field(default_factory=set)  # offered in a batch whose reply was unusable
    rejected_clusters: dict[str, list[str]] = field(default_factory=dict)  # id -> cluster ids it was rejected in
    repairs_used: int = 0
    rejections: list[Rejection] = field(default_factory=list)
    refusals: list[Rejection] = field(default_factory=list)
    protections: list[Protection] = field(default_factory=list)
    refused_prunes: list[Protection] = field(default_factory=list)
    merge_only_ignored: int = 0
    census_refusals: int = 0
    invented_merges: int = 0
    backoff: set[str] = field(default_factory=set)
    named: set[str] = field(default_factory=set)
    undecided_batches: set[int] = field(default_factory=set)
    batches: BatchTally = field(default_factory=BatchTally)
    census_index: CoverageIndex | None = None
    live_texts: LiveTexts | None = None  # the live corpus by exact key: merges restating a live entry fold into it
    fold_targets: dict[str, MergeAction] = field(default_factory=dict)  # live id -> the merge folded into it
    sourceless: SourcelessGate | None = None  # source-less saves (sourceless.py); None: refused, as before
    # successor id -> what that merge's successor does not hold of its sources, asked while validation held its
    # inventory (successor_gaps.py); the census uses a record only for the exact texts it was computed from.
    gaps: dict[str, SuccessorGaps] = field(default_factory=dict)

    def settle(self, merges: Sequence[MergeAction]) -> None:
        """Merges decided before any reply (subsumptions): in the plan, their sources consumed, their targets
        taken (a model's merge restating one folds into the same action)."""
        for merge in merges:
            self.plan.merges.append(merge)
            self.consumed.update(s.id for s in merge.sources)
            if merge.into is not None:
                self.fold_targets[merge.into.id] = merge

    def decisions(self) -> Decisions:
        return Decisions(
            merges=tuple(self.plan.merges),
            prunes=tuple(self.plan.prunes),
            rejections=tuple(self.rejections),
            refusals=tuple(self.refusals),
            protections=tuple(self.protections),
            refused_prunes=tuple(self.refused_prunes),
            merge_only_ignored=self.merge_only_ignored,
            census_refusals=self.census_refusals,
            invented_merges=self.invented_merges,
            rejected_clusters=dict(self.rejected_clusters),
            unstamped=frozenset(self.unstamped),
            backoff=frozenset(self.backoff),
            named=frozenset(self.named),
            undecided_batches=frozenset(self.undecided_batches),
            batches=self.batches,
            census_index=self.census_index,
            sourceless_saved=self.sourceless.saved if self.sourceless else 0,
            sourceless_refused=self.sourceless.refused if self.sourceless else 0,
        )


__all__ = ["Decisions", "ValidationState"]


# Validation's log lines, wherever recorded: the rejections the census makes too (census.py) read as validation's.
log = logging.getLogger("dreamkeeper.consolidation.validate")


def joined_ids(stored: Sequence[StoredEntry]) -> str:
    return ", ".join(s.id for s in stored)


def reject_merge(
    state: ValidationState,
    sources: list[StoredEntry],
    missing: list[str],
    reason: str,
    content: str,
    invented: list[str] | None = None,
) -> None:
    """A merge refused by a check (validation or the census): logged with its text, its sources shielded from
    every other action this cycle and recorded with the cluster they came in."""
    log.warning(
        "rejected merge of [%s] — %s: %s. Sources kept. Merged text was: %s",
        joined_ids(sources),
        reason,
        shown_all(missing or invented or []) if (missing or invented) else "-",
        shown(content),
    )
    state.shielded.update(s.id for s in sources)
    ids, kept = [s.id for s in sources], displayable(content[:500])
    state.rejections.append(
        Rejection(source_ids=ids, missing=missing, reason=reason, content=kept, invented=list(invented or []))
    )
    cluster = [s.id for s in sources]
    for s in sources:
        state.rejected_clusters[s.id] = cluster
