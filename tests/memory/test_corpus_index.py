"""The corpus index (memory/corpus_index.py): a steady scan parses nothing, and a stale, racy, corrupt or planted
index costs a full read, never a wrong parse."""

from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path

import pytest

from dreamkeeper.memory import MemoryStore
from dreamkeeper.memory import corpus_index as ci
from dreamkeeper.memory.corpus_index import FORMAT, CorpusIndex, index_path
from tests.memory.conftest import rockbot_entry, write_raw

LATER_NS = 60 * 1_000_000_000  # "the next cycle": a minute after the files were written


def later(monkeypatch: pytest.MonkeyPatch, offset: int = LATER_NS) -> None:
    real = ci.time.time_ns
    monkeypatch.setattr(ci, "_now_ns", lambda: real() + offset)


def scan(agent: Path) -> tuple[dict[str, str], CorpusIndex]:
    """One cycle's worth: a store with the agent's index, scanned, the index saved."""
    index = ci.open_corpus_index(agent, agent / "memory")
    store = MemoryStore(agent / "memory", index)
    result = store.scan()
    index.save()
    return {s.id: s.entry.content for s in result.entries}, index


def test_a_steady_scan_parses_nothing(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    later(monkeypatch)
    first, index = scan(agent)
    assert index.reads == 3 and index.hits == 0
    again, index = scan(agent)
    assert again == first
    assert (index.hits, index.reads) == (3, 0)


def test_an_edit_keeping_size_and_mtime_is_read_again(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    later(monkeypatch)
    scan(agent)
    path = agent / "memory" / "people" / "family" / "entry1.json"
    before = os.stat(path)
    text = path.read_text(encoding="utf-8")
    edited = text.replace("Portland", "Portlant")
    assert len(edited) == len(text)
    path.write_text(edited, encoding="utf-8")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # size and mtime as they were: only ctime moved
    assert os.stat(path).st_size == before.st_size and os.stat(path).st_mtime_ns == before.st_mtime_ns
    seen, index = scan(agent)
    assert seen["entry1"] == "Fact number 1 about Portlant."
    assert index.reads == 1 and index.hits == 2


def test_a_file_swapped_in_by_rename_is_read_again(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    later(monkeypatch)
    scan(agent)
    path = agent / "memory" / "people" / "family" / "entry2.json"
    before = os.stat(path)
    swap = path.with_name(".swap")
    swap.write_text(path.read_text(encoding="utf-8").replace("Portland", "Portlanx"), encoding="utf-8")
    os.utime(swap, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.rename(swap, path)  # another inode, same size and mtime
    seen, index = scan(agent)
    assert seen["entry2"] == "Fact number 2 about Portlanx."
    assert index.reads == 1


def test_added_and_removed_files_behind_the_index(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    later(monkeypatch)
    scan(agent)
    root = agent / "memory"
    (root / "people" / "family" / "entry0.json").unlink()
    write_raw(root, rockbot_entry("entry9", content="A new fact."))
    seen, index = scan(agent)
    assert set(seen) == {"entry1", "entry2", "entry9"}
    assert (index.hits, index.reads) == (2, 1)


def test_a_racily_clean_file_is_not_trusted(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Git's rule: a file modified within the timestamp granularity of the scan that read it may change again
    without its stat changing, so it is not recorded; the next scan reads it (and records it once it is older)."""
    monkeypatch.setattr(
        ci, "_now_ns", lambda: os.stat(agent / "memory" / "people" / "family" / "entry0.json").st_mtime_ns
    )
    _, index = scan(agent)
    assert index.reads == 3
    _, index = scan(agent)
    assert (index.hits, index.reads) == (0, 3)  # still racy: read again, never trusted
    later(monkeypatch)
    scan(agent)
    _, index = scan(agent)
    assert (index.hits, index.reads) == (3, 0)


@pytest.mark.parametrize("damage", ["truncated", "flipped", "garbage", "empty", "other-version", "directory"])
def test_a_damaged_index_costs_a_full_read(agent: Path, monkeypatch: pytest.MonkeyPatch, damage: str) -> None:
    later(monkeypatch)
    first, _ = scan(agent)
    path = index_path(agent)
    data = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "flipped":
        middle = len(data) // 2
        path.write_bytes(data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :])
    elif damage == "garbage":
        path.write_bytes(os.urandom(4096))
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "other-version":
        path.write_bytes(data.replace(FORMAT, b"dreamkeeper-corpus-index 0\n", 1))
    else:
        path.unlink()
        path.mkdir()
    seen, index = scan(agent)
    assert seen == first
    assert (index.hits, index.reads) == (0, 3)


def test_an_index_of_another_root_is_not_used(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    later(monkeypatch)
    scan(agent)
    index = CorpusIndex(index_path(agent), agent / "elsewhere")
    index.load()
    assert not index.loaded


def test_a_planted_pickle_runs_nothing(agent: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The index is on the agent's volume: a file made to run code when unpickled is refused, not run."""
    later(monkeypatch)
    first, _ = scan(agent)
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (os.system, (f"touch {marker}",))

    payload = pickle.dumps((ci.code_version(), str(agent / "memory"), {"x": Evil()}))
    path = index_path(agent)
    path.write_bytes(FORMAT + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
    seen, index = scan(agent)
    assert not marker.exists()
    assert seen == first and index.reads == 3


def test_a_malformed_file_is_never_cached(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    later(monkeypatch)
    bad = agent / "memory" / "broken.json"
    bad.write_text("{not json", encoding="utf-8")
    scan(agent)
    index = ci.open_corpus_index(agent, agent / "memory")
    result = MemoryStore(agent / "memory", index).scan()
    assert [m.path for m in result.malformed] == [bad]
    assert index.reads == 1  # the malformed file, read again


def test_saving_touches_only_the_index(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    later(monkeypatch)
    root = agent / "memory"
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    scan(agent)
    after = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    assert after == before
    assert index_path(agent).is_file()
