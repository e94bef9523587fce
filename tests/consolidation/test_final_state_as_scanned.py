"""The final-state check of a cycle that wrote only decays and review stamps (consolidation/final_state.py,
``_as_scanned``): when a walk finds exactly the files the snapshot's scan walked, in its order, and each file the cycle
wrote still holds that write, the state is built from the snapshot (``_as_listed``) instead of file by file. It must
be exactly what the file-by-file loop makes, and never taken when the loop could differ: the agent adding, removing
or renaming a file after the writes, or rewriting one the cycle wrote; and then no file is read twice."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dreamkeeper.consolidation import final_state
from dreamkeeper.consolidation.cycle import CycleOptions, CycleOutcome, FinalState, Writes, run_cycle
from dreamkeeper.consolidation.final_state import scan_final
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.memory import MemoryStore, ScanResult
from dreamkeeper.memory.corpus_index import open_corpus_index
from dreamkeeper.proposers import ScriptedProposer
from tests.consolidation.corpus import BASE_TIME, Seed, write_corpus
from tests.consolidation.test_final_state_as_listed import NOTHING, TICK, later, twins_corpus, watch_looks
from tests.memory.conftest import rockbot_entry, write_raw

pytestmark = pytest.mark.usefixtures("corpus_index_mode")

# Past RockBot's 30-day grace: every cycle on a later clock decays each of them (and writes it).
SEEDS = [
    Seed("s1", "Allen Conway works at Xebia.", age_days=40),
    Seed("s2", "Allen Conway lives in Austin.", category="people", age_days=50),
    Seed("n1", "Trish prefers concise notes about Kubernetes 1.36.", category=None, age_days=60),
    Seed("n2", "The staging cluster runs in eu-west-3 since 2024-05-02.", age_days=45),
    Seed("k1", "Kim reviews the quarterly budget with Rose.", age_days=5),  # within the grace: not decayed
]
DECAYING = len(SEEDS) - 1


def cycle(agent_dir: Path, days: int) -> CycleOutcome:
    options = CycleOptions(
        agent_dir=agent_dir, settings=CycleSettings(min_interval_hours=0), now=BASE_TIME + timedelta(days=days)
    )
    return asyncio.run(run_cycle(options, ScriptedProposer([NOTHING])))


def spy(monkeypatch: pytest.MonkeyPatch, action: Callable[[], object] | None = None) -> dict[str, Any]:
    """The report's final-state check, watched: how often the snapshot's state was taken, each file looked at, the
    state it gave and the state the file-by-file loop gives for the same snapshot (``names`` taken away).
    ``action``: what the agent does after the cycle's writes, before the check."""
    seen: dict[str, Any] = {"as_listed": 0, "read": [], "fast": None, "loop": None, "touched": set()}
    original = Writes._final_state

    def final(self: Writes, snapshot: ScanResult, **how: bool) -> FinalState:
        if seen["fast"] is None:
            seen["touched"] = set(self._touched)
            if action is not None:
                time.sleep(TICK)
                action()
            fast = seen["fast"] = original(self, snapshot, **how)
            reads, listed = list(seen["read"]), seen["as_listed"]
            seen["loop"] = original(self, dataclasses.replace(snapshot, names=None), **how)
            seen["read"], seen["as_listed"] = reads, listed  # the comparison's own looks are not the cycle's
            return fast
        return original(self, snapshot, **how)

    watch_looks(monkeypatch, seen)
    monkeypatch.setattr(Writes, "_final_state", final)
    return seen


def same_state(fast: FinalState, loop: FinalState) -> None:
    assert (fast.ids, fast.live, fast.archived) == (loop.ids, loop.live, loop.archived)
    assert fast.entries.keys() == loop.entries.keys()
    for key, item in loop.entries.items():  # the snapshot's very object, or a file read again by each (equal)
        other = fast.entries[key]
        assert other is item or (other.path == item.path and other.entry == item.entry), key


def settled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> MemoryStore:
    store = write_corpus(tmp_path, SEEDS)
    later(monkeypatch)
    cycle(tmp_path, 0)  # reviews (stamps) and decays them all
    time.sleep(TICK)
    return store


def test_a_cycle_that_wrote_only_decays_takes_the_snapshots_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settled(tmp_path, monkeypatch)
    seen = spy(monkeypatch)
    outcome = cycle(tmp_path, 3)
    assert outcome.report.result == "completed" and outcome.report.decayed == DECAYING
    assert seen["touched"] and seen["as_listed"] == 1
    # Each written file looked at once, and nothing else.
    assert sorted(seen["read"]) == sorted(seen["touched"])
    same_state(seen["fast"], seen["loop"])
    assert outcome.report.live_entries == len(SEEDS) and outcome.report.agent_deletes == 0


