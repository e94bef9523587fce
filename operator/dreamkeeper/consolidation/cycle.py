"""One consolidation cycle, as stages that take and return values (``stages.py``):

    (pause) → (recover) → (ingest) → vocabulary → (purge) → snapshot → repair → [held plan?] → fold → decay → gate
    → subsume → propose → validate → cap (blast radius) → apply | plan → (render) → measure

A memory format (``CycleOptions.format``) decides where the entries are: RockBot's files are the store, and ingest
and render do nothing; a Markdown profile's units are records in ``AGENT_DIR/.dreamkeeper/units``, ingested from the
agent's files first and rendered back into them after apply (``dreamkeeper.formats``).

The proposer is consulted once per batch and trusted with nothing. What touches the disk is the cycle's
``Effects``: ``Writes`` below, or the dry run's ``DryRun`` (``dryrun.py``), which changes nothing — the only place
a dry run differs.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import os
import secrets
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from dreamkeeper.consolidation.agent_view import agent_view
from dreamkeeper.consolidation.backoff import backoff_stamps
from dreamkeeper.consolidation.blast import HeldPlan, exceeds, keep, live_drop, read_pending, settle
from dreamkeeper.consolidation.clock import SKEW, ClockCheck, check_clock
from dreamkeeper.consolidation.clustering import Cluster
from dreamkeeper.consolidation.counts import CycleCounts, any_counted, sentence
from dreamkeeper.consolidation.decay import DecayPlan, plan_decay
from dreamkeeper.consolidation.decisions import Decisions, ValidationState
from dreamkeeper.consolidation.directives import load_directives, load_feedback
from dreamkeeper.consolidation.dryrun import DryRun
from dreamkeeper.consolidation.embed_stage import embed_missing, embed_written, write_vectors
from dreamkeeper.consolidation.embeddings import Embedder, Vector
from dreamkeeper.consolidation.fold import plan_folds
from dreamkeeper.consolidation.format_stages import format_counts
from dreamkeeper.consolidation.gating import GatingResult, make_batches, near_duplicates, select_candidates
from dreamkeeper.consolidation.invariant import Census, EndCheck, end_check, invariant_error, scan_map, tags_in
from dreamkeeper.consolidation.journal import (
    DECAY_JOURNAL_SUFFIX,
    FOLD_JOURNAL_SUFFIX,
    JOURNAL_SUFFIXES,
    WRITEBACK_JOURNAL_SUFFIX,
    ExecutionTally,
    Executor,
    Journal,
    StepPaths,
    UnreadableJournalError,
    incomplete_journals,
    set_aside,
    write_journal,
    write_journal_steps,
)
from dreamkeeper.consolidation.pacing import LossBudget, loss_budget, pace_folds, pace_subsumptions
from dreamkeeper.consolidation.pass_ledger import record_consolidation
from dreamkeeper.consolidation.pause import PauseMarker, read_pause_marker
from dreamkeeper.consolidation.plan import FoldAction, Plan
from dreamkeeper.consolidation.proposal import BatchReply, ProposalRequest, Proposer
from dreamkeeper.consolidation.purge_policy import purge_stage
from dreamkeeper.consolidation.quarantine import screened
from dreamkeeper.consolidation.report import CycleReport, CycleResult, write_report
from dreamkeeper.consolidation.scope import scope_ids, scoped
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.consolidation.sourceless import SourcelessGate
from dreamkeeper.consolidation.stages import (
    Applied,
    Approved,
    Capped,
    CycleContext,
    Decayed,
    Effects,
    Embedded,
    Folded,
    Gated,
    Ingested,
    Measured,
    Proposed,
    Purged,
    Recovered,
    Rendered,
    Repaired,
    ReportHead,
    Skipped,
    Snapshot,
    Stages,
    Subsumed,
    Usage,
    Validated,
    VocabularyLoaded,
    compose_report,
    live_of,
    snapshot_of,
    unusable_files,
)
from dreamkeeper.consolidation.stamps import review_stamps
from dreamkeeper.consolidation.subsume import find_subsumptions, merge_of
from dreamkeeper.consolidation.undo import resume_undos, undo_tags
from dreamkeeper.consolidation.validate import census, validate_replies
from dreamkeeper.consolidation.writeback import RepairPlan, WriteBackIndex, catch_up, plan_from_journals, window_start
from dreamkeeper.coverage import CoverageIndex, Vocabulary, load_vocabulary
from dreamkeeper.formats import ROCKBOT, MemoryFormat, RockBotFormat
from dreamkeeper.memory import (
    RESTORED_BY_HAND,
    UNCHECKED,
    CycleLock,
    Fingerprint,
    MalformedFile,
    MemoryStore,
    MemoryStoreError,
    ScanResult,
    StoredEntry,
    SweepReport,
    check_state_files,
    embedding_file_name,
    format_timestamp,
    memory_root,
    read_reversals,
    read_state_json,
    replace_file,
    state_dir,
    sweep,
    unfinished_undos,
    utcnow,
)

log = logging.getLogger(__name__)

STOP_POLL_SECONDS = 0.25  # how often a running proposal stage checks for a requested stop

Progress = Callable[[str], None]


@dataclass
class CycleOptions:
    agent_dir: Path
    settings: CycleSettings = field(default_factory=CycleSettings)
    memory_dir: Path | None = None
    dry_run: bool = False
    force: bool = False
    now: datetime | None = None
    progress: Progress | None = None
    approve_hold: str | None = None  # the cycle id of a held plan a human approved (blast.py)
    trust_clock: bool = False  # purge and decay run even when the clock disagrees with the history (clock.py)
    # Asked while the model is being asked: True stops the proposal stage (it writes nothing), and the next stage's
    # progress call decides what then happens (SIGTERM in the dream command: the cycle stops, its report written).
    stop_requested: Callable[[], bool] | None = None
    # An embeddings endpoint (proposers/embeddings.py): missing vectors are generated before the gate, and the
    # vectors of entries the cycle creates or re-tags after apply, as RockBot's EmbeddingCache does (embeddings.py).
    embedder: Embedder | None = None
    format: MemoryFormat | None = None  # None: RockBot's entry files (dreamkeeper.formats.get_format)

    @property
    def memory_format(self) -> MemoryFormat:
        return self.format if self.format is not None else RockBotFormat()

    @property
    def memory_root(self) -> Path:
        if self.format is not None and self.format.name != ROCKBOT:
            return self.format.store_root(self.agent_dir)
        return memory_root(self.agent_dir, self.memory_dir)


@dataclass(repr=False)
class CycleOutcome:
    report: CycleReport
    plan: Plan | None = None
    gating: GatingResult | None = None
    report_path: Path | None = None
    # What validation decided, before the blast radius: the same as ``plan`` unless the plan was held (then what
    # would have been applied, stamps included). For callers that judge the decisions (benchmarks, tests).
    decided: Plan | None = None

    def __repr__(self) -> str:
        # Short on purpose: asyncio.run() reprs its finished main task, result included, when it restores the
        # SIGINT handler; the generated repr walked every entry of the plan (15 s at 100k entries).
        return (
            f"CycleOutcome(cycle_id={self.report.cycle_id!r}, result={self.report.result!r}, "
            f"report_path={self.report_path!r})"
        )


def new_cycle_id(now: datetime) -> str:
    return now.strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def ledger_path(agent_dir: Path) -> Path:
    return state_dir(agent_dir) / "ledger.json"


def read_ledger(agent_dir: Path) -> dict[str, str]:
    try:
        data = read_state_json(ledger_path(agent_dir))  # a regular file of ours, bounded: never a FIFO
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _write_ledger(
    agent_dir: Path, report: CycleReport, completed_at: datetime, extra: dict[str, str] | None = None
) -> None:
    ledger = read_ledger(agent_dir)
    ledger.update(
        {
            "lastCompletedAt": format_timestamp(completed_at),
            "lastCycleId": report.cycle_id,
            **(extra or {}),
        }
    )
    replace_file(ledger_path(agent_dir), json.dumps(ledger, indent=2).encode(), UNCHECKED)


def _record_in_rockbot_ledger(agent_dir: Path, at: datetime) -> None:
    """RockBot's ``dream-pass-ledger.json`` (pass_ledger.py): recorded on a cycle that reviewed entries, as RockBot's
    pass records itself only when it reviewed something (2 or more eligible, a usable reply). Bookkeeping: a
    failure to write it is logged, never the cycle's failure."""
    try:
        record_consolidation(agent_dir, at)
    except (OSError, MemoryStoreError) as exc:
        log.warning("RockBot's dream-pass ledger not updated: %s", exc)


