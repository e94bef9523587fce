"""The final-state check of a cycle that wrote nothing, over a corpus whose directories are as its scan listed them
(consolidation/final_state.py, ``_as_listed``; memory/listing.py): the state is built from the snapshot without
listing again, and it must be exactly what the listing would have made (duplicates and case twins included), and
never taken when the listing could differ: the agent adding, removing or renaming a file while the cycle ran, a
file the snapshot could not take, a file the cycle touched."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dreamkeeper.consolidation import final_state
from dreamkeeper.consolidation.cycle import CycleOptions, CycleOutcome, FinalState, Writes, run_cycle
from dreamkeeper.consolidation.final_state import scan_final
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.memory import MemoryStore, ScanResult
from dreamkeeper.memory import listing as listing_module
from dreamkeeper.memory.corpus_index import RACY_WINDOW_NS
from dreamkeeper.memory.listing import Listing
from dreamkeeper.proposers import ScriptedProposer
from tests.consolidation.corpus import BASE_TIME, Seed, write_corpus
from tests.memory.conftest import rockbot_entry, write_raw

pytestmark = pytest.mark.usefixtures("corpus_index_mode")

SEEDS = [
    Seed("s1", "Allen Conway works at Xebia."),
    Seed("s2", "Allen Conway lives in Austin.", category="people"),
    Seed("n1", "Trish prefers concise notes about Kubernetes 1.36.", category=None),
    Seed("n2", "The staging cluster runs in eu-west-3 since 2024-05-02."),
]
NOTHING: dict[str, list[Any]] = {"toSave": [], "toDelete": []}
TICK = 0.02  # past a coarse timestamp tick: a change after it moves its directory's mtime


def later(monkeypatch: pytest.MonkeyPatch) -> None:
    """Listings made as if the corpus were older than the racy window (tests write it a moment before)."""
    real = time.time_ns
    monkeypatch.setattr(listing_module, "_now_ns", lambda: real() + RACY_WINDOW_NS + 1_000_000_000)


def cycle(agent_dir: Path) -> CycleOutcome:
    options = CycleOptions(agent_dir=agent_dir, settings=CycleSettings(min_interval_hours=0), now=BASE_TIME)
    return asyncio.run(run_cycle(options, ScriptedProposer([NOTHING])))


def spy(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What the report's final-state check did: whether it built the state from the snapshot, the files it
    looked at, and the cycle's ``Writes``."""
    seen: dict[str, Any] = {"as_listed": 0, "read": [], "writes": None}
    original = Writes._final_state

    def final(self: Writes, snapshot: Any, **how: bool) -> FinalState:
        if seen["writes"] is None:
            seen["writes"] = self
            action = seen.get("action")
            if action is not None:
                time.sleep(TICK)
                action()
        return original(self, snapshot, **how)

    watch_looks(monkeypatch, seen)
    monkeypatch.setattr(Writes, "_final_state", final)
    return seen


def watch_looks(monkeypatch: pytest.MonkeyPatch, seen: dict[str, Any]) -> None:
    """Each state built from the snapshot counted in ``seen["as_listed"]``, each file the check looks at appended
    to ``seen["read"]``."""
    as_listed, read_final = final_state._as_listed, Writes._read_final

    def counting(snapshot: ScanResult) -> FinalState:
        seen["as_listed"] += 1
        return as_listed(snapshot)

    def reading(self: Writes, child: Any, stored: Any) -> Any:
        seen["read"].append(child.path)
        return read_final(self, child, stored)

    monkeypatch.setattr(final_state, "_as_listed", counting)
    monkeypatch.setattr(Writes, "_read_final", reading)


def settled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> MemoryStore:
    store = write_corpus(tmp_path, SEEDS)
    later(monkeypatch)
    cycle(tmp_path)  # reviews them all; with the clock where it is, the next cycle writes nothing
    time.sleep(TICK)
    return store


def test_a_cycle_that_wrote_nothing_takes_its_final_state_from_the_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settled(tmp_path, monkeypatch)
    seen = spy(monkeypatch)
    outcome = cycle(tmp_path)
    assert outcome.report.result == "completed"
    assert not seen["writes"]._touched and seen["as_listed"] == 1 and seen["read"] == []
    assert outcome.report.live_entries == len(SEEDS) and outcome.report.agent_deletes == 0
    # The same counts as the listing makes (the record forced to say "changed").
    monkeypatch.setattr(Listing, "unchanged", lambda self: False)
    listed = cycle(tmp_path)
    assert (listed.report.live_entries, listed.report.archived_entries) == (
        outcome.report.live_entries,
        outcome.report.archived_entries,
    )


@pytest.mark.parametrize("change", ["deleted", "added", "renamed"])
def test_the_agent_changing_a_name_while_the_cycle_ran_is_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    store = settled(tmp_path, monkeypatch)
    path = store.require("n2").path
    seen = spy(monkeypatch)
    if change == "deleted":
        seen["action"] = path.unlink
    elif change == "added":
        seen["action"] = lambda: write_raw(store.root, rockbot_entry("n9", content="Lena joined in 2025."))
    else:
        seen["action"] = lambda: path.rename(path.with_name("n2-moved.json"))
    outcome = cycle(tmp_path)
    assert outcome.report.result == "completed" and seen["as_listed"] == 0
    if change == "added":
        assert outcome.report.live_entries == len(SEEDS) + 1 and outcome.report.agent_deletes == 0
    else:
        # A renamed file no longer where its id says is misfiled: not an entry the check counts; gone as n2.
        assert outcome.report.live_entries == len(SEEDS) - 1 and outcome.report.agent_deletes == 1
    assert outcome.report.hard_deletes == 0


