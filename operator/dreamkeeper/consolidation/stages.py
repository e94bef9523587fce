"""The values a cycle's stages take and return, and the one seam where writing differs from a dry run.

    (pause) → (recover) → (ingest) → vocabulary → (purge) → snapshot → repair → [held plan?] → fold → decay → gate
    → subsume → propose → validate → cap → apply | plan → (render) → measure

Each stage returns a frozen value holding what later stages need and what it counted (``counts``, ``notes``); the
report is composed from the values returned so far (``compose_report``), so no stage edits the report, and a
failed cycle's report still says what the stages before the failure did. Everything that touches the disk goes
through ``Effects``: ``writes.Writes`` for real, ``dryrun.DryRun`` for nothing at all.

To add a stage: a frozen value here with ``counts`` and ``notes``, a slot for it in ``Stages`` (in order), and one
call in ``Cycle._run_stages``; if it touches the disk, a method on ``Effects`` and both implementations. A stage
that may stop the cycle gives a reason, as ``too_soon`` does, and the cycle ends as skipped (``Skipped``): the
agent's pause marker (``pause.py``) is read first of all, before recovery, and stops a dry run too; one that
narrows the plan (a hold) takes ``Validated`` and returns the value apply takes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, fields
from datetime import datetime
from itertools import chain
from pathlib import Path
from typing import Protocol

from dreamkeeper.consolidation.agent_view import AgentView
from dreamkeeper.consolidation.blast import HeldPlan
from dreamkeeper.consolidation.clock import ClockCheck
from dreamkeeper.consolidation.counts import CycleCounts
from dreamkeeper.consolidation.decay import DecayPlan
from dreamkeeper.consolidation.decisions import Decisions
from dreamkeeper.consolidation.embeddings import Vector
from dreamkeeper.consolidation.gating import GatingResult
from dreamkeeper.consolidation.pause import PauseMarker
from dreamkeeper.consolidation.plan import DecayAction, FoldAction, MergeAction, Plan
from dreamkeeper.consolidation.proposal import Batch, BatchReply
from dreamkeeper.consolidation.quarantine import malformed_notes
from dreamkeeper.consolidation.quiet import QuietMemo
from dreamkeeper.consolidation.report import CycleReport, CycleResult
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.coverage import Vocabulary
from dreamkeeper.formats import MemoryFormat, RockBotFormat
from dreamkeeper.memory import MemoryStore, ScanResult, StoredEntry

NONE = CycleCounts()


@dataclass(frozen=True)
class CycleContext:
    """What every stage may read: the cycle's identity, clock, settings and store."""

    cycle_id: str
    agent_dir: Path
    store: MemoryStore
    settings: CycleSettings
    now: datetime
    clock_given: bool  # the caller set `now` (simulations, tests): the ledger is kept on that clock
    stage: Callable[[str], None]  # announces a stage (logs, progress)
    agent: AgentView | None = None  # RockBot's paths and purge settings as this cycle uses them (agent_view.py)
    # How the agent keeps its memory: RockBot's entry files are the store itself (ingest and render do nothing); a
    # Markdown profile's units are kept as records in the store and rendered back into the agent's files.
    memory_format: MemoryFormat = field(default_factory=RockBotFormat)


@dataclass(frozen=True)
class Recovered:
    """Journals of killed cycles, finished before anything else."""

    counts: CycleCounts = NONE
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Ingested:
    """A Markdown format's files brought into its unit records (formats/ingest.py); nothing for RockBot's."""

    counts: CycleCounts = NONE
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class VocabularyLoaded:
    vocabulary: Vocabulary
    status: str
    counts: CycleCounts = NONE
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Purged:
    """Archived entries past retention, deleted for good (the one deleting path). ``scan`` is the scan purge read,
    when it read one: the snapshot reuses it rather than reading the corpus twice."""

    scan: ScanResult | None = None
    purged_ids: frozenset[str] = frozenset()
    conflicts: int = 0
    counts: CycleCounts = NONE
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Snapshot:
    """The corpus as this cycle reads it (after purge, when writing)."""

    scan: ScanResult
    live: list[StoredEntry]
    ids_before: frozenset[str]  # every id on disk before the cycle changed anything, purged ones included
    purged_ids: frozenset[str]
    counts: CycleCounts = NONE
    notes: tuple[str, ...] = ()