def sweep_leftovers(agent_dir: Path, memory_root: Path, memory_format: MemoryFormat | None = None) -> SweepReport:
    """Clean what killed writes of ours left in the memory tree and the state directory (the caller holds the cycle
    lock): our temps go, displaced versions of the agent's are kept as conflict copies and reported. A Markdown
    format's own directory (the agent's files) is swept too."""
    swept = MemoryStore(memory_root).sweep()
    state = sweep(state_dir(agent_dir))
    swept.removed += state.removed
    if memory_format is not None and memory_format.name != ROCKBOT:
        agent_files = memory_format.sweep(agent_dir)
        swept.removed += agent_files.removed
        swept.kept += agent_files.kept
        swept.conflict_copies += agent_files.conflict_copies
    return swept


def recover_journals(
    agent_dir: Path, memory_root: Path, now: datetime | None = None
) -> list[tuple[str, ExecutionTally]]:
    """Finish every journal a killed cycle left behind. Idempotent. A journal that cannot be read is moved aside
    (kept) and reported; a step that fails is recorded and skipped, so recovery always completes."""
    store = MemoryStore(memory_root)
    done = []
    undone: set[str] | None = None
    for path in incomplete_journals(agent_dir):
        try:
            journal = Journal.load(path)
        except UnreadableJournalError as exc:
            log.error("%s; moved aside to %s, recovery goes on without it", exc, set_aside(path))
            continue
        if journal.complete:
            continue
        if undone is None:
            undone = {j for r in read_reversals(agent_dir)[0] for j in r.reversed_journals}
        if journal.header.cycle_id in undone:
            # Undone (or being undone): finishing it would archive sources "merged into" a successor the undo archived
            # (issue 22). Closed as undone; an unfinished undo is resumed instead (``resume_undos``).
            log.warning("journal %s belongs to an undone cycle: closed, not finished", path)
            with contextlib.suppress(OSError):
                journal.close_undone()
            continue
        log.warning("recovering interrupted cycle %s from its journal %s", journal.header.cycle_id, path)
        tally = Executor(store, journal, now or utcnow()).run()
        log.info(
            "recovered cycle %s — %d created, %d archived, %d conflicts, %d failed",
            journal.header.cycle_id,
            tally.created,
            tally.archived,
            tally.conflicts,
            tally.failed,
        )
        done.append((journal.header.cycle_id, tally))
    return done


def recover(agent_dir: Path, memory_root: Path, now: datetime | None = None) -> list[tuple[str, ExecutionTally]]:
    """``sweep_leftovers`` then ``recover_journals``: what ``dreamkeeper recover`` and every cycle do first."""
    sweep_leftovers(agent_dir, memory_root)
    return recover_journals(agent_dir, memory_root, now)


