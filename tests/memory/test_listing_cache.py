"""The kept listings (memory/listing_cache.py): a scan with the corpus index takes a directory's names from the
listing the last scan kept when the directory's stat is the one kept with them, and lists it otherwise.

Whatever the cache holds, a scan must yield exactly the files a real listing yields, in the same order: every name
change (a file added, removed, renamed; a directory added, removed, replaced; the root replaced) is seen, a racy
directory is never kept, a damaged, foreign or planted file is discarded (every directory listed), and a file
rewritten in place is read again (the corpus index's own stat check: the listing vouches for names only)."""

from __future__ import annotations

import logging
import os
import pickle
import time
from pathlib import Path
from typing import Any

import pytest

from dreamkeeper.memory import MemoryStore, SweepReport
from dreamkeeper.memory import corpus_index as corpus_index_module
from dreamkeeper.memory import listing as listing_module
from dreamkeeper.memory.atomic import NEW_SUFFIX
from dreamkeeper.memory.checked_files import write_checked
from dreamkeeper.memory.corpus_index import RACY_WINDOW_NS, CorpusIndex, code_version, index_path
from dreamkeeper.memory.listing import Listing
from dreamkeeper.memory.listing_cache import FORMAT, DirNames
from tests.memory.conftest import rockbot_entry, write_raw
from tests.memory.name_changes import NAME_CHANGES, change_names

TICK = 0.02  # past a coarse timestamp tick: a change after it moves a directory's mtime


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    agent = tmp_path / "agent"
    root = agent / "memory"
    root.mkdir(parents=True)
    write_raw(root, rockbot_entry("entry1", content="Rose lives in Portland."))
    write_raw(root, rockbot_entry("entry2", content="Kim works at Xebia.", category="work"))
    write_raw(root, rockbot_entry("entry3", content="Uncategorised fact.", category=None))
    write_raw(root, rockbot_entry("entry4", content="Sam plays chess.", category="people/friends/chess"))
    return agent


def later(monkeypatch: pytest.MonkeyPatch) -> None:
    """Scans made as if the corpus were older than the racy window (its files and directories were just written)."""
    real = time.time_ns
    shifted = lambda: real() + RACY_WINDOW_NS + 1_000_000_000  # noqa: E731
    monkeypatch.setattr(listing_module, "_now_ns", shifted)
    monkeypatch.setattr(corpus_index_module, "_now_ns", shifted)


def cycle_scan(agent: Path) -> tuple[list[str], CorpusIndex]:
    """What one cycle's scan yields (a new process: a new index, loaded from the state directory), then saved."""
    index = CorpusIndex(index_path(agent), agent / "memory")
    store = MemoryStore(agent / "memory", index)
    names = [str(item.path) for item in index.items(store, Listing())]  # entries and malformed files, in order
    index.save()
    time.sleep(TICK)
    return names, index


def listed(agent: Path) -> list[str]:
    """The entry files a real listing finds, in the scan's order."""
    return [child.path for child in MemoryStore(agent / "memory").iter_file_entries()]


def directories(agent: Path) -> int:
    root = agent / "memory"
    return sum(1 for _ in os.walk(root))