def snapshot_of(scan: ScanResult, purged_ids: frozenset[str] = frozenset(), counts: CycleCounts = NONE) -> Snapshot:
    """The snapshot of a scan already screened (``quarantine.screened``): malformed files are named in the notes."""
    # One pass each over the corpus (``scan.live`` is a new list per call; ``entry.id``, not the property, per entry).
    ids_before = frozenset(chain([s.id for s in scan.entries], purged_ids))  # built once, not set then copy
    live = live_of(scan)
    counts = counts + CycleCounts(total=len(live)) + unusable_files(scan)
    return Snapshot(scan, live, ids_before, purged_ids, counts, malformed_notes(scan.malformed))


def unusable_files(scan: ScanResult) -> CycleCounts:
    """The scan's files that are no entry we may touch (malformed), and how many of them are misfiled ones."""
    misfiled = sum(1 for m in scan.malformed if m.kind == "misfiled")
    return CycleCounts(malformed=len(scan.malformed), quarantined=misfiled)


def live_of(scan: ScanResult) -> list[StoredEntry]:
    return [s for s in scan.entries if s.is_live]


@dataclass(frozen=True)
class Repaired:
    """The corpus once stale write-backs are repaired (``writeback/``): an agent's cached copies written back over
    earlier cycles' archives and stamps. Executed when writing, only planned in a dry run."""

    snapshot: Snapshot  # what the later stages read: the snapshot with the repaired files read again
    counts: CycleCounts = NONE
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Folded:
    """The corpus after the exact-duplicate fold: executed when writing, only planned in a dry run."""

    scan: ScanResult
    live: list[StoredEntry]
    folds: tuple[FoldAction, ...] = ()
    counts: CycleCounts = NONE
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Decayed:
    """The corpus after importance decay (RockBot's pass, before gating): what was lowered, which entries that took
    below the high-value floor (still protected from pruning this cycle), and the live entries as decayed (with the
    fingerprints of their files, which ``apply`` writes: docs/architecture.md, "Decay carried into the cycle's
    write")."""

    live: list[StoredEntry]
    decays: tuple[DecayAction, ...] = ()
    left_floor: frozenset[str] = frozenset()
    counts: CycleCounts = NONE
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Gated:
    """What the gate offers the proposer: unreviewed entries, their near-duplicate clusters, reopened ones."""

    gating: GatingResult
    counts: CycleCounts = NONE
    notes: tuple[str, ...] = ()

    @property
    def asks(self) -> bool:
        """Worth asking the proposer: two or more entries are eligible."""
        return len(self.gating.eligible) >= 2


@dataclass(frozen=True)
class Subsumed:
    """Clusters settled with no model (subsume.py): one member already held every specific of the others. Their
    merges are validated with the model's (census, blast radius); their entries are not offered."""

    merges: tuple[MergeAction, ...] = ()
    settled: frozenset[str] = frozenset()  # the entries kept or taken in: not offered to the model
    counts: CycleCounts = NONE
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Embedded:
    """Vectors generated this cycle (embeddings.py): before the gate, the live entries that had none; after apply,
    the entries the cycle created or re-tagged. Written where RockBot's EmbeddingCache keeps them (not in a dry
    run, where they only serve the gate)."""

    vectors: Mapping[str, Vector] = field(default_factory=dict)
    counts: CycleCounts = NONE
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Proposed:
    """The proposer's replies to the gate's batches (none when it was not asked)."""

    batches: tuple[Batch, ...] = ()
    replies: tuple[BatchReply, ...] = ()
    counts: CycleCounts = NONE
    notes: tuple[str, ...] = ()
    feedback: tuple[str, ...] = ()  # the feedback lines the requests showed (what a source-less save may use)

    @property
    def offered_ids(self) -> set[str]:
        return {i for b in self.batches for i in b.ids}


@dataclass(frozen=True)
class Validated:
    """What the safeguards let through, as the plan to apply (or show), and what they refused."""

    decisions: Decisions
    plan: Plan
    vocabulary: Vocabulary  # what the verdicts were checked with: the loss check after apply uses the same
    declined: int = 0
    notes: tuple[str, ...] = ()
    undecided: int = 0  # clusters left intact by a reply that did not decide on them (offered again after a back-off)
    undecided_entries: int = 0  # their members, stamped for back-off

    @property
    def counts(self) -> CycleCounts:
        extra = CycleCounts(declined=self.declined, undecided=self.undecided, backed_off=self.undecided_entries)
        return self.decisions.counts + extra


