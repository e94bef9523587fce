"""What every cycle and ``dreamkeeper recover`` do first, and the cycle ledger: leftovers swept, interrupted
journals finished (or, for an undone cycle, never), and what a stale write-back repair did, from its journal.
Moved out of ``cycle.py`` unchanged (that module had grown past 1,200 lines)."""

from __future__ import annotations

import contextlib
import json
import logging
from datetime import datetime
from pathlib import Path

from dreamkeeper.consolidation.counts import CycleCounts
from dreamkeeper.consolidation.executor import Executor, StepPaths
from dreamkeeper.consolidation.journal import (
    ExecutionTally,
    Journal,
    UnreadableJournalError,
    incomplete_journals,
    set_aside,
)
from dreamkeeper.consolidation.pass_ledger import record_consolidation
from dreamkeeper.consolidation.report import CycleReport
from dreamkeeper.consolidation.writeback import RepairPlan
from dreamkeeper.formats import ROCKBOT, MemoryFormat
from dreamkeeper.memory import (
    UNCHECKED,
    MemoryStore,
    MemoryStoreError,
    SweepListing,
    SweepReport,
    format_timestamp,
    read_reversals,
    read_state_json,
    replace_file,
    state_dir,
    sweep,
    utcnow,
)

log = logging.getLogger(__name__)


def ledger_path(agent_dir: Path) -> Path:
    return state_dir(agent_dir) / "ledger.json"


def read_ledger(agent_dir: Path) -> dict[str, str]:
    try:
        data = read_state_json(ledger_path(agent_dir))  # a regular file of ours, bounded: never a FIFO
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def write_ledger(
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


def record_in_rockbot_ledger(agent_dir: Path, at: datetime) -> None:
    """RockBot's ``dream-pass-ledger.json`` (pass_ledger.py): recorded on a cycle that reviewed entries, as RockBot's
    pass records itself only when it reviewed something (2 or more eligible, a usable reply). Bookkeeping: a
    failure to write it is logged, never the cycle's failure."""
    try:
        record_consolidation(agent_dir, at)
    except (OSError, MemoryStoreError) as exc:
        log.warning("RockBot's dream-pass ledger not updated: %s", exc)


def sweep_leftovers(
    agent_dir: Path,
    memory_root: Path,
    memory_format: MemoryFormat | None = None,
    listed: SweepListing | None = None,
) -> SweepReport:
    """Clean what killed writes of ours left in the memory tree and the state directory (the caller holds the cycle
    lock): our temps go, displaced versions of the agent's are kept as conflict copies and reported. A Markdown
    format's own directory (the agent's files) is swept too. ``listed``: the corpus index's kept listings
    (``ListingCache.for_sweep``): memory directories they vouch for hold nothing of ours, not listed; one they list
    is kept for the cycle's scan."""
    swept = MemoryStore(memory_root).sweep(listed)
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


def counted_copies(store: MemoryStore, journal: Journal | None) -> set[Path]:
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
