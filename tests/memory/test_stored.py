"""stored.py: a ``StoredEntry`` keeps its file as the path string and makes the ``Path`` when first asked for. It must
be the frozen value it was (equal by entry, path and fingerprint, immutable, picklable) whichever way it was built, its
``Path`` the very one ``Path(name)`` gives; and a steady scan and a steady cycle make a ``Path`` only for the entries
they write (the point of it: a ``Path`` per entry cost ~0.1 CPU s of a steady scan at 100,000 entries)."""

from __future__ import annotations

import asyncio
import copy
import os
import pickle
import time
from dataclasses import FrozenInstanceError
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dreamkeeper.consolidation.cycle import CycleOptions, run_cycle
from dreamkeeper.consolidation.settings import CycleSettings, DecaySettings
from dreamkeeper.memory import MemoryStore, StoredEntry, open_corpus_index
from dreamkeeper.memory import corpus_index as corpus_index_module
from dreamkeeper.memory import stored as stored_module
from dreamkeeper.memory.atomic import Fingerprint
from dreamkeeper.memory.entry import Entry
from dreamkeeper.proposers import OfflineProposer

FINGERPRINT = Fingerprint("ab" * 32, 10, 20)


def test_built_either_way_it_is_the_same_value(tmp_path: Path) -> None:
    entry = Entry(id="a1", content="Rose lives in Portland.")
    name = str(tmp_path / "memory" / "people" / "a1.json")
    made = StoredEntry(entry, Path(name), FINGERPRINT)
    named = StoredEntry.named(entry, name, FINGERPRINT)
    assert named == made and made == named
    assert named.name == made.name == name
    assert named.id == "a1"
    assert named.path == Path(name) and str(named.path) == name
    assert named.path is named.path  # made once
    assert named.path.parent == Path(name).parent and named.path.name == "a1.json"
    assert repr(named) == repr(made)
    assert named != StoredEntry.named(entry, name + "x", FINGERPRINT)
    assert named != StoredEntry.named(entry, name, Fingerprint("cd" * 32, 10, 20))
    assert named != StoredEntry.named(Entry(id="a1", content="Rose lives in Salem."), name, FINGERPRINT)
    assert named.__eq__("not a stored entry") is NotImplemented


def test_a_passing_path_is_the_path_and_is_not_kept(tmp_path: Path) -> None:
    """``passing_path`` (a bulk write's): the very ``Path(name)``, made without keeping it on the entry nor interning
    the file's name, and the kept one once ``path`` has been asked for."""
    entry = Entry(id="b2", content="Rose lives in Portland.")
    name = str(tmp_path / "memory" / "people" / "b2.json")
    named = StoredEntry.named(entry, name, FINGERPRINT)
    passing = named.passing_path()
    assert passing == Path(name) and str(passing) == name and passing.parts == Path(name).parts
    assert named._path is None  # not kept
    assert named.passing_path() is not passing  # made again each time it is asked for
    kept = named.path
    assert named.passing_path() is kept
    assert stored_module.path_of_name(name) == Path(name)
    for odd in ("/a.json", "//a.json", "x/..", "rel/c3.json"):  # the cases ``_path_of`` builds the long way, or not
        assert stored_module.path_of_name(odd) == Path(odd)


def test_it_is_frozen_and_survives_pickle_and_copy(tmp_path: Path) -> None:
    entry = Entry(id="a1", content="Kim works at Xebia.")
    named = StoredEntry.named(entry, str(tmp_path / "a1.json"), FINGERPRINT)
    for attribute in ("entry", "name", "fingerprint", "path", "_path"):
        with pytest.raises(FrozenInstanceError):
            setattr(named, attribute, None)
        with pytest.raises(FrozenInstanceError):
            delattr(named, attribute)
    for twin in (pickle.loads(pickle.dumps(named)), copy.copy(named), copy.deepcopy(named)):
        assert twin == named and twin.path == named.path
    with pytest.raises(TypeError):  # as the frozen dataclass was: a pydantic entry is not hashable
        hash(named)


@pytest.mark.parametrize(
    "name",
    [
        *("/m/a.json", "m/a.json", "a.json", "/m/x y/ü.json", "/m/../n/a.json", "/m//a.json", "/m/./a.json"),
        *("//m/a.json", "/a.json", "//a.json", "///a.json", "a//b.json", "./a.json", "../a.json", "/m/a.json/"),
        *("./m/a.json", "/m/./a.json", "m/.", "m/..", "/m/.json", "/m/a.json//"),
    ],
)
def test_the_path_is_the_one_path_gives(name: str) -> None:
    path = StoredEntry.named(Entry(id="a", content="x"), name, FINGERPRINT).path
    assert path == Path(name)
    assert str(path) == str(Path(name))
    assert path.parts == Path(name).parts