@dataclass(frozen=True)
class Capped:
    """The blast radius (blast.py): the validated plan, or nothing when it is held for approval."""

    validated: Validated  # what apply takes
    held: HeldPlan | None = None
    counts: CycleCounts = NONE
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Approved:
    """A waiting held plan, settled: applied on approval in place of planning (the corpus it was made from is
    unchanged), or discarded as stale (``apply`` False: the cycle plans afresh)."""

    held: HeldPlan
    apply: bool = True
    counts: CycleCounts = NONE
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Usage:
    """What the proposer spent."""

    counts: CycleCounts = NONE
    budget_exhausted: bool = False
    estimated_cost: float | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Applied:
    """The plan applied (what the journal did), or in a dry run what it would do."""

    plan: Plan  # as the outcome shows it
    counts: CycleCounts = NONE
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Rendered:
    """What the cycle changed, written into a Markdown format's files (formats/render.py); nothing for RockBot's."""

    counts: CycleCounts = NONE
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Measured:
    """The corpus after apply, measured (or, in a dry run, as planned)."""

    counts: CycleCounts = NONE
    lost_specifics: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Skipped:
    """Paused by the agent's marker, or too soon after the last completed cycle: the corpus is only counted."""

    reason: str
    counts: CycleCounts = NONE
    paused: PauseMarker | None = None
    notes: tuple[str, ...] = ()


class StageValue(Protocol):
    """What every stage's value carries into the report."""

    @property
    def counts(self) -> CycleCounts: ...

    @property
    def notes(self) -> tuple[str, ...]: ...


@dataclass
class Stages:
    """The values the stages returned so far, in order. The report is a function of them, also when a stage
    failed (the failed report says what the stages before it did)."""

    recovered: Recovered | None = None
    skipped: Skipped | None = None
    ingested: Ingested | None = None
    vocabulary: VocabularyLoaded | None = None
    purged: Purged | None = None
    snapshot: Snapshot | None = None
    repaired: Repaired | None = None
    folded: Folded | None = None
    decayed: Decayed | None = None
    embedded: Embedded | None = None
    gated: Gated | None = None
    subsumed: Subsumed | None = None
    proposed: Proposed | None = None
    validated: Validated | None = None
    capped: Capped | None = None
    approved: Approved | None = None
    usage: Usage | None = None
    applied: Applied | None = None
    reembedded: Embedded | None = None
    rendered: Rendered | None = None
    measured: Measured | None = None

    def done(self) -> Iterator[StageValue]:
        for slot in fields(self):
            value = getattr(self, slot.name)
            if value is not None:
                yield value


@dataclass(frozen=True)
class ReportHead:
    cycle_id: str
    agent_dir: str
    proposer: str
    started_at: datetime
    agent_settings: Mapping[str, str] = field(default_factory=dict)  # what the cycle used of RockBot's settings


def compose_report(
    head: ReportHead,
    stages: Stages,
    result: CycleResult,
    *,
    finished_at: datetime | None,
    error: str | None = None,
    first_write_at: datetime | None = None,
) -> CycleReport:
    """The cycle report, from the stages' values: counts summed, notes in stage order."""
    done = list(stages.done())
    validated, usage, measured = stages.validated, stages.usage, stages.measured
    return CycleReport(
        cycle_id=head.cycle_id,
        agent_dir=head.agent_dir,
        proposer=head.proposer,
        started_at=head.started_at,
        first_write_at=first_write_at,
        finished_at=finished_at,
        result=result,
        skip_reason=stages.skipped.reason if stages.skipped else None,
        error=error,
        **CycleCounts.total_of(s.counts for s in done).model_dump(),
        vocabulary_status=stages.vocabulary.status if stages.vocabulary else "absent",
        clustering_degraded=stages.gated.gating.degraded if stages.gated else False,
        proposer_failure=validated.decisions.batches.failure if validated else None,
        budget_exhausted=usage.budget_exhausted if usage else False,
        estimated_cost=usage.estimated_cost if usage else None,
        rejections=list(validated.decisions.rejections) if validated else [],
        refusals=list(validated.decisions.refusals) if validated else [],
        protections=[*validated.decisions.protections, *validated.decisions.refused_prunes] if validated else [],
        lost_specifics=list(measured.lost_specifics) if measured else [],
        pause_marker=stages.skipped.paused if stages.skipped else None,
        agent_settings=dict(head.agent_settings),
        notes=[n for s in done for n in s.notes],
    )