def test_a_steady_scan_lists_no_directory(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    later(monkeypatch)
    first, index = cycle_scan(agent)
    assert index.listings.listed == directories(agent) and index.listings.used == 0
    assert index.listings.path.is_file()
    kept = index.listings.path.stat()
    second, index = cycle_scan(agent)
    assert second == first == listed(agent)
    assert index.listings.used == directories(agent) and index.listings.listed == 0
    assert index.hits == 4 and index.reads == 0  # every file still stat'ed, none read
    after = index.listings.path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (kept.st_ino, kept.st_mtime_ns)  # nothing new: not rewritten


@pytest.mark.parametrize("change", NAME_CHANGES)
def test_a_changed_name_is_seen(agent: Path, monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    later(monkeypatch)
    cycle_scan(agent)
    change_names(agent / "memory", change)
    names, index = cycle_scan(agent)
    assert names == listed(agent)
    assert index.listings.listed >= 1  # the changed directory was listed again
    again, index = cycle_scan(agent)
    assert again == names and index.listings.listed == 0  # and its new names kept


def test_a_file_rewritten_in_place_is_read_again(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The directory keeps its stat, so its names come from the cache; the file's own stat moved: it is read."""
    later(monkeypatch)
    cycle_scan(agent)
    path = agent / "memory" / "work" / "entry2.json"
    with open(path, "r+", encoding="utf-8") as handle:
        text = handle.read()
        handle.seek(0)
        handle.write(text.replace("Xebia", "Xebiq"))
    index = CorpusIndex(index_path(agent), agent / "memory")
    scan = MemoryStore(agent / "memory", index).scan()
    assert index.listings.listed == 0 and index.reads == 1
    assert {s.entry.id: s.entry.content for s in scan.entries}["entry2"] == "Kim works at Xebiq."


def test_racy_directories_are_not_kept(agent: Path) -> None:
    """With the real clock every directory was written just now: none is kept, the next scan lists them all."""
    _, index = cycle_scan(agent)
    assert not index.listings.path.exists()
    _, index = cycle_scan(agent)
    assert index.listings.used == 0 and index.listings.listed == directories(agent)


def test_a_listing_not_run_to_its_end_is_not_kept(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    later(monkeypatch)
    index = CorpusIndex(index_path(agent), agent / "memory")
    names = MemoryStore(agent / "memory").iter_file_names(Listing(), index.listings)
    next(names)
    next(names)  # the root listed (and learnt), a sub-directory's first file yielded: the walk stops there
    assert index.listings._seen
    index.listings.save()
    assert not index.listings.path.exists()


def _plant(agent: Path, content: object, magic: bytes = FORMAT) -> Path:
    path = index_path(agent).with_name("corpus-index.dirs")
    assert write_checked(path, magic, pickle.dumps(content, protocol=5), "test", "test")
    return path


def _kept(agent: Path) -> dict[str, DirNames]:
    later_index = CorpusIndex(index_path(agent), agent / "memory")
    later_index.listings.begin()
    return dict(later_index.listings._saved)


@pytest.mark.parametrize(
    "damage",
    [
        "byte flipped",
        "truncated",
        "another format",
        "another code version",
        "another root",
        "a name with a separator",
        "a hidden name",
        "a parent name",
        "an empty name",
        "a name that is not a string",
        "a stat that is not ints",
        "a hidden flag that is not a bool",
        "an object",
        "not a regular file",
    ],
)
def test_a_damaged_or_foreign_listing_is_discarded(
    agent: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    later(monkeypatch)
    cycle_scan(agent)
    kept = _kept(agent)
    assert kept
    root = str(agent / "memory")
    family = str(agent / "memory" / "people" / "family")
    record, files, subdirs, hidden = kept[family]
    path = index_path(agent).with_name("corpus-index.dirs")
    planted: dict[str, object] = dict(kept)
    version: object = code_version()
    if damage == "byte flipped":
        data = path.read_bytes()
        middle = len(data) // 2
        path.write_bytes(data[:middle] + bytes([data[middle] ^ 0x5A]) + data[middle + 1 :])
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:-7])
    elif damage == "another format":
        _plant(agent, (version, root, planted), b"dreamkeeper-corpus-listing 0\n")
    elif damage == "not a regular file":
        path.unlink()
        path.mkdir()
    else:
        if damage == "another code version":
            version = "0" * 64
        elif damage == "another root":
            root = str(agent / "elsewhere")
        elif damage == "an object":
            planted[family] = (record, files, subdirs, hidden, Path("x"))
        else:
            bad: object = {
                "a name with a separator": (record, ("entry1.json", "../../work/entry2.json"), subdirs, hidden),
                "a hidden name": (record, (".entry1.json",), subdirs, hidden),
                "a parent name": (record, files, ("..",), hidden),
                "an empty name": (record, ("",), subdirs, hidden),
                "a name that is not a string": (record, (b"entry1.json",), subdirs, hidden),
                "a stat that is not ints": ((1.5, record[1], record[2]), files, subdirs, hidden),
                "a hidden flag that is not a bool": (record, files, subdirs, 0),
            }[damage]
            planted[family] = bad
        _plant(agent, (version, root, planted))
    caplog.set_level(logging.WARNING, logger="dreamkeeper.memory.listing_cache")
    names, index = cycle_scan(agent)
    assert names == listed(agent)
    assert index.listings.used == 0 and index.listings.listed == directories(agent)
    assert any("corpus listing" in r.getMessage() for r in caplog.records), damage


def test_a_listing_of_another_directory_stat_is_not_used(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kept listing whose stat is not the directory's now (a stale file, or a planted one with made-up names)
    is not used: the directory is listed."""
    later(monkeypatch)
    cycle_scan(agent)
    kept = _kept(agent)
    family = str(agent / "memory" / "people" / "family")
    (mtime, ctime, ino), _, subdirs, hidden = kept[family]
    kept[family] = ((mtime, ctime + 1, ino), ("ghost.json",), subdirs, hidden)
    _plant(agent, (code_version(), str(agent / "memory"), kept))
    names, index = cycle_scan(agent)
    assert names == listed(agent) and not any("ghost" in n for n in names)
    assert index.listings.listed == 1 and index.listings.used == directories(agent) - 1


def test_no_index_no_kept_listing(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store without the corpus index (``corpus_index=False``) lists every directory and keeps nothing."""
    later(monkeypatch)
    store = MemoryStore(agent / "memory")
    assert [str(s.path) for s in store.scan().entries] == listed(agent)
    assert not (agent / ".dreamkeeper").exists()


def _sweep_listing(agent: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[SweepReport, list[str]]:
    """The leftovers sweep of a cycle's start, with the kept listings; the directories it listed."""
    index = CorpusIndex(index_path(agent), agent / "memory")
    listed_dirs: list[str] = []
    real = os.scandir

    def counting(path: Any = ".") -> Any:
        listed_dirs.append(str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", counting)  # the module leftovers.py lists with
    try:
        report = MemoryStore(agent / "memory").sweep(index.listings.for_sweep)
    finally:
        monkeypatch.setattr(os, "scandir", real)
    return report, listed_dirs


def test_the_sweep_lists_no_directory_the_kept_listings_vouch_for(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    later(monkeypatch)
    cycle_scan(agent)
    report, swept = _sweep_listing(agent, monkeypatch)
    assert swept == [] and not report.removed


def test_the_sweep_finds_a_leftover_of_ours_in_a_kept_directory(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write of ours killed after the listing was kept leaves a hidden temp: its directory's stat moved, so the
    sweep lists it and removes the temp (every other directory still vouched for)."""
    later(monkeypatch)
    cycle_scan(agent)
    temp = agent / "memory" / "work" / f".entry2.json.0123abcd{NEW_SUFFIX}"
    temp.write_text("{}", encoding="utf-8")
    report, swept = _sweep_listing(agent, monkeypatch)
    assert swept == [str(agent / "memory" / "work")]
    assert report.removed == [temp] and not temp.exists()


def test_a_directory_that_held_a_hidden_name_is_always_listed(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kept with a hidden name in it (the agent's own temp, say), a directory is listed by every sweep: the kept
    listing does not name hidden files, so it cannot vouch that none of them is ours."""
    later(monkeypatch)
    agents_temp = agent / "memory" / "work" / ".entry2.json.tmp"
    agents_temp.write_text("{}", encoding="utf-8")
    cycle_scan(agent)
    for _ in range(2):
        report, swept = _sweep_listing(agent, monkeypatch)
        assert swept == [str(agent / "memory" / "work")]
        assert not report.removed and agents_temp.exists()  # the agent's file: never touched


def test_without_kept_listings_the_sweep_lists_every_directory(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    later(monkeypatch)
    report, swept = _sweep_listing(agent, monkeypatch)  # nothing kept yet
    assert len(swept) == directories(agent) and not report.removed


def _scandirs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The directories ``os.scandir`` lists from now on (the sweep's, through walk.list_directory, and the scan's)."""
    calls: list[str] = []
    real = os.scandir

    def counting(path: Any = ".") -> Any:
        calls.append(str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", counting)
    return calls


def _swept_then_scanned(agent: Path, between: Any = None) -> tuple[list[str], CorpusIndex]:
    """A cycle's start: the leftovers sweep with the kept listings, then the scan, on one index (one process)."""
    index = CorpusIndex(index_path(agent), agent / "memory")
    store = MemoryStore(agent / "memory", index)
    store.sweep(index.listings.for_sweep)
    if between is not None:
        between()
    names = [str(item.path) for item in index.items(store, Listing())]
    index.save()
    time.sleep(TICK)
    return names, index


def test_a_directory_the_sweep_listed_is_not_listed_again_by_the_scan(
    agent: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep lists a directory whose stat moved since its listing was kept (the last cycle wrote there, or the
    agent did); the scan after it takes the names that listing found while the directory still has the stat taken
    before it: one listing a cycle, not two. The names are a real listing's, and the next cycle lists nothing."""
    later(monkeypatch)
    cycle_scan(agent)
    write_raw(agent / "memory", rockbot_entry("entry5", content="Ann runs the Lisbon office.", category="work"))
    time.sleep(TICK)
    calls = _scandirs(monkeypatch)
    names, index = _swept_then_scanned(agent)
    work = str(agent / "memory" / "work")
    assert calls == [work]  # by the sweep, once
    assert names == listed(agent) and any(name.endswith("entry5.json") for name in names)
    assert index.listings.listed == 0 and index.listings.used == directories(agent)
    calls.clear()
    names, index = cycle_scan(agent)  # the next cycle: the sweep's listing was saved with the scan's
    assert calls == [] and names == listed(agent) and index.listings.listed == 0


def test_a_name_the_agent_adds_between_the_sweep_and_the_scan_is_seen(
    agent: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hostile timing: the agent creates a file in the directory the sweep has just listed, before the scan: the
    directory's stat moved since the sweep's listing, so the scan lists it again and finds the file."""
    later(monkeypatch)
    cycle_scan(agent)
    write_raw(agent / "memory", rockbot_entry("entry5", content="Ann runs the Lisbon office.", category="work"))
    time.sleep(TICK)

    def agent_writes() -> None:
        write_raw(agent / "memory", rockbot_entry("entry6", content="Bo joined in May.", category="work"))

    names, index = _swept_then_scanned(agent, agent_writes)
    assert names == listed(agent) and any(name.endswith("entry6.json") for name in names)
    assert index.listings.listed == 1  # the work directory, again


def test_a_racy_directory_the_sweep_listed_is_listed_again(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A directory changed within the racy window of the sweep's listing is not kept from it: the scan lists it."""
    later(monkeypatch)
    cycle_scan(agent)
    monkeypatch.setattr(listing_module, "_now_ns", time.time_ns)  # the sweep and scan now: the change is racy
    write_raw(agent / "memory", rockbot_entry("entry5", content="Ann runs the Lisbon office.", category="work"))
    calls = _scandirs(monkeypatch)
    names, index = _swept_then_scanned(agent)
    work = str(agent / "memory" / "work")
    assert calls == [work, work]  # the sweep's listing was not kept: the scan listed it too
    assert names == listed(agent) and index.listings.listed == 1