class Cycle:
    def __init__(self, options: CycleOptions, proposer: Proposer) -> None:
        self.options = options
        self.proposer = proposer
        self.settings = options.settings
        self.agent_dir = options.agent_dir
        self.store = MemoryStore(options.memory_root)
        self.now = options.now or utcnow()
        self.cycle_id = new_cycle_id(self.now)
        rockbot = self.settings.rockbot
        if options.memory_format.name != ROCKBOT:
            # Another agent's directory: RockBot's configuration files are not read there (its defaults stand).
            rockbot = rockbot.model_copy(update={"read_agent_settings": False})
        self.agent = agent_view(self.agent_dir, rockbot)
        for note in self.agent.notes:
            log.warning("agent settings: %s", note)
        self.context = CycleContext(
            cycle_id=self.cycle_id,
            agent_dir=self.agent_dir,
            store=self.store,
            settings=self.settings,
            now=self.now,
            clock_given=options.now is not None,
            stage=self._stage,
            memory_format=options.memory_format,
            agent=self.agent,
        )
        self.effects: Effects = DryRun(self.context) if options.dry_run else Writes(self.context)
        self.stages = Stages()
        self._head = ReportHead(self.cycle_id, str(self.agent_dir), proposer.name, self.now, self.agent.described())
        self._frozen = False
        self.clock = ClockCheck(self.now)  # checked once recovery is done (``check_clock``)
        self._budget: LossBudget | None = None  # RockBot's audit's loss budget for this cycle (pacing.py)
        self._fold_waiting = 0

    def _stage(self, name: str) -> None:
        log.debug("cycle %s: %s", self.cycle_id, name)
        if self.options.progress:
            self.options.progress(name)

    async def run(self) -> CycleOutcome:
        memory_format = self.context.memory_format
        if memory_format.name != ROCKBOT:
            memory_format.check(self.agent_dir)  # the agent's Markdown directory (the records are made by ingest)
        elif not self.options.memory_root.is_dir():
            raise FileNotFoundError(f"no memory directory at {self.options.memory_root}; nothing was changed")
        with self.effects.hold():
            try:
                return await self._run_stages()
            except Exception as exc:
                failed = compose_report(
                    self._head,
                    self.stages,
                    "failed",
                    finished_at=utcnow(),
                    error=f"{type(exc).__name__}: {exc}",
                    first_write_at=self.effects.first_write_at,
                )
                self.effects.record_failure(failed, exc)
                raise
            finally:
                self._thaw()
                await self.proposer.aclose()
                if self.options.embedder is not None:
                    await self.options.embedder.aclose()

    async def _run_stages(self) -> CycleOutcome:
        s, effects = self.stages, self.effects
        if (marker := read_pause_marker(self.agent_dir, self.agent.pause_marker)) is not None:
            return self._paused(marker)
        s.recovered = effects.recover()
        self.clock = check_clock(
            self.agent_dir,
            self.now,
            read_ledger(self.agent_dir),
            timedelta(days=self.settings.clock_max_gap_days) if self.settings.clock_max_gap_days > 0 else None,
            trust=self.options.trust_clock,
        )
        if not self.options.force and (reason := effects.too_soon()) is not None:
            return self._skipped(reason)
        s.ingested = effects.ingest()
        s.vocabulary = self._load_vocabulary()
        s.purged = effects.purge(s.vocabulary.vocabulary, self.clock)
        s.snapshot = effects.snapshot(s.purged)
        self._freeze()  # the snapshot lives for the whole cycle
        # The repair first: it only puts the agent's own write-backs right, and a held plan is judged against the
        # corpus as repaired (a repair that touched what the plan read makes the plan stale, so it is planned afresh).
        s.repaired = effects.repair(s.snapshot)
        waiting = effects.pending_hold()
        if waiting is not None and (outcome := self._resolve_hold(waiting, s.repaired.snapshot)) is not None:
            return outcome
        if s.approved is not None and s.approved.apply:
            repaired = s.repaired.snapshot
            s.folded = Folded(repaired.scan, repaired.live)
            held_plan = s.approved.held.plan(repaired.live)
            s.validated = Validated(Decisions(), held_plan, s.vocabulary.vocabulary)
            s.capped = Capped(s.validated)
        else:
            s.folded = self._fold(s.repaired.snapshot)
            s.decayed = self._decay(s.folded)
            s.embedded = await self._embed_missing(s.decayed)
            s.gated = self._gate(s.decayed)
            s.subsumed = self._subsume(s.gated, s.vocabulary.vocabulary)
            s.proposed = await self._propose(s.gated, s.decayed, s.subsumed)
            s.validated = await self._validate(s.gated, s.proposed, s.decayed, s.vocabulary.vocabulary, s.subsumed)
            s.capped = self._cap(s.decayed.live, s.validated)
        s.usage = self._usage()
        s.applied = effects.apply(s.folded, s.capped.validated)
        s.reembedded = await self._embed_written(s.folded, s.applied)
        s.rendered = effects.render()
        s.measured = effects.measure(s.snapshot, s.folded, s.applied, s.validated)
        # An approved hold gated nothing: its corpus is clustered for the backlog alone.
        clusters = s.gated.gating.all_clusters if s.gated else self._clusters(s.folded.live)
        backlog = duplicate_backlog(clusters, s.applied.plan)
        s.measured = replace(s.measured, counts=s.measured.counts + CycleCounts(duplicate_backlog=backlog))
        report = compose_report(
            self._head, s, self._result(s.validated), finished_at=utcnow(), first_write_at=effects.first_write_at
        )
        broken = invariant_error(report)
        if report.write_failures or broken is not None:
            # Every change that could be made was, and the journal is complete; but a cycle the filesystem would not
            # let write (a read-only tree, files it may not replace) has failed, and says so. An entry that cannot be
            # written back (its own content) only fails its own step: one bad entry never stops a cycle. So has a
            # cycle whose end-of-run invariant found a loss (even one it reversed): a stage slipped.
            first = next((n for n in report.notes if n.startswith("not written: ")), "")
            error = f"{report.write_failures} change(s) could not be written; {first}".rstrip("; ")
            if broken is not None:
                error = broken if not report.write_failures else f"{error}; {broken}"
            report = compose_report(
                self._head,
                s,
                "failed",
                finished_at=report.finished_at,
                error=error,
                first_write_at=effects.first_write_at,
            )
        path = effects.record(report)
        _log_summary(report)
        decided = s.validated.plan if s.validated else None
        return CycleOutcome(report, s.applied.plan, s.gated.gating if s.gated else None, path, decided)

    # ---- the blast radius (blast.py) -----------------------------------------------------------------------

    def _cap(self, live: list[StoredEntry], validated: Validated) -> Capped:
        """A plan taking too much of the live corpus out is not applied: kept for a human, nothing archived.
        ``live`` is the corpus the plan was made from (after the fold and the decay, which have written)."""
        self._stage("blast-radius")
        settings, plan = self.settings, validated.plan
        drop = live_drop(plan)
        # Paced (pacing.py): past what RockBot's audit allows before its next run, the plan is held as well.
        paced = self._budget is not None and drop > self._budget.left
        if not paced and not exceeds(drop, len(live), settings.archive_cap, settings.archive_cap_min_entries):
            return Capped(validated)
        held = HeldPlan.of(self.cycle_id, self.now, plan, live, settings.archive_cap)
        self.effects.keep_hold(held)
        why = f" (paced: {self._budget.describe()}, {self._budget.left} left)" if paced and self._budget else ""
        note = f"held for approval: {held.describe()}{why}; approve with approve_hold={held.cycle_id}"
        log.warning("blast radius: %s", note)
        nothing = Validated(
            validated.decisions,
            Plan(),
            validated.vocabulary,
            validated.declined,
            undecided=validated.undecided,
            undecided_entries=validated.undecided_entries,
        )
        return Capped(nothing, held, CycleCounts(held=drop), (note,))

    def _resolve_hold(self, waiting: HeldPlan, snapshot: Snapshot) -> CycleOutcome | None:
        """A plan waits: applied when approved and the corpus is unchanged; discarded when the corpus changed (the
        cycle plans afresh); otherwise the cycle is skipped (no proposer is asked again for the same corpus)."""
        changed = waiting.changed(snapshot.live)
        if changed:
            note = f"held plan of cycle {waiting.cycle_id} discarded: {len(changed)} entr(ies) changed since"
            log.warning("blast radius: %s (%s)", note, ", ".join(changed[:5]))
            self.effects.settle_hold(waiting, "stale")
            self.stages.approved = Approved(waiting, apply=False, notes=(note,))
            return None
        if self.options.approve_hold == waiting.cycle_id:
            note = f"applied the plan held by cycle {waiting.cycle_id} (approved; the corpus was unchanged)"
            log.info("blast radius: %s", note)
            self.stages.approved = Approved(waiting, notes=(note,))
            self.effects.settle_hold(waiting, "applied")
            return None
        return self._skipped(
            f"a plan is held for approval: {waiting.describe()}; approve it with approve_hold={waiting.cycle_id}"
        )

    def _result(self, validated: Validated) -> CycleResult:
        """What a cycle that ran to the end reports: proposer-failed when the model was asked and no reply was
        usable (#18: every request failed and the cycle said completed, exit 0); a dry run stays a dry run."""
        result = self.effects.result
        if result == "completed" and validated.decisions.batches.failure is not None:
            return "proposer-failed"
        return result

    # ---- stages shared by a real cycle and a dry run ----------------------------------------------------------

    def _paused(self, marker: PauseMarker) -> CycleOutcome:
        """The agent's memory audit paused consolidation: nothing is written under memory/, not even recovery.

        The marker means entries vanished and a person has to look; the files are left exactly as the audit saw
        them. A cycle interrupted earlier stays half-applied, which loses nothing (successors are created before
        their sources are archived): it is finished by the first cycle after the marker is removed, or by
        ``dreamkeeper recover`` run by hand."""
        log.warning("memory consolidation %s", marker.describe())
        notes = tuple(
            f"journal {path.name} of an interrupted cycle left unfinished while paused (finished by the next cycle "
            "after the marker is removed, or by `dreamkeeper recover`)"
            for path in incomplete_journals(self.agent_dir)
        )
        return self._skipped(marker.describe(), paused=marker, notes=notes)

    def _skipped(self, reason: str, *, paused: PauseMarker | None = None, notes: tuple[str, ...] = ()) -> CycleOutcome:
        log.info("memory consolidation skipped — %s", reason)
        scan = screened(self.store.scan(), self.store.root)
        live = len(scan.live)
        counts = CycleCounts(
            total=live,
            live_entries=live,
            archived_entries=len(scan.archived),
            paused=1 if paused is not None else 0,
        ) + unusable_files(scan)
        self.stages.skipped = Skipped(reason, counts, paused, notes)
        report = compose_report(
            self._head, self.stages, "skipped", finished_at=utcnow(), first_write_at=self.effects.first_write_at
        )
        broken = invariant_error(report)  # what recovery did before the skip is checked all the same
        if broken is not None:
            report = compose_report(
                self._head, self.stages, "failed", finished_at=report.finished_at, error=broken,
                first_write_at=self.effects.first_write_at,
            )  # fmt: skip
        return CycleOutcome(report, report_path=self.effects.record(report))

    def _load_vocabulary(self) -> VocabularyLoaded:
        self._stage("vocabulary")
        path = Path(self.settings.vocabulary_path)
        if not path.is_absolute():
            path = self.agent_dir / path
        loaded = load_vocabulary(path)
        if loaded.status != "fallback":
            return VocabularyLoaded(loaded.vocabulary, loaded.status)
        return VocabularyLoaded(
            loaded.vocabulary,
            loaded.status,
            CycleCounts(vocabulary_fallback=1),
            (f"vocabulary fallback: {loaded.error}",),
        )

    def _fold(self, snapshot: Snapshot) -> Folded:
        """Exact duplicates, planned here; executed (or, in a dry run, only taken out of the corpus) by the effects."""
        self._stage("fold")
        folds = self._plan_folds(snapshot)
        paced = CycleCounts(fold_paced=self._fold_waiting)
        if not folds:
            return Folded(snapshot.scan, snapshot.live, counts=paced)
        folded = self.effects.fold(snapshot, folds)
        return replace(folded, counts=folded.counts + paced)

    def _plan_folds(self, snapshot: Snapshot) -> list[FoldAction]:
        # Restored by a person: never folded again, so the restore sticks (issue 22).
        unrestored = [s for s in snapshot.live if RESTORED_BY_HAND not in (s.entry.metadata or {})]
        folds = plan_folds(scoped(unrestored, self.settings.scope), self.settings, self.now)
        if self.settings.rockbot.pace_audit_loss:
            self._budget = loss_budget(
                self.agent_dir, self.agent, len(snapshot.live), self.settings.rockbot.read_agent_settings
            )
        folds, self._fold_waiting = pace_folds(folds, self._budget)
        for fold in folds:
            log.info(
                "folded %d exact duplicate(s) [%s] into %s",
                len(fold.copies),
                ", ".join(c.id for c in fold.copies),
                fold.survivor.id,
            )
        if folds:
            n_copies = sum(len(f.copies) for f in folds)
            log.info("exact-duplicate fold — %d copy(s) folded across %d group(s)", n_copies, len(folds))
        return folds

    def _decay(self, folded: Folded) -> Decayed:
        """Importance decay, planned here and written (or, in a dry run, only shown) by the effects."""
        self._stage("decay")
        if self.settings.decay.active and not self.clock.allows:
            refusal = self.clock.refusal("decay")
            log.warning("importance decay pass — %s", refusal)
            return Decayed(folded.live, counts=CycleCounts(clock_refusals=1), notes=(refusal,))
        plan = plan_decay(scoped(folded.live, self.settings.scope), self.settings.decay, self.settings.floor, self.now)
        if not plan.actions:
            return Decayed(folded.live)
        decayed = self.effects.decay(folded, plan)
        log.info(
            "importance decay pass — %d entries decayed (%d left the high-value floor)",
            decayed.counts.decayed,
            decayed.counts.decay_left_floor,
        )
        return decayed

    def _gate(self, decayed: Decayed) -> Gated:
        self._stage("gating")
        live = decayed.live
        in_scope = scope_ids(live, self.settings.scope)
        # Restored by a person: never offered again (merged or pruned), so the restore sticks (issue 22).
        restored = {s.id for s in live if RESTORED_BY_HAND in (s.entry.metadata or {})}
        if restored:
            log.info("%d entr(ies) restored by hand are not offered for merging or pruning", len(restored))
            in_scope = frozenset((in_scope if in_scope is not None else {s.id for s in live}) - restored)
        gating = select_candidates(live, self.settings, self.now, self._embedding_loader(), in_scope)
        log.info(
            "consolidation reviewing %d of %d entries (%d withheld as reviewed-and-unchanged)",
            len(gating.eligible),
            len(live) if in_scope is None else len(in_scope),
            gating.withheld,
        )
        counts = CycleCounts(
            reviewed=len(gating.eligible),
            withheld=gating.withheld,
            backoff_held=gating.held,
            clusters=len(gating.clusters),
            reopened=len(gating.reopened),
        )
        return Gated(gating, counts)

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

    def _clusters(self, live: list[StoredEntry]) -> list[Cluster]:
        return select_candidates(live, self.settings, self.now, self._embedding_loader()).all_clusters

    def _embedding_loader(self) -> Callable[[str], np.ndarray | None]:
        present = self.store.embedding_files()
        generated = self.stages.embedded.vectors if self.stages.embedded is not None else {}

        def load(entry_id: str) -> np.ndarray | None:
            if entry_id in generated:  # this cycle's (in a dry run, never written)
                return generated[entry_id]
            # Listed first: most entries of a corpus may have no embedding, and a failed open costs more than a read.
            return self.store.load_embedding(entry_id) if embedding_file_name(entry_id).casefold() in present else None

        return load

    async def _embed_missing(self, decayed: Decayed) -> Embedded:
        if self.options.embedder is None:
            return Embedded()
        self._stage("embeddings")
        return await embed_missing(self.store, decayed.live, self.options.embedder, self.effects.write_embeddings)

    async def _embed_written(self, folded: Folded, applied: Applied) -> Embedded | None:
        if self.options.embedder is None:
            return None
        self._stage("embeddings")
        return await embed_written(folded, applied, self.options.embedder, self.effects.write_embeddings)

    def _freeze(self) -> None:
        """Move everything alive (the parsed snapshot above all) out of the cyclic collector's reach until the cycle
        ends: the snapshot lives for the whole cycle, and every full collection walked all of it again (about a
        sixth of a 100k-entry scan's CPU). Reference counting still frees whatever is dropped meanwhile."""
        if not self._frozen:
            gc.freeze()
            self._frozen = True

    def _thaw(self) -> None:
        if self._frozen:
            gc.unfreeze()
            self._frozen = False