@pytest.mark.parametrize("change", ["deleted", "added", "renamed"])
def test_the_agent_changing_a_name_after_the_writes_is_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    store = settled(tmp_path, monkeypatch)
    path = store.require("k1").path  # not written by the cycle: its loss is the agent's
    actions: dict[str, Callable[[], object]] = {
        "deleted": path.unlink,
        "added": lambda: write_raw(store.root, rockbot_entry("n9", content="Lena joined in 2025.")),
        "renamed": lambda: path.rename(path.with_name("k1-moved.json")),
    }
    seen = spy(monkeypatch, actions[change])
    outcome = cycle(tmp_path, 3)
    assert outcome.report.result == "completed" and seen["as_listed"] == 0
    same_state(seen["fast"], seen["loop"])
    if change == "added":
        assert outcome.report.live_entries == len(SEEDS) + 1 and outcome.report.agent_deletes == 0
        assert "n9" in seen["fast"].live
    else:
        assert outcome.report.live_entries == len(SEEDS) - 1 and outcome.report.agent_deletes == 1
        assert "k1" not in seen["fast"].ids
    assert outcome.report.hard_deletes == 0
    # No file read twice: what the first walk read is what the loop uses.
    assert len(seen["read"]) == len(set(seen["read"]))


def test_the_agent_rewriting_a_file_the_cycle_wrote_is_seen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In place, after the cycle's decay of it: no directory's stat moves, the names are the scan's, but the file
    is not the cycle's write any more: its text is read, and counted, as the agent left it."""
    store = settled(tmp_path, monkeypatch)
    path = store.require("s1").path

    def rewrite() -> None:
        text = path.read_text(encoding="utf-8")
        path.write_text(text.replace("Xebia", "Xebiq, since 2026"), encoding="utf-8")

    seen = spy(monkeypatch, rewrite)
    outcome = cycle(tmp_path, 3)
    assert outcome.report.result == "completed" and str(path) in seen["touched"]
    assert seen["as_listed"] == 0
    assert seen["fast"].live["s1"] == "Allen Conway works at Xebiq, since 2026."
    same_state(seen["fast"], seen["loop"])
    assert seen["read"].count(str(path)) == 1  # read by the first walk, reused by the loop
    assert outcome.report.live_entries == len(SEEDS) and outcome.report.agent_deletes == 0