def test_a_scan_of_a_relative_root_gives_paths_as_pathlib_formats_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A memory root of "." (the walk's names start "./", which pathlib drops): an entry's name is its Path's string
    whether the file was read or taken from the index, and that string is pathlib's own. Before session 29 the scan
    set such a Path's string to the walk's, "./people/a1.json" for the parts ("people", "a1.json"), and a file read
    was named "people/a1.json"."""
    agent = tmp_path / "agent"
    root = agent / "memory"
    (root / "people").mkdir(parents=True)
    entry = Entry(id="a1", content="Rose lives in Portland.", category="people")
    (root / "people" / "a1.json").write_bytes(entry.to_json_bytes())
    real = time.time_ns
    monkeypatch.setattr(corpus_index_module, "_now_ns", lambda: real() + 60 * 1_000_000_000)
    monkeypatch.chdir(root)
    for _ in range(2):  # read, then from the index
        store = MemoryStore(Path("."), open_corpus_index(agent, Path(".")))
        scanned = store.scan().entries
        assert store.corpus_index is not None
        store.corpus_index.save()
        assert [s.name for s in scanned] == [os.path.join("people", "a1.json")]
        for stored in scanned:
            assert stored.path == Path(stored.name)
            assert str(stored.path) == stored.name == str(Path(*stored.path.parts))
    assert store.corpus_index.hits == 1


def _count_paths(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    made: list[str] = []
    real = stored_module._path_of
    monkeypatch.setattr(stored_module, "_path_of", lambda name: made.append(name) or real(name))
    return made


def _steady_agent(tmp_path: Path) -> Path:
    from bench.sim.world import write_synthetic_corpus

    agent = tmp_path / "agent"
    write_synthetic_corpus(agent / "memory", 120, 7)
    return agent


def test_a_steady_scan_makes_no_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    agent = _steady_agent(tmp_path)
    real = time.time_ns
    monkeypatch.setattr(corpus_index_module, "_now_ns", lambda: real() + 60 * 1_000_000_000)
    first = MemoryStore(agent / "memory", open_corpus_index(agent, agent / "memory"))
    read = first.scan()
    assert first.corpus_index is not None
    first.corpus_index.save()
    made = _count_paths(monkeypatch)
    store = MemoryStore(agent / "memory", open_corpus_index(agent, agent / "memory"))
    steady = store.scan()
    assert store.corpus_index is not None and store.corpus_index.reads == 0
    assert len(steady.entries) == len(read.entries) == 120
    assert made == []
    # Everything a stage may ask of them is there, and equal to what a full read gives.
    assert steady.entries == read.entries
    assert [s.path for s in steady.entries] == [s.path for s in read.entries]
    assert len(made) == 120


def test_a_steady_cycle_makes_paths_only_for_what_it_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    agent = _steady_agent(tmp_path)
    real = time.time_ns
    settings = CycleSettings(archive_cap=1.0, decay=DecaySettings(min_step=0.01))
    start = datetime.now(UTC)

    def cycle(at: datetime) -> int:
        options = CycleOptions(agent_dir=agent, settings=settings, force=True, now=at)
        outcome = asyncio.run(run_cycle(options, OfflineProposer()))
        assert outcome.report.result == "completed", outcome.report
        return int(outcome.report.decayed)

    for minutes in (1, 2, 3):  # settled: the cold start's merges, archives and stamps done, the index warm
        monkeypatch.setattr(corpus_index_module, "_now_ns", lambda m=minutes: real() + m * 60 * 1_000_000_000)
        cycle(start)
    made = _count_paths(monkeypatch)
    monkeypatch.setattr(corpus_index_module, "_now_ns", lambda: real() + 4 * 60 * 1_000_000_000)
    before = time.time_ns()
    decayed = cycle(start + timedelta(days=6))  # within the clock check's week
    assert decayed > 0
    # The decayed entries' files, and nothing else (a file's Path is made for a write and not kept, so it may be
    # made more than once: counted by file).
    assert 0 < len(set(made)) <= decayed
    assert all(os.stat(name).st_mtime_ns >= before for name in made)  # each one a file this cycle rewrote
    live = [s for s in MemoryStore(agent / "memory").scan().entries if s.entry.is_live]
    assert len(live) > 2 * decayed