def duplicate_backlog(clusters: list[Cluster], plan: Plan) -> int:
    """Near-duplicate clusters of the corpus this cycle clustered that are still whole after it: none of their
    members left the live corpus (waiting to reopen, declined, undecided, or held with the plan)."""
    leaving = plan.leaving_ids()
    return sum(1 for c in clusters if not any(i in leaving for i in c.ids))


def _counted_copies(store: MemoryStore, journal: Journal | None) -> set[Path]:
    """The fold copies of every group whose survivor update is done (the survivor counts them)."""
    if journal is None:
        return set()
    steps, path_of = journal.header.steps, StepPaths(store, journal.header)
    done = {s.group for n, s in enumerate(steps) if s.op == "update" and journal.outcomes.get(n) == "done"}
    return {path_of(s) for s in steps if s.op == "archive" and s.group in done}


def repair_counts(plan: RepairPlan, journal: Journal) -> CycleCounts:
    """What a stale write-back repair did, from its journal's outcomes (a conflict leaves a copy to the next)."""
    stale = resurrected = carried = 0
    for number, step in enumerate(journal.header.steps):
        if journal.outcomes.get(number) != "done":
            continue
        repair = (step.baseline or {}).get("repair")
        if step.op == "archive" and step.kind == "stale":
            resurrected += 1
        if repair in ("restore", "carry+restore"):
            stale += 1
        if repair in ("carry", "carry+restore"):
            carried += int(((step.baseline or {}).get("layer") or {}).get("changes", {}).get("rc", 0))
    return CycleCounts(
        stale_write_backs=stale + resurrected,
        resurrected=resurrected,
        reinforcements_carried=carried,
        stale_edits=plan.edited,
    )


