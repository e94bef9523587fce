"""``Writes``: the cycle's ``Effects`` for real (``stages.py``): recovery, purge, the fold, apply, and the
measurements after apply. The dry run's counterpart is ``dryrun.DryRun``. Moved out of ``cycle.py`` unchanged (that
module had grown past 1,200 lines)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from dreamkeeper.consolidation.blast import HeldPlan, keep, read_pending, settle
from dreamkeeper.consolidation.clock import SKEW, ClockCheck
from dreamkeeper.consolidation.counts import CycleCounts
from dreamkeeper.consolidation.decay import DecayPlan
from dreamkeeper.consolidation.decay_journal import DecayTally, write_decay_journal
from dreamkeeper.consolidation.embed_stage import write_vectors
from dreamkeeper.consolidation.embeddings import Vector
from dreamkeeper.consolidation.executor import Executor
from dreamkeeper.consolidation.final_state import (
    FileEntry,
    FinalState,
    WriteStat,
    own_version,
    read_final,
    scan_final,
    write_stat,
)
from dreamkeeper.consolidation.final_state import final_index as _final_index
from dreamkeeper.consolidation.format_stages import format_counts
from dreamkeeper.consolidation.invariant import Census, Departure, EndCheck, departures, end_check, scan_map, tags_in
from dreamkeeper.consolidation.journal import (
    DECAY_JOURNAL_SUFFIX,
    FOLD_JOURNAL_SUFFIX,
    JOURNAL_SUFFIXES,
    WRITEBACK_JOURNAL_SUFFIX,
    ExecutionTally,
    Journal,
    incomplete_journals,
    write_journal_steps,
)
from dreamkeeper.consolidation.journal_steps import written_by
from dreamkeeper.consolidation.plan import DecayAction, FoldAction, Plan
from dreamkeeper.consolidation.plan_steps import write_plan_journal
from dreamkeeper.consolidation.purge_policy import purge_stage
from dreamkeeper.consolidation.quarantine import decay_keeps_fit, screened
from dreamkeeper.consolidation.quiet import REPAIR, QuietMemo, repair_state
from dreamkeeper.consolidation.recovery import (
    counted_copies,
    read_ledger,
    record_in_rockbot_ledger,
    recover_journals,
    repair_counts,
    sweep_leftovers,
    write_ledger,
)
from dreamkeeper.consolidation.report import CycleReport, CycleResult, write_report
from dreamkeeper.consolidation.stages import (
    Applied,
    CycleContext,
    Decayed,
    Folded,
    Ingested,
    Measured,
    Purged,
    Recovered,
    Rendered,
    Repaired,
    Snapshot,
    Validated,
    live_of,
    snapshot_of,
)
from dreamkeeper.consolidation.undo import resume_undos, undo_tags
from dreamkeeper.consolidation.writeback import WriteBackIndex, catch_up, plan_from_journals, window_start
from dreamkeeper.coverage import CoverageIndex, Vocabulary, load_vocabulary
from dreamkeeper.formats import ROCKBOT
from dreamkeeper.memory import (
    CycleLock,
    Entry,
    Fingerprint,
    MalformedFile,
    MemoryStoreError,
    ScanResult,
    StoredEntry,
    check_state_files,
    read_reversals,
    unfinished_undos,
    utcnow,
)

log = logging.getLogger(__name__)


class Writes:
    """The stages that write, for real: recovery, purge, the fold, apply, and the measurements after apply."""

    result: CycleResult = "completed"

    def __init__(self, context: CycleContext) -> None:
        self.context = context
        self.store = context.store
        self.first_write_at: datetime | None = None
        # Path -> this cycle's last write of the file: a stamp's or decay's size and mtime (its id, content and live
        # state are the snapshot's), or the entry a create, update or archive wrote, with the write's fingerprint.
        # Later looks at the file take it while its size and mtime are the write's (``final_state.own_version``).
        # The values themselves, no pair per write: a cold start decays and stamps every entry.
        self._own: dict[str, WriteStat | StoredEntry] = {}
        # Path -> the entry and fingerprint of this cycle's last write of the file, when that write was a decay: the
        # corpus index remembers them for the next scan (``CorpusIndex.remember``).
        self._decayed: dict[str, tuple[Entry, Fingerprint, str]] | None = {}
        self._written_ids: set[str] = set()  # every entry a step of this cycle (or of a recovered one) wrote
        self._journals: dict[str, Journal] = {}  # this cycle's journals, by id: folded into the write-back index
        # The end-of-run invariant (invariant.py): the live corpus before the first write, and the tags of every
        # archive this run makes (its own journals, those recovery finishes, the undos it resumes).
        self._before: Census | None = None
        self._tags: set[str] = {context.cycle_id + suffix for suffix in JOURNAL_SUFFIXES}
        self._purged: frozenset[str] = frozenset()
        self._clock: ClockCheck | None = None  # as checked when the cycle began; a trusted disagreement is recorded
        # Every entry file a plan of this cycle wrote or meant to write after the snapshot (``_executor``), and
        # whether anything else wrote entry files after it (a Markdown render): the final-state check reads the
        # former and trusts the snapshot for the rest only while the latter is False (``_final_state``).
        self._touched: set[str] = set()
        self._untracked = False
        # A plan that archives (a fold, a merge, a prune, a write-back repair) gives the invariant departures to
        # charge: its final state is read in full at once (a listing first would be thrown away: ``measure``).
        self._archives = False
        self._decays = DecayPlan()  # planned by the decay stage, written by apply (or by a held plan's cap)
        self._decay_tally = DecayTally()

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
        index = self.store.corpus_index
        listed = index.listings.for_sweep if index is not None else None
        swept = sweep_leftovers(agent_dir, self.store.root, self.context.memory_format, listed)
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
            self._untracked = True
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

    def repair(self, snapshot: Snapshot, quiet: QuietMemo | None = None, generation: str | None = None) -> Repaired:
        self.context.stage("repair")
        since = self._window_start()
        quiet = quiet if generation is not None else None
        state = repair_state(self.context.agent_dir) if quiet is not None else None
        if quiet is not None and state is not None and quiet.unchanged(REPAIR, generation, self.context.now, state):
            return Repaired(snapshot)  # the last cycle over this very corpus and these state files found nothing
        index, plan = plan_from_journals(self.context.agent_dir, snapshot.scan, self.context.now, since)
        try:
            if not plan.steps:
                return Repaired(snapshot, CycleCounts(stale_edits=plan.edited), plan.notes)
            journal_id = self.context.cycle_id + WRITEBACK_JOURNAL_SUFFIX
            steps = list(plan.steps)
            journal = write_journal_steps(self.context.agent_dir, journal_id, steps, self.store, self.context.now)
            self._journals[journal_id] = journal
            self._writing()
            self._archives = True
            executor = Executor(self.store, journal, self.context.now, remember=True)
            tally = executor.run()
            self._note_own(executor)
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
            if quiet is not None and state is not None and plan.nothing and not index.changed:
                oldest = index.oldest_journal()
                quiet.found_nothing(
                    REPAIR, generation, state, oldest + (self.context.now - since) if oldest is not None else None
                )
            self._save_index(index)

    def _window_start(self) -> datetime:
        return window_start(self.context.settings.retention, self.context.now)

    def _update_index(self) -> None:
        """Fold this cycle's journals into the write-back index (complete ones: a failed cycle's are finished by
        recovery, and folded in by the next cycle)."""
        # Decay's journal is not folded in (writeback/ingest.py): a steady cycle, whose only journal it is, leaves the
        # index as it is instead of loading and rewriting all of it.
        journals = {k: j for k, j in self._journals.items() if not k.endswith(DECAY_JOURNAL_SUFFIX)}
        if not journals:
            return
        try:
            index = WriteBackIndex.load(self.context.agent_dir)
            catch_up(index, self.context.agent_dir, self._window_start(), journals)
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
        held = counted_copies(self.store, self._journals.get(self.context.cycle_id + FOLD_JOURNAL_SUFFIX))
        live = [s for s in live_of(scan) if s.path not in held]
        n = tally.archived_folded
        counts = CycleCounts(folded=n, archived=n, archived_with_replacement=n, write_failures=tally.write_failed)
        return Folded(scan, live, tuple(folds), counts, _not_written(tally))

    def decay(self, folded: Folded, plan: DecayPlan) -> Decayed:
        """Decay planned, not yet written: the live entries as decayed, still with the fingerprints of the files as
        they are (every later write of the cycle is guarded by those). ``apply`` writes each decay with the cycle's
        other write of that entry (a stamp, an archive) or alone (docs/architecture.md, "Decay carried into the
        cycle's write"). Until then nothing is on disk and nothing journaled: a cycle that stops before apply
        leaves the corpus as it was, and the next cycle's decay reaches the same values (calendar-time invariant)."""
        self._decays = plan
        decayed = {a.target.id: StoredEntry(a.updated, a.target.path, a.target.fingerprint) for a in plan.actions}
        live = [decayed.get(s.id, s) for s in folded.live] if decayed else folded.live
        return Decayed(live, plan.actions, plan.left_floor)

    def write_decays(self, live: list[StoredEntry]) -> list[StoredEntry]:
        """Write the planned decays now, each alone (a plan held for approval writes nothing else this cycle, and
        remembers the corpus as these writes leave it); ``live`` with the fingerprints written."""
        decays, self._decays = self._decays, DecayPlan()
        tally, written = self._decay_alone(decays.actions, decays.left_floor)
        self._decay_tally = self._decay_tally + tally
        return [StoredEntry(s.entry, s.path, written[s.name]) if s.name in written else s for s in live]

    def _decay_alone(
        self, actions: tuple[DecayAction, ...], left_floor: frozenset[str]
    ) -> tuple[DecayTally, dict[str, Fingerprint]]:
        executor = self._executor(Plan(decays=list(actions)), DECAY_JOURNAL_SUFFIX)
        if executor is None:
            return DecayTally(), {}
        tally = executor.run()
        self._note_own(executor)
        self._written_ids |= tally.written_ids
        journal = executor.journal  # run: what the write-back index folds in of it is all that is kept
        self._journals[journal.header.cycle_id] = journal.as_folded()
        return DecayTally.of(tally, left_floor, _not_written(tally)), executor.written

    def apply(self, folded: Folded, validated: Validated) -> Applied:
        self.context.stage("apply")
        plan, decays = validated.plan, self._decays
        self._decays = DecayPlan()
        # Decays the plan writes anyway (a stamp, an archive, a merge folded into the entry) go with that write, in
        # the plan's journal; the others alone, in the decay journal, first (disjoint files: either order recovers).
        touched = written_by(plan)
        alone = tuple(a for a in decays.actions if a.target.id not in touched)
        carried = [a for a in decays.actions if a.target.id in touched]
        decayed, _ = self._decay_alone(alone, decays.left_floor)
        decayed = self._decay_tally + decayed
        tally = self._execute(replace(plan, decays=carried) if carried else plan)
        decayed_ids = decayed.ids | tally.decayed_ids
        counts = CycleCounts(
            saved=tally.created + tally.updated,
            merged_into_existing=tally.updated,
            ephemeral=tally.ephemeral,
            archived=tally.archived,
            archived_with_replacement=tally.archived_merged,
            conflicts=tally.conflicts + decayed.conflicts,
            write_failures=tally.write_failed + decayed.write_failed,
            decayed=len(decayed_ids),
            decay_left_floor=len(decays.left_floor & tally.decayed_ids) + decayed.left_floor,
        )
        return Applied(validated.plan, counts, decayed.notes + _not_written(tally))

    def measure(self, snapshot: Snapshot, folded: Folded, applied: Applied, validated: Validated) -> Measured:
        self.context.stage("report")
        listing = not (self._untracked or self._archives)
        final = self._final_state(folded.scan, listing=listing)
        departed = self._departures(final) if listing else None
        if departed is not None and any(d.ours and not d.allowed for d in departed):
            # The invariant will look at live texts: every file as it is now (and its departures over that state).
            final, departed = self._final_state(folded.scan), None
        census_index = validated.decisions.census_index
        checked = self._check_end(
            final,
            validated.vocabulary,
            lambda: _final_index(census_index, applied.plan, folded.live, final),
            departed,
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

    def _check_end(
        self,
        final: FinalState,
        vocabulary: Vocabulary,
        index: Callable[[], CoverageIndex],
        departed: list[Departure] | None = None,
    ) -> EndCheck:
        """The end-of-run invariant over the whole cycle, recovery and purge included (invariant.py). ``departed``:
        ``_departures(final)`` when already worked out (the same arguments: the same list)."""
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
            departed=departed,
        )

    def write_embeddings(self, vectors: Mapping[str, Vector], replace: frozenset[str]) -> int:
        return write_vectors(self.store, vectors, replace)

    def record(self, report: CycleReport) -> Path:
        self._update_index()
        if self.store.corpus_index is not None:
            # A cache of this cycle's last scan (memory/corpus_index.py), less the files this cycle wrote since, and
            # what its decays wrote, for the next scan to take once it finds those very bytes.
            self.store.corpus_index.remember(self._decayed or {}, decay_keeps_fit)
            self.store.corpus_index.forget(self._touched)
            self.store.corpus_index.save()
        if report.result == "completed":
            # On the cycle's own clock: a caller that sets `now` (simulations, tests) compares against the same clock.
            completed_at = self.context.now if self.context.clock_given else report.finished_at
            trusted = self._clock.ledger_update() if self._clock is not None else {}
            write_ledger(self.context.agent_dir, report, completed_at or utcnow(), trusted)
            rockbot = self.context.memory_format.name == ROCKBOT  # never a RockBot file in another agent's folders
            if rockbot and self.context.settings.rockbot.pass_ledger and report.reviewed >= 2:
                record_in_rockbot_ledger(self.context.agent_dir, completed_at or utcnow())
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
        self._note_own(executor)
        self._written_ids |= tally.written_ids
        return tally

    def _note_own(self, executor: Executor) -> None:
        """Record what ``executor`` wrote (``_own``): each file's newest write replaces an earlier one's record."""
        own = self._own
        own.update((name, write_stat(fingerprint)) for name, fingerprint in executor.written.items())
        for name, made in executor.made.items():
            # One run writes a file once (a stamp or decay of an archived entry goes with the archive); should both
            # name it, which was last is unknown here: no record, the file is read.
            if name in executor.written:
                del own[name]
            else:
                own[name] = made
        if self._decayed is not None and self.store.corpus_index is not None:
            executor.note_decays(self._decayed)
            if len(self._decayed) > self.store.corpus_index.keep_cap:
                self._decayed = None  # a cold start's: none kept (corpus_index_own.py), none held to the cycle's end

    def _executor(self, plan: Plan, suffix: str) -> Executor | None:
        """The plan journaled (fsynced) and ready to run; None when there is nothing to do."""
        if plan.is_empty:
            return None
        journal_id, agent_dir = self.context.cycle_id + suffix, self.context.agent_dir
        if suffix == DECAY_JOURNAL_SUFFIX:  # streamed, its steps never all held (decay_journal.py)
            journal = write_decay_journal(agent_dir, journal_id, plan.decays, self.store, self.context.now)
        else:  # a large plan's streamed too, its steps built when needed (plan_steps.py)
            journal = write_plan_journal(agent_dir, journal_id, plan, self.store, self.context.now)
        self._journals[journal.header.cycle_id] = journal
        # A decay's target first: the file as it is, until the plan's own view of it (decayed, same fingerprint).
        snapshot = {d.target.name: d.target for d in plan.decays}
        snapshot.update((stamp.target.name, stamp.target) for stamp in plan.stamps)
        leaving = (*(c for f in plan.folds for c in f.copies), *(s for m in plan.merges for s in m.sources))
        updated = (*(f.survivor for f in plan.folds), *(m.into for m in plan.merges if m.into is not None))
        for stored in (*leaving, *updated, *(p.target for p in plan.prunes)):
            snapshot[stored.name] = stored
        self._touched.update(snapshot)
        self._archives = self._archives or bool(plan.folds or plan.merges or plan.prunes)
        self._writing()
        decayed = {str(d.target.path): d.updated for d in plan.decays}
        return Executor(self.store, journal, self.context.now, snapshot, decayed, remember=True)

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
                elif (made := self._made_if_unchanged(stored.path, stored.fingerprint)) is not None:
                    out.append(made)  # the file is still what this cycle wrote: no read of its own bytes
                elif stored.path.exists():
                    result = self.store.read_file(stored.path)
                    if isinstance(result, StoredEntry):
                        out.append(result)
                    else:
                        log.warning("skipping malformed memory file %s: %s (left untouched)", result.path, result.error)
                        malformed.append(result)
            return out

        return ScanResult(entries=again(scan.entries), malformed=malformed, duplicates=again(scan.duplicates))

    def _final_state(self, snapshot: ScanResult, *, listing: bool = False) -> FinalState:
        """What a scan after apply says (``final_state.scan_final``); each file it must look at goes through
        ``_read_final``."""
        return scan_final(self.store, snapshot, self._touched, self._read_final, listing=listing)

    def _departures(self, final: FinalState) -> list[Departure] | None:
        """The end-of-run invariant's departures over ``final`` (None without a census): when none is this run's to
        charge, it does not read the live texts of files this cycle did not write (``invariant.judge``), and it is
        given this list rather than walking the census again over the same arguments."""
        if self._before is None:
            return None
        return departures(self._before, final.entries, tags_in(self._tags), self._purged)

    def _made_if_unchanged(self, path: Path, before: Fingerprint) -> StoredEntry | None:
        """The entry this cycle's last write of ``path`` put there, while the file's size and mtime are still that
        write's and not also the version it replaced (``before``); None for a stamp or a decay, or a file changed
        or gone since (``final_state.own_version`` says why that is enough)."""
        record = self._own.get(str(path))
        if not isinstance(record, StoredEntry):
            return None
        try:
            st = os.lstat(path)
        except OSError:
            return None
        return own_version(st, None, before, record)

    def _read_final(self, child: FileEntry, seen: StoredEntry | None) -> StoredEntry | MalformedFile:
        return read_final(self.store, child, seen, self._own)


def _vocabulary_path(context: CycleContext) -> Path:
    path = Path(context.settings.vocabulary_path)
    return path if path.is_absolute() else context.agent_dir / path


NOTED_FAILURES = 20  # a read-only tree fails every step alike: the report names the first ones and counts the rest


def _not_written(tally: ExecutionTally) -> tuple[str, ...]:
    notes = [f"not written: {error}" for error in tally.errors[:NOTED_FAILURES]]
    if len(tally.errors) > NOTED_FAILURES:
        notes.append(f"not written: {len(tally.errors) - NOTED_FAILURES} more (each in the journal)")
    return tuple(notes)