class Effects(Protocol):
    """Every stage that touches the disk. ``writes.Writes`` does; ``dryrun.DryRun`` changes nothing."""

    result: CycleResult  # what a cycle that runs to the end reports
    first_write_at: datetime | None  # when the cycle first wrote under memory/ (never, in a dry run)

    def hold(self) -> AbstractContextManager[object]:
        """The agent's cycle lock, for the whole cycle."""
        ...

    def recover(self) -> Recovered:
        """Finish journals a killed cycle left."""
        ...

    def too_soon(self) -> str | None:
        """Why this cycle must not run yet (minimum interval), if so."""
        ...

    def ingest(self) -> Ingested:
        """Bring a Markdown format's unit records up to date with the agent's files."""
        ...

    def purge(self, vocabulary: Vocabulary, clock: ClockCheck) -> Purged:
        """Delete archived entries past retention (never a last record: ``purge.LastRecords``); refused when the
        clock disagrees with the history (``clock.py``)."""
        ...

    def snapshot(self, purged: Purged) -> Snapshot:
        """Read the corpus (what purge left)."""
        ...

    def repair(self, snapshot: Snapshot, quiet: QuietMemo | None = None, generation: str | None = None) -> Repaired:
        """Repair the stale copies an agent wrote back over earlier cycles' changes. ``quiet``: the memo of what
        a cycle over a corpus found nothing to do about (quiet.py); ``generation``: the content generation of every
        file the snapshot's scan parsed (its entries, then its duplicates), the corpus the repair looks at."""
        ...

    def fold(self, snapshot: Snapshot, folds: list[FoldAction]) -> Folded:
        """The corpus once exact duplicates are folded."""
        ...

    def decay(self, folded: Folded, plan: DecayPlan) -> Decayed:
        """The corpus once importance has decayed (written by ``apply``, with the plan's own writes)."""
        ...

    def write_decays(self, live: list[StoredEntry]) -> list[StoredEntry]:
        """Write the planned decays now (a plan held for approval): ``live`` as they leave it."""
        ...

    def apply(self, folded: Folded, validated: Validated) -> Applied:
        """Apply the plan, or show it."""
        ...

    def render(self) -> Rendered:
        """Write what changed into a Markdown format's files."""
        ...

    def write_embeddings(self, vectors: Mapping[str, Vector], replace: frozenset[str]) -> int:
        """Write vectors where RockBot's EmbeddingCache keeps them (``replace``: ids whose file is overwritten);
        how many were written."""
        ...

    def measure(self, snapshot: Snapshot, folded: Folded, applied: Applied, validated: Validated) -> Measured:
        """The corpus after apply: live and archived entries, hard deletes, specifics lost."""
        ...

    def record(self, report: CycleReport) -> Path | None:
        """Keep the finished report (and the ledger); returns the report's path."""
        ...

    def record_failure(self, report: CycleReport, error: BaseException) -> None:
        """Keep the report of a failed cycle (never raising: the failure itself is what the caller reports)."""
        ...

    def pending_hold(self) -> HeldPlan | None:
        """The plan a cycle held for approval, if one waits."""
        ...

    def keep_hold(self, held: HeldPlan) -> None:
        """Keep a plan over the blast-radius cap for a human to approve."""
        ...

    def settle_hold(self, held: HeldPlan, outcome: str) -> None:
        """The waiting plan is applied or stale: no longer pending."""
        ...


__all__ = [
    "Applied",
    "Approved",
    "Capped",
    "CycleContext",
    "Decayed",
    "Effects",
    "Folded",
    "Gated",
    "Ingested",
    "Measured",
    "Proposed",
    "Purged",
    "Recovered",
    "Rendered",
    "Repaired",
    "ReportHead",
    "Skipped",
    "Snapshot",
    "Stages",
    "Subsumed",
    "Usage",
    "Validated",
    "VocabularyLoaded",
    "compose_report",
    "live_of",
    "snapshot_of",
    "unusable_files",
]
