"""The plan's creates, updates and archives are written in batches (consolidation/executor.py, docs/architecture.md
"Batched writes"): one directory fsync per batch instead of one per file, and still a source is archived only after
its successor is on disk for good. A SIGKILL between any two files of a batch (written, not yet flushed or
journaled) loses nothing, and recovery finishes the plan exactly once."""

from __future__ import annotations

import signal
import textwrap
from pathlib import Path
from typing import Any

import pytest

from dreamkeeper.consolidation import executor as executor_module
from dreamkeeper.consolidation.executor import Executor
from dreamkeeper.consolidation.journal import Journal, journal_dir
from dreamkeeper.consolidation.journal_steps import write_journal
from dreamkeeper.consolidation.plan import MergeAction, Plan, PruneAction
from dreamkeeper.consolidation.recovery import recover
from dreamkeeper.memory import MemoryStore
from dreamkeeper.memory import atomic as atomic_module
from dreamkeeper.memory import store as store_module
from dreamkeeper.memory.entry import CREATED_BY_CYCLE
from tests.consolidation import kill_child
from tests.consolidation.corpus import BASE_TIME, Seed, entry_files, write_corpus

CYCLE = "c-batched"
PAIRS = 4
TWO = ["people", "projects"]
SEEDS = [
    *(Seed(f"m{i}a", f"Rocky's host nas-0{i} sits in rack {i}.", TWO[i % 2]) for i in range(PAIRS)),
    *(
        Seed(f"m{i}b", f"Rocky's host nas-0{i} runs backups nightly.", ["people", "projects"][i % 2])
        for i in range(PAIRS)
    ),
    *(Seed(f"n{i}", f"Scratch note {i}: lunch was fine.", "observations", 0.1) for i in range(3)),
]


def build_plan(store: MemoryStore) -> Plan:
    """Four merges (a create, then two archives each) and three prunes; the successors carry the cycle's id, as the
    engine's do, which is how a resumed run knows its own successor."""
    stored = {s.id: s for s in store.scan().entries}
    merges = []
    for i in range(PAIRS):
        a, b = stored[f"m{i}a"], stored[f"m{i}b"]
        successor = a.entry.evolve(id=f"s{i}", content=f"{a.entry.content} {b.entry.content}")
        merges.append(MergeAction(successor.with_meta(**{CREATED_BY_CYCLE: CYCLE}), [a, b]))
    prunes = [PruneAction(stored[f"n{i}"]) for i in range(3)]
    return Plan(merges=merges, prunes=prunes)


def check_nothing_lost(agent: Path) -> None:
    """Every original file is there, and every source archived so far points at a successor that is live."""
    assert entry_files(agent) >= {s.id for s in SEEDS}
    store = MemoryStore(agent / "memory")
    scan = store.scan()
    assert not scan.malformed
    for s in scan.archived:
        reason = s.entry.archive_reason or ""
        if reason.startswith("merged into "):
            successor = store.get(reason.removeprefix("merged into "))
            assert successor is not None and successor.entry.is_live, f"{s.id} archived before its successor"


CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from dreamkeeper.consolidation import executor as X
    from dreamkeeper.consolidation.journal_steps import write_journal
    from dreamkeeper.memory import MemoryStore
    from dreamkeeper.memory import store as S
    from tests.consolidation.corpus import BASE_TIME
    from tests.consolidation.test_batched_apply import CYCLE, build_plan

    agent, kill_at = Path(sys.argv[1]), int(sys.argv[2])
    X.STAMP_BATCH = 2  # windows of whole groups, a flush every 2 outcomes: kills land inside and between batches
    written = {"n": 0}

    def counting(original):
        def replace(*args, **kwargs):
            result = original(*args, **kwargs)
            written["n"] += 1
            if written["n"] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)  # this file is written; its batch is neither synced nor journaled
            return result
        return replace

    X.replace_file = counting(X.replace_file)  # creates and updates
    S.replace_file = counting(S.replace_file)  # archives (store.archive -> rewrite)
    store = MemoryStore(agent / "memory")
    plan = build_plan(store)
    journal = write_journal(agent, CYCLE, plan, store, BASE_TIME)
    snapshot = {str(s.path): s for s in store.scan().entries}
    X.Executor(store, journal, BASE_TIME, snapshot).run()
    """
)


def run_child(agent: Path, kill_at: int) -> int:
    return kill_child.run_child(CHILD, str(agent), str(kill_at))


def test_a_kill_between_any_two_files_of_a_batch_loses_nothing_and_recovery_finishes_once(tmp_path: Path) -> None:
    files = PAIRS + 2 * PAIRS + 3  # successors created, sources archived, notes pruned
    for kill_at in range(1, files + 1):
        agent = tmp_path / f"kill-{kill_at}"
        write_corpus(agent, SEEDS)
        assert run_child(agent, kill_at) == -signal.SIGKILL, f"the child did not die at file {kill_at}"
        check_nothing_lost(agent)  # even before recovery
        (path,) = journal_dir(agent).glob("*.jsonl")
        assert not Journal.load(path).complete
        assert [cycle_id for cycle_id, _ in recover(agent, agent / "memory")] == [CYCLE]
        check_nothing_lost(agent)
        assert Journal.load(path).complete
        store = MemoryStore(agent / "memory")
        scan = store.scan()
        successors = sorted(s.id for s in scan.live if s.entry.meta(CREATED_BY_CYCLE) == CYCLE)
        assert successors == [f"s{i}" for i in range(PAIRS)]  # each exactly once
        assert {s.id for s in scan.archived} == {s.id for s in SEEDS}  # every source and note archived
        assert recover(agent, agent / "memory") == []  # idempotent


class Events:
    """The order of file writes, directory fsyncs and journal outcome records of one executor run."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.log: list[tuple[str, Any]] = []
        replace_x, replace_s, sync = (
            executor_module.replace_file,
            store_module.replace_file,
            executor_module.fsync_directory,
        )
        record_many = Journal.record_many

        def write_x(path: Path, *args: Any, **kwargs: Any) -> Any:
            self.log.append(("write", path.stem))
            return replace_x(path, *args, **kwargs)

        def write_s(path: Path, *args: Any, **kwargs: Any) -> Any:
            self.log.append(("write", path.stem))
            return replace_s(path, *args, **kwargs)

        def synced(directory: Path) -> None:
            self.log.append(("dirsync", directory.name))
            sync(directory)

        def recorded(journal: Journal, outcomes: Any, **options: Any) -> None:
            self.log.append(("record", [journal.header.steps[i].id for i, _, _ in outcomes]))
            record_many(journal, outcomes, **options)

        monkeypatch.setattr(executor_module, "replace_file", write_x)
        monkeypatch.setattr(store_module, "replace_file", write_s)
        monkeypatch.setattr(executor_module, "fsync_directory", synced)
        monkeypatch.setattr(atomic_module, "fsync_directory", synced)  # a write that syncs its own directory
        monkeypatch.setattr(Journal, "record_many", recorded)


def test_each_successor_is_synced_and_journaled_before_any_of_its_sources_is_archived(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = write_corpus(tmp_path, SEEDS)
    plan = build_plan(store)
    journal = write_journal(tmp_path, CYCLE, plan, store, BASE_TIME)
    events = Events(monkeypatch)
    tally = Executor(store, journal, BASE_TIME, {str(s.path): s for s in store.scan().entries}).run()

    assert (tally.created, tally.archived) == (PAIRS, 2 * PAIRS + 3)
    log = events.log
    for i in range(PAIRS):
        created = log.index(("write", f"s{i}"))
        journaled = next(at for at, (kind, ids) in enumerate(log) if kind == "record" and f"s{i}" in ids)
        category = TWO[i % 2]
        synced = next(at for at, event in enumerate(log) if at > created and event == ("dirsync", category))
        for source in (f"m{i}a", f"m{i}b"):
            archived = log.index(("write", source))
            assert created < synced < journaled < archived, (source, log)
    # Batched: far fewer directory fsyncs than files written (main synced a directory after every one of 15).
    writes = sum(1 for kind, _ in log if kind == "write")
    assert writes == PAIRS + 2 * PAIRS + 3
    assert sum(1 for kind, _ in log if kind == "dirsync") <= 6 < writes