def _log_summary(report: CycleReport) -> None:
    if any_counted(report, lambda c: c.safeguard):
        log.info("consolidation safeguards fired — %s", sentence(report, lambda c: c.safeguard))
    if report.result == "proposer-failed":
        log.warning("dream cycle %s: the proposer failed — %s", report.cycle_id, report.proposer_failure)
    log.info(
        "dream cycle %s %s — %s",
        report.cycle_id,
        {"dry-run": "planned (dry run)", "proposer-failed": "finished without a usable proposer reply"}.get(
            report.result, "complete"
        ),
        sentence(report, lambda c: c.logged),
    )


class Writes:
    """The stages that write, for real: recovery, purge, the fold, apply, and the measurements after apply."""

    result: CycleResult = "completed"

    def __init__(self, context: CycleContext) -> None:
        self.context = context
        self.store = context.store
        self.first_write_at: datetime | None = None
        self._stamped: dict[str, Fingerprint] = {}  # path -> fingerprint of each review stamp this cycle wrote
        self._written_ids: set[str] = set()  # every entry a step of this cycle (or of a recovered one) wrote
        self._journals: dict[str, Journal] = {}  # this cycle's journals, by id: folded into the write-back index
        # The end-of-run invariant (invariant.py): the live corpus before the first write, and the tags of every
        # archive this run makes (its own journals, those recovery finishes, the undos it resumes).
        self._before: Census | None = None
        self._tags: set[str] = {context.cycle_id + suffix for suffix in JOURNAL_SUFFIXES}
        self._purged: frozenset[str] = frozenset()
        self._clock: ClockCheck | None = None  # as checked when the cycle began; a trusted disagreement is recorded

    def _writing(self, at: datetime | None = None) -> None:
        """The cycle is about to write under memory/ (an upper bound on when it first did is never reported)."""
        if self.first_write_at is None:
            self.first_write_at = at or utcnow()

    def hold(self) -> AbstractContextManager[object]:
        return CycleLock(self.context.agent_dir, f"dream cycle {self.context.cycle_id}")

    def recover(self) -> Recovered:
        self.context.stage("recover")
        agent_dir = self.context.agent_dir
        check_state_files(agent_dir)  # a FIFO, device, link or directory among them: one clear error, nothing changed
        undos = unfinished_undos(read_reversals(agent_dir)[0])
        before: Census | None = None
        if next(incomplete_journals(agent_dir), None) is not None or undos:
            self._writing()
            # Recovery is checked by the end-of-run invariant on its own (a cycle may then be skipped, or fail).
            before = Census.of(screened(self.store.scan(), self.store.root).entries)
        swept = sweep_leftovers(agent_dir, self.store.root, self.context.memory_format)
        if swept.removed or swept.restored or swept.put_back:
            self._writing()
        done = recover_journals(agent_dir, self.store.root, self.context.now)
        resumed = resume_undos(agent_dir, self.store.root) if undos else []
        notes = [f"finished interrupted cycle {cycle_id}: {tally.archived} archive(s)" for cycle_id, tally in done]
        notes += [note for _, tally in done for note in _not_written(tally)]
        notes += [f"finished the interrupted undo of cycle {u.cycle_id}: {len(u.restored)} restored" for u in resumed]
        notes += [f"undo of {u.cycle_id}: {detail}" for u in resumed for detail in u.details]
        notes += [f"conflict copy kept: {path}" for path in swept.conflict_copies]
        notes += [f"put back an entry an interrupted purge had parked: {path}" for path in swept.restored]
        notes += [f"put back the agent's newer version displaced by an interrupted write: {p}" for p in swept.put_back]
        tags: set[str] = set()
        for cycle_id, tally in done:
            self._written_ids |= tally.written_ids
            tags.add(cycle_id)
        for undo in resumed:
            tags |= undo_tags(undo.journals)
        counts = CycleCounts(
            write_failures=sum(tally.write_failed for _, tally in done),
            temps_removed=len(swept.removed),
            conflict_copies=len(swept.conflict_copies),
        )
        if before is not None:
            checked = end_check(
                agent_dir,
                self.store,
                before,
                scan_map(self.store),
                tags_in(tags),
                load_vocabulary(_vocabulary_path(self.context)).vocabulary,
                what="recovery",
            )
            counts += checked.counts
            notes += checked.notes
        return Recovered(counts, tuple(notes))

    def too_soon(self) -> str | None:
        minimum = self.context.settings.min_interval
        last = read_ledger(self.context.agent_dir).get("lastCompletedAt")
        if not last or minimum.total_seconds() <= 0:
            return None
        try:
            age = self.context.now - datetime.fromisoformat(last)
        except (ValueError, TypeError):
            return None
        if age < -SKEW:
            # A last completion dated ahead of the clock says nothing about when this cycle may run: skipping would
            # skip every cycle until the clock caught up, silently (issue 22). The clock check refuses purge and
            # decay instead, and says which times disagree.
            return None
        return f"last completed {age} ago, minimum interval {minimum}" if age < minimum else None

    def ingest(self) -> Ingested:
        memory_format = self.context.memory_format
        if memory_format.name == ROCKBOT:
            return Ingested()
        self.context.stage("ingest")
        prepared = memory_format.prepare(self.context.agent_dir, self.store, self.context.now)
        return Ingested(format_counts(prepared.counts), prepared.notes)

    def render(self) -> Rendered:
        memory_format = self.context.memory_format
        if memory_format.name == ROCKBOT:
            return Rendered()
        self.context.stage("render")
        finished = memory_format.finish(self.context.agent_dir, self.store, self.context.now)
        if finished.files_written:
            self._writing()
        return Rendered(format_counts(finished.counts), finished.notes)

    def purge(self, vocabulary: Vocabulary, clock: ClockCheck) -> Purged:
        self._clock = clock
        purged = purge_stage(self.context, vocabulary, self._writing, clock)
        if purged.scan is not None and self._before is None:
            # Its scan was read before the purge deleted anything (the purge deletes archived entries only): the live
            # corpus before. A purge whose holds rewrote files gives none; the snapshot's own scan then serves.
            self._before = Census.of(purged.scan.entries)
        self._purged = purged.purged_ids
        trusted = clock.trusted_note()
        return replace(purged, notes=(*purged.notes, trusted)) if trusted else purged

    def snapshot(self, purged: Purged) -> Snapshot:
        self.context.stage("snapshot")
        scan = purged.scan
        if scan is None or purged.conflicts:
            scan = screened(self.store.scan(), self.store.root)
        elif purged.purged_ids:
            scan = ScanResult(
                entries=[s for s in scan.entries if s.id not in purged.purged_ids],
                malformed=scan.malformed,
                duplicates=scan.duplicates,
            )
        if self._before is None:
            self._before = Census.of(scan.entries)  # the corpus before anything but a purge of archives was written
        return snapshot_of(scan, purged.purged_ids)

    def repair(self, snapshot: Snapshot) -> Repaired:
        self.context.stage("repair")
        since = self._window_start()
        index, plan = plan_from_journals(self.context.agent_dir, snapshot.scan, self.context.now, since)
        try:
            if not plan.steps:
                return Repaired(snapshot, CycleCounts(stale_edits=plan.edited), plan.notes)
            journal_id = self.context.cycle_id + WRITEBACK_JOURNAL_SUFFIX
            steps = list(plan.steps)
            journal = write_journal_steps(self.context.agent_dir, journal_id, steps, self.store, self.context.now)
            self._journals[journal_id] = journal
            self._writing()
            tally = Executor(self.store, journal, self.context.now).run()
            scan = self._reread(snapshot.scan, plan.touched)
            # A stale copy the agent wrote yet again meanwhile (its repair refused as a conflict, or written over it
            # since) sits this cycle out: the next one repairs it; folded or merged meanwhile it would be counted
            # twice.
            held = {s.path for s in live_of(scan) if s.path in plan.stale_paths and index.quick(s.id, s.entry) is False}
            live = [s for s in live_of(scan) if s.path not in held]
            counts = repair_counts(plan, journal) + CycleCounts(conflicts=tally.conflicts)
            return Repaired(replace(snapshot, scan=scan, live=live), counts, plan.notes)
        finally:
            # Saved now, and let go: a corpus's worth of records is not held through the rest of the cycle (a
            # cycle that writes loads it again at its end to fold its journals in).
            index.expire(since)
            self._save_index(index)

    def _window_start(self) -> datetime:
        return window_start(self.context.settings.retention, self.context.now)

    def _update_index(self) -> None:
        """Fold this cycle's journals into the write-back index (complete ones: a failed cycle's are finished by
        recovery, and folded in by the next cycle)."""
        if not self._journals:
            return
        try:
            index = WriteBackIndex.load(self.context.agent_dir)
            catch_up(index, self.context.agent_dir, self._window_start(), self._journals)
        except Exception:  # a cache of the journals: the next cycle catches up (or rebuilds) from them
            log.exception("the write-back index was not updated; the next cycle catches up from the journals")
            return
        self._save_index(index)

    def _save_index(self, index: WriteBackIndex) -> None:
        try:
            index.save(self.context.agent_dir)
        except OSError as exc:  # a full disk, say: the journals say it all, the next cycle catches up from them
            log.warning("the write-back index was not saved (%s); the next cycle catches up from the journals", exc)

    def fold(self, snapshot: Snapshot, folds: list[FoldAction]) -> Folded:
        fold_plan = Plan(folds=folds)
        tally = self._execute(fold_plan, suffix=FOLD_JOURNAL_SUFFIX)
        touched = {f.survivor.path for f in fold_plan.folds} | {c.path for f in fold_plan.folds for c in f.copies}
        scan = self._reread(snapshot.scan, touched)
        # A copy whose survivor now counts it is out of this cycle, archived or not: its archive refused (the agent
        # wrote it meanwhile), or the agent's stale copy back over the archive, it would be merged and counted again.
        # The next cycle's repair archives it, carrying what the agent changed.
        held = _counted_copies(self.store, self._journals.get(self.context.cycle_id + FOLD_JOURNAL_SUFFIX))
        live = [s for s in live_of(scan) if s.path not in held]
        n = tally.archived_folded
        counts = CycleCounts(folded=n, archived=n, archived_with_replacement=n, write_failures=tally.write_failed)
        return Folded(scan, live, tuple(folds), counts, _not_written(tally))

    def decay(self, folded: Folded, plan: DecayPlan) -> Decayed:
        decay_plan = Plan(decays=list(plan.actions))
        executor = self._executor(decay_plan, DECAY_JOURNAL_SUFFIX)
        tally = executor.run() if executor is not None else ExecutionTally()
        self._stamped.update(executor.written if executor is not None else {})
        self._written_ids |= tally.written_ids
        # The entries as written, with the fingerprints of what was written: later writes this cycle (review stamps)
        # are guarded by them. An entry the agent changed meanwhile keeps its snapshot and conflicts again later.
        written = {}
        for action in plan.actions:
            fingerprint = executor.written.get(str(action.target.path)) if executor is not None else None
            if fingerprint is not None:
                written[action.target.id] = StoredEntry(action.updated, action.target.path, fingerprint)
        live = [written.get(s.id, s) for s in folded.live]
        left = frozenset(i for i in plan.left_floor if i in written)
        counts = CycleCounts(
            decayed=len(written),
            decay_left_floor=len(left),
            conflicts=tally.conflicts,
            write_failures=tally.write_failed,
        )
        return Decayed(
            live, tuple(a for a in plan.actions if a.target.id in written), left, counts, _not_written(tally)
        )

    def apply(self, folded: Folded, validated: Validated) -> Applied:
        self.context.stage("apply")
        tally = self._execute(validated.plan)
        counts = CycleCounts(
            saved=tally.created + tally.updated,
            merged_into_existing=tally.updated,
            ephemeral=tally.ephemeral,
            archived=tally.archived,
            archived_with_replacement=tally.archived_merged,
            conflicts=tally.conflicts,
            write_failures=tally.write_failed,
        )
        return Applied(validated.plan, counts, _not_written(tally))

    def measure(self, snapshot: Snapshot, folded: Folded, applied: Applied, validated: Validated) -> Measured:
        self.context.stage("report")
        final = self._final_state(folded.scan)
        census_index = validated.decisions.census_index
        checked = self._check_end(
            final, validated.vocabulary, lambda: _final_index(census_index, applied.plan, folded.live, final)
        )
        if checked.reversed.restored:
            final = self._final_state(folded.scan)  # the corpus as the reversal left it
        # Gone, and not purged: ours when this cycle wrote the entry (the alert must mean us), else the agent's own
        # deletion (RockBot's DeleteMemory, a re-categorisation) while the cycle ran.
        gone = snapshot.ids_before - final.ids - snapshot.purged_ids
        ours = {entry_id for entry_id in gone if entry_id in self._written_ids}
        counts = CycleCounts(
            hard_deletes=len(ours),
            agent_deletes=len(gone) - len(ours),
            live_entries=len(final.live),
            archived_entries=final.archived,
        )
        return Measured(counts + checked.counts, tuple(checked.verdict.lost), checked.notes)

    def _check_end(self, final: FinalState, vocabulary: Vocabulary, index: Callable[[], CoverageIndex]) -> EndCheck:
        """The end-of-run invariant over the whole cycle, recovery and purge included (invariant.py)."""
        if self._before is None:
            return EndCheck()
        return end_check(
            self.context.agent_dir,
            self.store,
            self._before,
            final.entries,
            tags_in(self._tags),
            vocabulary,
            purged=self._purged,
            index=index,
            what="cycle",
        )

    def write_embeddings(self, vectors: Mapping[str, Vector], replace: frozenset[str]) -> int:
        return write_vectors(self.store, vectors, replace)

    def record(self, report: CycleReport) -> Path:
        self._update_index()
        if report.result == "completed":
            # On the cycle's own clock: a caller that sets `now` (simulations, tests) compares against the same clock.
            completed_at = self.context.now if self.context.clock_given else report.finished_at
            trusted = self._clock.ledger_update() if self._clock is not None else {}
            _write_ledger(self.context.agent_dir, report, completed_at or utcnow(), trusted)
            rockbot = self.context.memory_format.name == ROCKBOT  # never a RockBot file in another agent's folders
            if rockbot and self.context.settings.rockbot.pass_ledger and report.reviewed >= 2:
                _record_in_rockbot_ledger(self.context.agent_dir, completed_at or utcnow())
        return write_report(self.context.agent_dir, report)

    def record_failure(self, report: CycleReport, error: BaseException) -> None:
        if isinstance(error, MemoryStoreError | OSError):
            # Expected (a full or read-only volume, a state directory we may not use): one line, no traceback.
            log.error("dream cycle %s failed: %s; completed steps are journaled", report.cycle_id, error)
        else:
            log.exception("dream cycle %s failed; completed steps are journaled", report.cycle_id)
        self._update_index()
        try:
            write_report(self.context.agent_dir, report)
        except (MemoryStoreError, OSError) as exc:  # the same full disk: the failure is reported by the caller
            log.warning("could not keep the report of failed cycle %s: %s", report.cycle_id, exc)

    def pending_hold(self) -> HeldPlan | None:
        return read_pending(self.context.agent_dir)

    def keep_hold(self, held: HeldPlan) -> None:
        keep(self.context.agent_dir, held)

    def settle_hold(self, held: HeldPlan, outcome: str) -> None:
        settle(self.context.agent_dir, held, outcome)

    # ---- helpers -------------------------------------------------------------------------------------

    def _execute(self, plan: Plan, suffix: str = "") -> ExecutionTally:
        executor = self._executor(plan, suffix)
        if executor is None:
            return ExecutionTally()
        tally = executor.run()
        self._stamped.update(executor.written)
        self._written_ids |= tally.written_ids
        return tally

    def _executor(self, plan: Plan, suffix: str) -> Executor | None:
        """The plan journaled (fsynced) and ready to run; None when there is nothing to do."""
        if plan.is_empty:
            return None
        journal = write_journal(
            self.context.agent_dir, self.context.cycle_id + suffix, plan, self.store, self.context.now
        )
        self._journals[journal.header.cycle_id] = journal
        snapshot = {str(stamp.target.path): stamp.target for stamp in plan.stamps}
        leaving = (*(c for f in plan.folds for c in f.copies), *(s for m in plan.merges for s in m.sources))
        for stored in (*leaving, *(p.target for p in plan.prunes), *(d.target for d in plan.decays)):
            snapshot[str(stored.path)] = stored
        self._writing()
        return Executor(self.store, journal, self.context.now, snapshot)

    def _reread(self, scan: ScanResult, touched: set[Path]) -> ScanResult:
        """The snapshot after a stage wrote ``touched``: only those files are read again (a full rescan cost as much
        as the rest of a warm cycle at 100k entries). Entries the agent changed meanwhile keep their snapshot
        fingerprint, so any later write to them is refused as a conflict, exactly as for changes after a scan."""
        malformed = list(scan.malformed)

        def again(items: list[StoredEntry]) -> list[StoredEntry]:
            out: list[StoredEntry] = []
            for stored in items:
                if stored.path not in touched:
                    out.append(stored)
                elif stored.path.exists():
                    result = self.store.read_file(stored.path)
                    if isinstance(result, StoredEntry):
                        out.append(result)
                    else:
                        log.warning("skipping malformed memory file %s: %s (left untouched)", result.path, result.error)
                        malformed.append(result)
            return out

        return ScanResult(entries=again(scan.entries), malformed=malformed, duplicates=again(scan.duplicates))

    def _final_state(self, snapshot: ScanResult) -> FinalState:
        """What a scan after apply says, streamed: the snapshot is still referenced by the plan, and holding a
        second parsed copy of the corpus doubled peak memory (about 0.6 GiB more at 100k entries). A file still
        the snapshot's (or bearing the stamp this cycle wrote) is not read again: its parse is the snapshot's."""
        final = FinalState()
        first: dict[str, Path] = {}
        known = {str(s.path): s for s in (*snapshot.entries, *snapshot.duplicates)}
        for child in self.store.iter_file_entries():
            item = self._read_final(child, known.get(child.path))
            if isinstance(item, MalformedFile):
                continue
            final.ids.add(item.id)
            final.entries.setdefault(item.id, item)
            key = item.id.lower()
            if key in first:
                log.warning(
                    "entry id %s appears in %s and %s; the second is ignored this run (both kept)",
                    item.id,
                    first[key],
                    item.path,
                )
                continue
            first[key] = item.path
            if item.entry.is_live:
                final.live[item.id] = item.entry.content
            elif item.entry.is_archived:
                final.archived += 1
        return final

    def _read_final(self, child: os.DirEntry[str], seen: StoredEntry | None) -> StoredEntry | MalformedFile:
        if seen is not None:
            try:
                st = child.stat(follow_symlinks=False)
            except OSError:
                st = None
            # Unchanged, or exactly the review stamp this cycle wrote (a stamp changes only metadata: id, content and
            # live/archived state are the snapshot's). This scan only counts for the report, so size and mtime (ns)
            # are enough here; writes are guarded by the full fingerprint.
            if st is not None and any(
                fp is not None and (fp.size, fp.mtime_ns) == (st.st_size, st.st_mtime_ns)
                for fp in (seen.fingerprint, self._stamped.get(child.path))
            ):
                return seen
        result = self.store.read_file(Path(child.path))
        if isinstance(result, MalformedFile):
            log.warning("skipping malformed memory file %s: %s (left untouched)", result.path, result.error)
        return result