def test_a_malformed_file_is_read_again_at_the_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The snapshot could not take it, so the state cannot come from the snapshot: the agent may fix it meanwhile."""
    store = write_corpus(tmp_path, SEEDS)
    broken = store.root / "project-context" / "broken.json"
    broken.write_text("{not json", encoding="utf-8")
    later(monkeypatch)
    cycle(tmp_path)
    time.sleep(TICK)
    seen = spy(monkeypatch)
    outcome = cycle(tmp_path)
    assert outcome.report.result == "completed" and seen["as_listed"] == 0
    assert str(broken) in seen["read"]


def test_a_cycle_that_writes_looks_at_what_it_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each file it wrote is looked at; all of them still holding its stamps, over the files its scan walked, the
    state is the snapshot's (``_as_scanned``: test_final_state_as_scanned.py has the rest)."""
    write_corpus(tmp_path, SEEDS)
    later(monkeypatch)
    seen = spy(monkeypatch)
    outcome = cycle(tmp_path)  # the first cycle stamps every entry it reviews
    assert outcome.report.result == "completed" and seen["writes"]._touched
    assert set(seen["read"]) >= seen["writes"]._touched and len(seen["read"]) == len(set(seen["read"]))
    assert seen["as_listed"] == 1 and outcome.report.live_entries == len(SEEDS)


def test_a_racy_directory_is_listed_again(tmp_path: Path) -> None:
    """The real clock: the corpus was written a moment ago, so its directories' stat proves nothing yet."""
    write_corpus(tmp_path, SEEDS)
    cycle(tmp_path)
    scan = MemoryStore(tmp_path / "memory").scan()
    assert scan.listing is not None and not scan.listing.unchanged()


# ---- the state built from the snapshot is the listing's, on corpora with twins --------------------------------------


def twins_corpus(root: Path, rng: random.Random) -> None:
    """Entries over a few categories, some archived, with exact-id twins in two categories and case twins."""
    categories = ["a", "b", "c/d", None]
    for i in range(rng.randint(5, 30)):
        category = rng.choice(categories)
        archived = "2026-01-02T03:04:05.0000000Z" if rng.random() < 0.3 else None
        entry = rockbot_entry(f"e{i}", content=f"Fact {i} about Portland.", category=category, archivedAt=archived)
        write_raw(root, entry, category=category)
    for j in range(rng.randint(1, 4)):
        count = rng.randint(2, 4)
        spellings = [f"Twin{j}", f"twin{j}", f"TWIN{j}", f"Twin{j}"][:count]
        for spelling, category in zip(spellings, rng.sample(["a", "b", "c/d", "e"], count), strict=True):
            write_raw(root, rockbot_entry(spelling, content=f"{spelling} in {category}.", category=category), category)


@pytest.mark.parametrize("seed", range(12))
def test_the_state_from_the_snapshot_is_the_listings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, seed: int
) -> None:
    root = tmp_path / "memory"
    twins_corpus(root, random.Random(seed))
    later(monkeypatch)
    store = MemoryStore(root)
    scan = store.scan()
    assert scan.duplicates and not scan.malformed and scan.listing is not None
    time.sleep(TICK)
    never: Callable[..., Any] = lambda child, stored: pytest.fail(f"{child.path} read")  # noqa: E731
    with caplog.at_level(logging.WARNING):
        caplog.clear()
        fast = scan_final(store, scan, set(), never, listing=True)
        fast_warnings = [r.getMessage() for r in caplog.records]
        scan.listing = None  # no record: the listing is made
        caplog.clear()
        listed = scan_final(store, scan, set(), never, listing=True)
        listed_warnings = [r.getMessage() for r in caplog.records]
    assert fast.ids == listed.ids and fast.live == listed.live and fast.archived == listed.archived
    assert fast.entries.keys() == listed.entries.keys()
    assert all(fast.entries[k] is listed.entries[k] for k in listed.entries)
    assert fast_warnings == listed_warnings and len(fast_warnings) == len(scan.duplicates)
    assert fast.archived == sum(s.entry.is_archived for s in scan.entries) > 0


def test_a_file_the_cycle_touched_is_looked_at(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write this cycle meant and did not make (a conflict: the agent rewrote the file in place, which moves no
    directory's stat) leaves the listing as it was: the file is still looked at, not taken from the snapshot."""
    root = tmp_path / "memory"
    path = write_raw(root, rockbot_entry("k1", content="Kim works at Xebia.", category="work"))
    write_raw(root, rockbot_entry("k2", content="Rose lives in Portland.", category="work"))
    later(monkeypatch)
    store = MemoryStore(root)
    scan = store.scan()
    time.sleep(TICK)
    with open(path, "r+", encoding="utf-8") as handle:
        text = handle.read()
        handle.seek(0)
        handle.write(text.replace("Xebia", "Xebiq"))
    assert scan.listing is not None and scan.listing.unchanged()
    read: list[str] = []

    def read_one(child: Any, stored: Any) -> Any:
        read.append(child.path)
        return store.read_file(Path(child.path))

    final = scan_final(store, scan, {str(path)}, read_one, listing=True)
    assert read == [str(path)] and final.live["k1"] == "Kim works at Xebiq."
