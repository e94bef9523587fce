"""One consolidation cycle: snapshot → recover → purge → exact fold → gating → clustering → proposal →
validation → census → journal → apply → stamp → report. The proposer is consulted once per batch and trusted
with nothing."""

from __future__ import annotations

import gc
import json
import logging
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from dreamkeeper.consolidation.fold import plan_folds
from dreamkeeper.consolidation.gating import GatingResult, make_batches, select_candidates
from dreamkeeper.consolidation.journal import (
    FOLD_JOURNAL_SUFFIX,
    ExecutionTally,
    Executor,
    Journal,
    incomplete_journals,
    write_journal,
)
from dreamkeeper.consolidation.plan import Plan
from dreamkeeper.consolidation.proposal import Batch, ProposalRequest, Proposer
from dreamkeeper.consolidation.report import CycleReport, write_report
from dreamkeeper.consolidation.settings import DIRECTIVE_FILE, CycleSettings
from dreamkeeper.consolidation.validate import ValidationState, census, review_stamps, validate_replies
from dreamkeeper.coverage import CoverageIndex, Vocabulary, extract_specifics, load_vocabulary, merged_inventory
from dreamkeeper.memory import (
    CycleLock,
    Fingerprint,
    MalformedFile,
    MemoryStore,
    ScanResult,
    StoredEntry,
    embedding_file_name,
    format_timestamp,
    memory_root,
    replace_file,
    state_dir,
    utcnow,
)
from dreamkeeper.memory.atomic import UNCHECKED
from dreamkeeper.memory.redaction import shown_all

log = logging.getLogger(__name__)

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

    @property
    def memory_root(self) -> Path:
        return memory_root(self.agent_dir, self.memory_dir)


