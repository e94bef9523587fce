"""A cold start's writes (issue 27 item 3): each decayed file written once in the cycle (its decay carried by the
cycle's other write of it), from the snapshot, with one directory fsync per batch; update steps write from the
snapshot's parse instead of reading the file again; the shortcuts taken for speed (a decay step's two values, a
validated directory) give exactly what the long way gives, and refuse exactly what it refuses."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from dreamkeeper.consolidation import executor as executor_module
from dreamkeeper.consolidation import journal as journal_module
from dreamkeeper.consolidation.cycle import CycleOptions, run_cycle
from dreamkeeper.consolidation.executor import Executor, StepPaths
from dreamkeeper.consolidation.journal import DECAY_FIELDS, Step
from dreamkeeper.consolidation.journal_steps import decay_values, write_journal
from dreamkeeper.consolidation.plan import FoldAction, Plan
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.memory import REVIEWED_HASH, Entry, MemoryStore, PathEscapeError, StoredEntry
from dreamkeeper.memory import atomic as atomic_module
from dreamkeeper.memory import store as store_module
from dreamkeeper.proposers import ScriptedProposer
from tests.consolidation.corpus import BASE_TIME, Seed, write_corpus
from tests.parity import rockbot_files

NOW = rockbot_files.datetime(2026, 9, 14, 6, 0, tzinfo=rockbot_files.UTC)
NOTHING = {"toDelete": [], "toSave": []}


def _old(entry_id: str, content: str, category: str) -> dict[str, Any]:
    when = NOW - timedelta(days=100)  # unreviewed and long unseen: decayed on a cold start
    return rockbot_files.entry(
        entry_id, content, category=category, createdAt=when, updatedAt=when, importanceScore=0.6
    )


class Counting:
    """Entry-file writes and reads, and directory fsyncs, by stage (the cycle's progress callback names it)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.stage = ""
        self.writes: Counter[tuple[str, str]] = Counter()
        self.reads: Counter[tuple[str, str]] = Counter()
        self.dir_syncs: Counter[str] = Counter()
        replace, read, sync = store_module.replace_file, MemoryStore.read_file, journal_module.fsync_directory

        def counted_replace(path: Path, *args: Any, **kwargs: Any) -> Any:
            self.writes[(self.stage, path.name)] += 1
            return replace(path, *args, **kwargs)

        def counted_read(store: MemoryStore, path: Path) -> Any:
            self.reads[(self.stage, Path(path).name)] += 1
            return read(store, path)

        def counted_sync(directory: Path) -> None:
            self.dir_syncs[self.stage] += 1
            sync(directory)

        monkeypatch.setattr(store_module, "replace_file", counted_replace)
        monkeypatch.setattr(MemoryStore, "read_file", counted_read)
        # The journal syncs its directory when it is written; the executor once per batch of steps.
        monkeypatch.setattr(journal_module, "fsync_directory", counted_sync)
        monkeypatch.setattr(executor_module, "fsync_directory", counted_sync)

    def progress(self, stage: str) -> None:
        self.stage = stage


def test_a_cold_decay_writes_each_entry_once_reads_none_again_and_syncs_a_directory_once_per_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(executor_module, "STAMP_BATCH", 4)
    root = tmp_path / "memory"
    names = [f"p{i}" for i in range(10)]
    for i, name in enumerate(names):  # two directories, distinct facts (nothing to fold or merge)
        rockbot_files.write(
            root, _old(name, f"Person {i} keeps {i * 7} beehives in Town{i}.", ["people", "bees"][i % 2])
        )
    counting = Counting(monkeypatch)
    options = CycleOptions(
        agent_dir=tmp_path,
        settings=CycleSettings(min_interval_hours=0, offer_shape="batches", subsume=False),
        now=NOW,
        progress=counting.progress,
    )
    report = asyncio.run(run_cycle(options, ScriptedProposer(lambda b, r: NOTHING))).report

    assert report.decayed == len(names)
    # Each decayed file written once in the whole cycle: its decay carried by its review stamp, in apply (main wrote
    # it twice, decay then stamp: issue 27, ~6,000 of 20,500 writes of a 10k cold cycle).
    entry_writes = {(stage, name): n for (stage, name), n in counting.writes.items() if name.startswith("p")}
    assert entry_writes == {("apply", f"{name}.json"): 1 for name in names}
    assert not [key for key in counting.reads if key[0] in ("decay", "apply")]  # from the snapshot: none read again
    # 10 steps in batches of 4: 3 batches, each syncing its (at most 2) directories once, not once per file; and
    # the journal's directory once when the plan is journaled.
    assert counting.dir_syncs["apply"] <= 3 * 2 + 1 < len(names)
    assert counting.dir_syncs["decay"] == 0
    for name, category in zip(names, ["people", "bees"] * 5, strict=True):
        written = json.loads((root / category / f"{name}.json").read_text(encoding="utf-8"))
        assert written["importanceScore"] < 0.6  # decayed, and nothing lost: every entry is still there
        assert datetime.fromisoformat(written["updatedAt"]) == NOW
        assert REVIEWED_HASH in written["metadata"]  # and stamped, in the same write
    assert report.specifics_lost == 0 and report.hard_deletes == 0


def _fold_plan(store: MemoryStore) -> tuple[Plan, StoredEntry, StoredEntry]:
    scan = store.scan()
    survivor, copy = sorted(scan.entries, key=lambda s: s.id)
    updated = survivor.entry.evolve(reinforcement_count=survivor.entry.reinforcement_count + 1)
    return Plan(folds=[FoldAction(survivor, updated, [copy])]), survivor, copy


def test_an_update_step_writes_from_the_snapshot_without_reading_the_file_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = write_corpus(tmp_path, [Seed("a1", "Rocky's NAS is nas-01."), Seed("a2", "Rocky's NAS is nas-01.")])
    plan, survivor, copy = _fold_plan(store)
    journal = write_journal(tmp_path, "c1-fold", plan, store, BASE_TIME)
    counting = Counting(monkeypatch)
    executor = Executor(store, journal, BASE_TIME, {str(survivor.path): survivor, str(copy.path): copy})
    tally = executor.run()

    assert (tally.updated, tally.archived_folded) == (1, 1)
    assert not counting.reads  # main read the survivor again before rewriting it
    assert store.require("a1").entry.reinforcement_count == survivor.entry.reinforcement_count + 1
    assert store.require("a2").entry.is_archived


def test_an_update_from_the_snapshot_still_loses_to_the_agents_write(tmp_path: Path) -> None:
    store = write_corpus(tmp_path, [Seed("a1", "Rocky's NAS is nas-01."), Seed("a2", "Rocky's NAS is nas-01.")])
    plan, survivor, copy = _fold_plan(store)
    agent_bytes = survivor.path.read_bytes().replace(b"nas-01", b"nas-02")
    survivor.path.write_bytes(agent_bytes)  # the agent rewrites the survivor after the snapshot
    journal = write_journal(tmp_path, "c1-fold", plan, store, BASE_TIME)
    tally = Executor(store, journal, BASE_TIME, {str(survivor.path): survivor, str(copy.path): copy}).run()

    assert survivor.path.read_bytes() == agent_bytes  # the agent's version stands
    assert tally.conflicts == 1 and tally.updated == 0
    assert not store.require("a2").entry.is_archived  # its successor was not written: the copy stays live


def _full_decay_values(entry: Entry) -> dict[str, Any]:
    """The values as computed before issue 27: from the whole JSON object."""
    obj = entry.to_json_obj()
    spelled = {key.lower(): key for key in obj}
    return {name: obj.get(spelled.get(name.lower(), name)) for name in DECAY_FIELDS}


@pytest.mark.parametrize(
    "raw",
    [
        {"id": "a", "content": "x", "importanceScore": 1, "updatedAt": "2026-01-02T03:04:05.1234567+00:00"},
        {"id": "a", "content": "x", "ImportanceScore": 0.25},  # RockBot's case-insensitive reader, no updatedAt
        {"id": "a", "content": "x", "importance_score": "not a field", "importanceScore": 0.5, "updatedAt": None},
        {"id": "a", "content": "x", "updatedat": "2026-01-02T03:04:05Z", "importanceScore": 0.5},
        {"id": "a", "content": "x"},
    ],
)
def test_a_decay_steps_values_are_those_of_the_whole_object(raw: dict[str, Any]) -> None:
    entry = Entry.from_json_obj(raw)
    decayed = entry.evolve(importance_score=0.125, updated_at=NOW)
    for version in (entry, decayed, Entry(id="b", content="built in code", importance_score=0.3)):
        assert decay_values(version) == _full_decay_values(version)


def _step(path: str, entry_id: str) -> Step:
    return Step(op="stamp", id=entry_id, path=path, group=1)


def test_step_paths_refuse_after_a_directory_is_cached_what_they_refuse_before(tmp_path: Path) -> None:
    store = write_corpus(tmp_path, [Seed("e1", "One.", "people"), Seed("e2", "Two.", "people")])
    header = write_journal(tmp_path, "c1", Plan(), store, BASE_TIME).header
    paths = StepPaths(store, header)
    assert paths(_step("people/e1.json", "e1")) == store.root / "people" / "e1.json"
    assert paths(_step("people/e2.json", "e2")) == store.root / "people" / "e2.json"  # from the cached directory
    with pytest.raises(ValueError, match="does not name entry"):
        paths(_step("people/e1.json", "e2"))
    with pytest.raises(PathEscapeError):
        paths(_step("people/../../e2.json", "e2"))
    with pytest.raises(PathEscapeError):
        paths(_step("/etc/e2.json", "e2"))


def test_a_rewrite_checks_the_id_when_its_category_directory_is_already_known(tmp_path: Path) -> None:
    store = write_corpus(tmp_path, [Seed("e1", "One.", "people"), Seed("e2", "Two.", "people")])
    first, second = sorted(store.scan().entries, key=lambda s: s.id)
    store.rewrite(first, first.entry.with_meta(k="v"))  # caches the directory of "people"
    with pytest.raises(ValueError):
        store.rewrite(second, second.entry.evolve(id="e1"))  # the id may not change
    moved = StoredEntry(second.entry, store.root / "people" / "elsewhere.json", second.fingerprint)
    with pytest.raises(ValueError):
        store.rewrite(moved, second.entry)  # not where its id says it is


def test_a_bulk_rewrite_keeps_the_files_mode(tmp_path: Path) -> None:
    store = write_corpus(tmp_path, [Seed("e1", "One.", "people")])
    (stored,) = store.scan().entries
    stored.path.chmod(0o640)
    store.rewrite(StoredEntry(stored.entry, stored.path, atomic_module.current_fingerprint(stored.path)), stored.entry)
    assert stored.path.stat().st_mode & 0o777 == 0o640