def test_without_the_scans_names_the_loop_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A snapshot made anew (after a purge, a re-read) has no names: the file-by-file loop, as before."""
    settled(tmp_path, monkeypatch)
    original = Writes._final_state

    def anew(self: Writes, snapshot: ScanResult, **how: bool) -> FinalState:
        return original(self, dataclasses.replace(snapshot, names=None), **how)

    monkeypatch.setattr(Writes, "_final_state", anew)
    seen = spy(monkeypatch)
    outcome = cycle(tmp_path, 3)
    assert outcome.report.result == "completed" and seen["touched"] and seen["as_listed"] == 0
    assert outcome.report.live_entries == len(SEEDS)


# ---- the state from the snapshot is the loop's, on corpora with twins (scan_final itself) -------------------------


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("twins", [True, False])
def test_the_state_from_the_scanned_names_is_the_loops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int, twins: bool
) -> None:
    """Over the corpus index's scan (``names`` set), a random third of the files "written" (``read_one`` gives back
    the snapshot's object, as for a decay): the same state as the loop's, and ``read_one`` asked about each of those
    files once, with the snapshot's parse of that very file (one for one with the entries, or looked up by path
    when twins make the entries fewer than the files)."""
    rng = random.Random(seed)
    root = tmp_path / "memory"
    if twins:
        twins_corpus(root, rng)
    else:
        for i in range(rng.randint(3, 25)):
            category = rng.choice(["a", "b", "c/d", None])
            write_raw(root, rockbot_entry(f"e{i}", content=f"Fact {i} about Lisbon.", category=category), category)
    store = MemoryStore(root, open_corpus_index(tmp_path, root))
    scan = store.scan()
    assert scan.names is not None and not scan.malformed and bool(scan.duplicates) == twins
    touched = {name for name in scan.names if rng.random() < 0.35}
    assert touched  # (each seed's third is not empty)
    asked: list[tuple[str, Any]] = []

    def read_one(child: Any, seen: Any) -> Any:
        asked.append((child.path, seen))
        return seen

    looks: dict[str, Any] = {"as_listed": 0, "read": []}
    as_listed = final_state._as_listed
    watch_looks(monkeypatch, looks)
    fast = scan_final(store, scan, touched, read_one, listing=True)
    monkeypatch.setattr(final_state, "_as_listed", as_listed)
    assert looks["as_listed"] == 1
    assert sorted(path for path, _ in asked) == sorted(touched)
    assert all(parse is not None and str(parse.path) == path for path, parse in asked)
    loop = scan_final(store, dataclasses.replace(scan, names=None), touched, read_one, listing=True)
    same_state(fast, loop)


# Decaying entries in one category, a quiet one (within the grace: never written) in another.
SPREAD = [
    Seed("w1", "Allen Conway works at Xebia.", category="work", age_days=40),
    Seed("w2", "The staging cluster runs in eu-west-3 since 2024-05-02.", category="work", age_days=45),
    Seed("q1", "Kim reviews the quarterly budget with Rose.", category="quiet", age_days=5),
]


def watch_listings(monkeypatch: pytest.MonkeyPatch, action: Callable[[], object] | None = None) -> dict[str, Any]:
    """The directories the final-state check lists (``walk.list_directory``, counted only while it runs), whether it
    took the snapshot's state, and the cycle's touched files; ``action``: what the agent does before the check."""
    from dreamkeeper.memory import walk

    seen: dict[str, Any] = {"listed": [], "as_listed": 0, "touched": set(), "fast": None}
    original, listing_one, as_listed = Writes._final_state, walk.list_directory, final_state._as_listed
    active = [False]

    def final(self: Writes, snapshot: ScanResult, **how: bool) -> FinalState:
        if seen["fast"] is not None:
            return original(self, snapshot, **how)
        seen["touched"] = set(self._touched)
        if action is not None:
            time.sleep(TICK)
            action()
        active[0] = True
        try:
            seen["fast"] = original(self, snapshot, **how)
        finally:
            active[0] = False
        return seen["fast"]

    def listing(directory: str, listing: Any) -> Any:
        if active[0]:
            seen["listed"].append(directory)
        return listing_one(directory, listing)

    def counting(snapshot: ScanResult) -> FinalState:
        seen["as_listed"] += 1
        return as_listed(snapshot)

    monkeypatch.setattr(Writes, "_final_state", final)
    monkeypatch.setattr(walk, "list_directory", listing)
    monkeypatch.setattr(final_state, "_as_listed", counting)
    return seen


def test_only_the_directories_written_into_are_listed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, corpus_index_mode: str
) -> None:
    """With the kept listings (a warm index), the check lists the directory the cycle's decays went into and takes
    every other directory's names from the listings; without them (cold, corrupt) it lists every directory; with
    stale ones, those whose kept stat is off too. The state is the snapshot's in each."""
    write_corpus(tmp_path, SPREAD)
    later(monkeypatch)
    cycle(tmp_path, 0)
    time.sleep(TICK)
    seen = watch_listings(monkeypatch)
    outcome = cycle(tmp_path, 3)
    assert outcome.report.result == "completed" and outcome.report.decayed == 2
    assert seen["as_listed"] == 1
    root = tmp_path / "memory"
    written = {str(Path(name).parent) for name in seen["touched"]}
    assert written == {str(root / "work")}
    every = {str(root), str(root / "work"), str(root / "quiet")}
    listed = set(seen["listed"])
    assert written <= listed <= every
    if corpus_index_mode == "warm":
        assert listed == written  # the quiet directory and the root: from the kept listings
    if corpus_index_mode in ("cold", "corrupt"):
        assert listed == every


def test_a_file_added_where_the_cycle_wrote_nothing_is_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, corpus_index_mode: str
) -> None:
    """The agent adds an entry to the quiet directory after the cycle's writes: that directory's stat moved, so its
    kept names are not used; the walk finds the new file and the state is the file-by-file loop's."""
    store = write_corpus(tmp_path, SPREAD)
    later(monkeypatch)
    cycle(tmp_path, 0)
    time.sleep(TICK)
    added = lambda: write_raw(store.root, rockbot_entry("q9", content="Lena joined in 2025.", category="quiet"))  # noqa: E731
    seen = watch_listings(monkeypatch, added)
    outcome = cycle(tmp_path, 3)
    assert outcome.report.result == "completed" and seen["as_listed"] == 0
    assert str(tmp_path / "memory" / "quiet") in seen["listed"]
    assert "q9" in seen["fast"].live and outcome.report.live_entries == len(SPREAD) + 1
    assert outcome.report.agent_deletes == 0 and outcome.report.hard_deletes == 0