@dataclass(repr=False)
class CycleOutcome:
    report: CycleReport
    plan: Plan | None = None
    gating: GatingResult | None = None
    report_path: Path | None = None

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
        data = json.loads(ledger_path(agent_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _write_ledger(agent_dir: Path, report: CycleReport, completed_at: datetime) -> None:
    ledger = read_ledger(agent_dir)
    ledger.update(
        {
            "lastCompletedAt": format_timestamp(completed_at),
            "lastCycleId": report.cycle_id,
        }
    )
    replace_file(ledger_path(agent_dir), json.dumps(ledger, indent=2).encode(), UNCHECKED)


def recover(agent_dir: Path, memory_root: Path, now: datetime | None = None) -> list[tuple[str, ExecutionTally]]:
    """Finish every journal a killed cycle left behind. Idempotent."""
    store = MemoryStore(memory_root)
    done = []
    for path in incomplete_journals(agent_dir):
        journal = Journal.load(path)
        log.warning("recovering interrupted cycle %s from its journal %s", journal.header.cycle_id, path)
        tally = Executor(store, journal, now or utcnow()).run()
        log.info(
            "recovered cycle %s — %d created, %d archived, %d conflicts",
            journal.header.cycle_id,
            tally.created,
            tally.archived,
            tally.conflicts,
        )
        done.append((journal.header.cycle_id, tally))
    return done


class Cycle:
    def __init__(self, options: CycleOptions, proposer: Proposer) -> None:
        self.options = options
        self.proposer = proposer
        self.settings = options.settings
        self.agent_dir = options.agent_dir
        self.store = MemoryStore(options.memory_root)
        self.now = options.now or utcnow()
        self._stamped: dict[str, Fingerprint] = {}  # path -> fingerprint of each review stamp this cycle wrote
        self._frozen = False
        self.report = CycleReport(
            cycle_id=new_cycle_id(self.now),
            agent_dir=str(self.agent_dir),
            proposer=proposer.name,
            started_at=self.now,
            result="dry-run" if options.dry_run else "completed",
        )

    def _stage(self, name: str) -> None:
        log.debug("cycle %s: %s", self.report.cycle_id, name)
        if self.options.progress:
            self.options.progress(name)

    async def run(self) -> CycleOutcome:
        if not self.options.memory_root.is_dir():
            raise FileNotFoundError(f"no memory directory at {self.options.memory_root}; nothing was changed")
        if self.options.dry_run:
            try:
                return await self._run_locked()
            finally:
                self._thaw()
                await self.proposer.aclose()
        with CycleLock(self.agent_dir, f"dream cycle {self.report.cycle_id}"):
            try:
                outcome = await self._run_locked()
            except Exception as exc:
                self.report.result = "failed"
                self.report.error = f"{type(exc).__name__}: {exc}"
                self.report.finished_at = utcnow()
                log.exception("dream cycle %s failed; completed steps are journaled", self.report.cycle_id)
                write_report(self.agent_dir, self.report)
                raise
            finally:
                self._thaw()
                await self.proposer.aclose()
        return outcome

    def _embedding_loader(self) -> Callable[[str], np.ndarray | None]:
        present = self.store.embedding_files()

        def load(entry_id: str) -> np.ndarray | None:
            # Listed first: most entries of a corpus may have no embedding, and a failed open costs more than a read.
            return self.store.load_embedding(entry_id) if embedding_file_name(entry_id).casefold() in present else None

        return load

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

    async def _run_locked(self) -> CycleOutcome:
        report = self.report
        if not self.options.dry_run:
            self._stage("recover")
            for cycle_id, tally in recover(self.agent_dir, self.options.memory_root, self.now):
                report.notes.append(f"finished interrupted cycle {cycle_id}: {tally.archived} archive(s)")
            if not self.options.force and self._too_soon():
                return self._finish_skipped()

        self._stage("vocabulary")
        vocabulary = self._load_vocabulary()

        scan: ScanResult | None = None
        purge_conflicts = 0
        if not self.options.dry_run:
            self._stage("purge")
            retention = self.settings.retention
            if retention is not None and retention > timedelta(0):
                # One scan serves purge and snapshot: purge removes only the files it names, so the snapshot is
                # that scan minus the purged entries (a purge conflict means the agent wrote meanwhile: rescan).
                scan = self.store.scan()
            purge = self.store.purge(
                retention, self.settings.floor, self.now, entries=scan.entries if scan is not None else None
            )
            report.purged = len(purge.purged)
            report.purge_kept_above_floor = len(purge.kept_above_floor)
            purged_ids = {e.id for e in purge.purged}
            purge_conflicts = purge.conflicts
        else:
            purged_ids = set()

        self._stage("snapshot")
        if scan is None or purge_conflicts:
            scan = self.store.scan()
        elif purged_ids:
            scan = ScanResult(
                entries=[s for s in scan.entries if s.id not in purged_ids],
                malformed=scan.malformed,
                duplicates=scan.duplicates,
            )
        self._freeze()
        ids_before = {s.id for s in scan.entries} | purged_ids
        report.total = len(scan.live)
        report.malformed = len(scan.malformed)
        live = _live(scan)

        self._stage("fold")
        folds = plan_folds(live, self.settings, self.now)
        fold_plan = Plan(folds=folds)
        if folds:
            n_copies = sum(len(f.copies) for f in folds)
            for fold in folds:
                log.info(
                    "folded %d exact duplicate(s) [%s] into %s",
                    len(fold.copies),
                    ", ".join(c.id for c in fold.copies),
                    fold.survivor.id,
                )
            log.info("exact-duplicate fold — %d copy(s) folded across %d group(s)", n_copies, len(folds))
            if self.options.dry_run:
                report.folded = n_copies
                leaving = fold_plan.leaving_ids()
                live = [s for s in live if s.id not in leaving]
            else:
                tally = self._execute(fold_plan, suffix=FOLD_JOURNAL_SUFFIX)
                report.folded = tally.archived_folded
                scan = self._reread(scan, fold_plan)
                live = _live(scan)

        self._stage("gating")
        gating = select_candidates(live, self.settings, self.now, self._embedding_loader())
        report.reviewed = len(gating.eligible)
        report.withheld = gating.withheld
        report.clusters = len(gating.clusters)
        report.reopened = len(gating.reopened)
        report.clustering_degraded = gating.degraded
        log.info(
            "consolidation reviewing %d of %d entries (%d withheld as reviewed-and-unchanged)",
            len(gating.eligible),
            len(live),
            gating.withheld,
        )
        state = ValidationState(self.settings, vocabulary, report, report.cycle_id, self.now)
        plan = state.plan
        if len(gating.eligible) >= 2:
            self._stage("proposal")
            batches = make_batches(gating, self.settings.batch_max_entries)
            request = ProposalRequest(
                batches=tuple(batches),
                total_entries=len(live),
                withheld=gating.withheld,
                now=self.now,
                directive=self._directive(),
                degraded=gating.degraded,
            )
            replies = await self.proposer.propose(request)
            self._stage("validation")
            await validate_replies(batches, replies, gating, live, self.proposer, state)
            plan.stamps = review_stamps(gating, plan, state, _offered_ids(batches))
        else:
            log.info(
                "%d of %d entries already reviewed and unchanged with no duplicate siblings — nothing eligible",
                gating.withheld,
                len(live),
            )
        self._account_usage()

        if self.options.dry_run:
            report.saved = len(plan.merges)
            report.archived = report.folded + sum(len(m.sources) for m in plan.merges) + len(plan.prunes)
            report.archived_with_replacement = report.folded + sum(len(m.sources) for m in plan.merges)
            report.ephemeral = len(plan.prunes)
            report.live_entries = len(live) + len(plan.merges) - len(plan.leaving_ids())
            report.archived_entries = len(scan.archived) + report.archived
            report.finished_at = utcnow()
            self._log_summary()
            plan.folds = folds  # shown in the diff; counted above already
            return CycleOutcome(report, plan, gating)

        self._stage("apply")
        tally = self._execute(plan)
        report.saved = tally.created
        report.ephemeral = tally.ephemeral
        report.archived = report.folded + tally.archived
        report.archived_with_replacement = report.folded + tally.archived_merged
        report.conflicts += tally.conflicts

        self._stage("report")
        final = self._final_state(scan)
        ids_after = final.ids
        report.hard_deletes = len(ids_before - ids_after - purged_ids)
        report.live_entries = len(final.live)
        report.archived_entries = final.archived
        self._measure_loss(plan, final, state, live)
        report.finished_at = utcnow()
        # On the cycle's own clock: a caller that sets `now` (simulations, tests) compares against the same clock.
        completed_at = report.finished_at if self.options.now is None else self.now
        _write_ledger(self.agent_dir, report, completed_at or utcnow())
        path = write_report(self.agent_dir, report)
        self._log_summary()
        return CycleOutcome(report, plan, gating, path)

    # ---- helpers -------------------------------------------------------------------------------------

    def _too_soon(self) -> bool:
        last = read_ledger(self.agent_dir).get("lastCompletedAt")
        if not last or self.settings.min_interval.total_seconds() <= 0:
            return False
        try:
            age = self.now - datetime.fromisoformat(last)
        except ValueError:
            return False
        if age < self.settings.min_interval:
            self.report.skip_reason = f"last completed {age} ago, minimum interval {self.settings.min_interval}"
            log.info("memory consolidation skipped — %s", self.report.skip_reason)
            return True
        return False

    def _finish_skipped(self) -> CycleOutcome:
        self.report.result = "skipped"
        scan = self.store.scan()
        self.report.total = self.report.live_entries = len(scan.live)
        self.report.archived_entries = len(scan.archived)
        self.report.malformed = len(scan.malformed)
        self.report.finished_at = utcnow()
        path = write_report(self.agent_dir, self.report)
        return CycleOutcome(self.report, report_path=path)

    def _load_vocabulary(self) -> Vocabulary:
        path = Path(self.settings.vocabulary_path)
        if not path.is_absolute():
            path = self.agent_dir / path
        loaded = load_vocabulary(path)
        self.report.vocabulary_status = loaded.status
        if loaded.status == "fallback":
            self.report.vocabulary_fallback = 1
            self.report.notes.append(f"vocabulary fallback: {loaded.error}")
        return loaded.vocabulary

    def _directive(self) -> str | None:
        path = self.agent_dir / DIRECTIVE_FILE
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            return None
        return text if text.strip() else None

    def _execute(self, plan: Plan, suffix: str = "") -> ExecutionTally:
        if plan.is_empty:
            return ExecutionTally()
        journal = write_journal(self.agent_dir, self.report.cycle_id + suffix, plan, self.store, self.now)
        snapshot = {str(stamp.target.path): stamp.target for stamp in plan.stamps}
        leaving = (*(c for f in plan.folds for c in f.copies), *(s for m in plan.merges for s in m.sources))
        for stored in (*leaving, *(p.target for p in plan.prunes)):
            snapshot[str(stored.path)] = stored
        executor = Executor(self.store, journal, self.now, snapshot)
        tally = executor.run()
        self._stamped.update(executor.written)
        return tally

    def _account_usage(self) -> None:
        usage = self.proposer.usage()
        self.report.llm_calls = usage.calls
        self.report.input_tokens = usage.input_tokens
        self.report.output_tokens = usage.output_tokens
        self.report.invalid_replies = usage.invalid_replies
        self.report.failed_calls = usage.failed_calls
        self.report.budget_exhausted = usage.budget_exhausted
        self.report.estimated_cost = usage.estimated_cost
        self.report.notes.extend(usage.notes)

    def _reread(self, scan: ScanResult, fold_plan: Plan) -> ScanResult:
        """The snapshot after the fold: only the files the fold wrote are read again (a full rescan cost as much as
        the rest of a warm cycle at 100k entries). Entries the agent changed meanwhile keep their snapshot
        fingerprint, so any later write to them is refused as a conflict, exactly as for changes after a scan."""
        touched = {f.survivor.path for f in fold_plan.folds} | {c.path for f in fold_plan.folds for c in f.copies}
        entries: list[StoredEntry] = []
        malformed = list(scan.malformed)
        for stored in scan.entries:
            if stored.path not in touched:
                entries.append(stored)
            elif stored.path.exists():
                result = self.store.read_file(stored.path)
                if isinstance(result, StoredEntry):
                    entries.append(result)
                else:
                    log.warning("skipping malformed memory file %s: %s (left untouched)", result.path, result.error)
                    malformed.append(result)
        return ScanResult(entries=entries, malformed=malformed, duplicates=scan.duplicates)

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

    def _measure_loss(self, plan: Plan, final: FinalState, state: ValidationState, live: list[StoredEntry]) -> None:
        """After apply: specifics of entries this cycle archived with a replacement must still be live.

        Successor first: the successor's text as on disk now is a live text of the final corpus, so what its
        inventory covers the final corpus covers. The rest is looked up in an index of the final live corpus,
        built only then; a successor that is not live (never written, or gone since) covers nothing.
        """
        if not any(m.sources for m in plan.merges):
            return
        vocabulary = state.vocabulary  # the one the cycle checked with (loading it again could differ)
        index: CoverageIndex | None = None
        lost: list[str] = []
        for merge in plan.merges:
            on_disk = final.live.get(merge.successor.id)
            successor = merged_inventory(on_disk) if on_disk is not None else None
            for stored in merge.sources:
                current = self.store.get(stored.id)
                if current is None or not current.entry.is_archived:
                    continue  # not archived after all (conflict): nothing left the live corpus
                for specific in extract_specifics(stored.entry.content, stored.entry.category, vocabulary):
                    if (successor is not None and successor.covers(specific)) or specific.text in lost:
                        continue
                    if index is None:
                        index = _final_index(state.census_index, plan, live, final)
                    if not index.covers(specific):
                        lost.append(specific.text)
        self.report.specifics_lost = len(lost)
        self.report.lost_specifics = lost
        if lost:
            log.error("specifics lost from the live corpus this cycle: %s", shown_all(lost))

    def _log_summary(self) -> None:
        r = self.report
        if r.rejected or r.repaired or r.protected or r.merge_only_ignored:
            log.info(
                "consolidation safeguards fired — %d merge(s) rejected for dropping specifics, %d merge(s) repaired, "
                "%d entry(s) protected from pruning, %d prune(s) of reopened duplicates ignored",
                r.rejected,
                r.repaired,
                r.protected,
                r.merge_only_ignored,
            )
        log.info(
            "dream cycle %s %s — %d archived (%d with replacement, %d ephemeral), %d saved, %d folded, "
            "%d conflicts, %d hard deletes, live %d, archived %d",
            r.cycle_id,
            "planned (dry run)" if r.result == "dry-run" else "complete",
            r.archived,
            r.archived_with_replacement,
            r.ephemeral,
            r.saved,
            r.folded,
            r.conflicts,
            r.hard_deletes,
            r.live_entries,
            r.archived_entries,
        )


@dataclass
class FinalState:
    """The corpus after apply: every id on disk, live id -> content, and how many entries are archived."""

    ids: set[str] = field(default_factory=set)
    live: dict[str, str] = field(default_factory=dict)
    archived: int = 0


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


def _live(scan: ScanResult) -> list[StoredEntry]:
    return [s for s in scan.entries if s.entry.is_live]


def _offered_ids(batches: list[Batch]) -> set[str]:
    return {i for b in batches for i in b.ids}


async def run_cycle(options: CycleOptions, proposer: Proposer) -> CycleOutcome:
    return await Cycle(options, proposer).run()


__all__ = ["Cycle", "CycleOptions", "CycleOutcome", "census", "recover", "run_cycle"]