def _vocabulary_path(context: CycleContext) -> Path:
    path = Path(context.settings.vocabulary_path)
    return path if path.is_absolute() else context.agent_dir / path


NOTED_FAILURES = 20  # a read-only tree fails every step alike: the report names the first ones and counts the rest


def _not_written(tally: ExecutionTally) -> tuple[str, ...]:
    notes = [f"not written: {error}" for error in tally.errors[:NOTED_FAILURES]]
    if len(tally.errors) > NOTED_FAILURES:
        notes.append(f"not written: {len(tally.errors) - NOTED_FAILURES} more (each in the journal)")
    return tuple(notes)


@dataclass
class FinalState:
    """The corpus after apply: every id on disk, live id -> content, and how many entries are archived."""

    ids: set[str] = field(default_factory=set)
    live: dict[str, str] = field(default_factory=dict)
    archived: int = 0
    entries: dict[str, StoredEntry] = field(
        default_factory=dict
    )  # exact id -> the entry (the snapshot's when unchanged)


def _final_index(
    census_index: CoverageIndex | None, plan: Plan, live: list[StoredEntry], final: FinalState
) -> CoverageIndex:
    """An index of the live corpus after apply. The census left its index holding the planned corpus; moving it to
    the actual one (conflicts, failed creates, the agent's writes) by the difference gives the same multiset of
    texts, hence the same answers, as indexing every live entry again."""
    actual = final.live
    if census_index is None:
        index = CoverageIndex()
        for text in actual.values():
            index.add(text)
        return index
    leaving = plan.leaving_ids()
    planned = {s.id: s.entry.content for s in live if s.id not in leaving}
    planned.update({m.successor.id: m.successor.content for m in plan.merges})
    for entry_id, text in planned.items():
        if actual.get(entry_id) != text:
            census_index.remove(text)
    for entry_id, text in actual.items():
        if planned.get(entry_id) != text:
            census_index.add(text)
    return census_index


async def run_cycle(options: CycleOptions, proposer: Proposer) -> CycleOutcome:
    memory_format = options.memory_format
    if options.dry_run and memory_format.name != ROCKBOT:
        # A dry run writes nothing, the records included: it plans on a throwaway copy of them, ingested.
        memory_format.check(options.agent_dir)
        with memory_format.preview(options.agent_dir, options.now or utcnow()) as records:
            preview = replace(options, format=None, memory_dir=records)
            return await Cycle(preview, proposer).run()
    return await Cycle(options, proposer).run()


__all__ = ["Cycle", "CycleOptions", "CycleOutcome", "Writes", "census", "recover", "run_cycle"]
