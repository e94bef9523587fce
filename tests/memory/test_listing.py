"""The record of a scan's listing (memory/listing.py, ``Listing``): every directory the scan listed, with its stat
from before it was listed. ``unchanged`` vouches that a listing now would find the same names; it must say no to
every change of a name (a file added, removed, renamed; a directory added, removed, replaced), to a directory too
recent for its stat to prove anything (the racy rule), to one that could not be listed, and to no listing at all."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from dreamkeeper.memory import MemoryStore
from dreamkeeper.memory import listing as listing_module
from dreamkeeper.memory.corpus_index import RACY_WINDOW_NS
from dreamkeeper.memory.listing import Listing
from tests.memory.conftest import rockbot_entry, write_raw
from tests.memory.name_changes import NAME_CHANGES, change_names

TICK = 0.02  # past a coarse timestamp tick (4 ms at HZ=250): a change after it moves a directory's mtime


def later(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scan made as if the corpus were older than the racy window (the directories were just written)."""
    real = time.time_ns
    monkeypatch.setattr(listing_module, "_now_ns", lambda: real() + RACY_WINDOW_NS + 1_000_000_000)


def scanned(root: Path) -> Listing:
    result = MemoryStore(root).scan()
    assert result.listing is not None
    time.sleep(TICK)
    return result.listing


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "agent" / "memory"
    root.mkdir(parents=True)
    write_raw(root, rockbot_entry("entry1", content="Rose lives in Portland."))
    write_raw(root, rockbot_entry("entry2", content="Kim works at Xebia.", category="work"))
    write_raw(root, rockbot_entry("entry3", content="Uncategorised fact.", category=None))
    return root


def test_every_directory_listed_is_recorded(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    later(monkeypatch)
    listing = scanned(root)
    assert set(listing.directories) == {
        str(root),
        str(root / "people"),
        str(root / "people" / "family"),
        str(root / "work"),
    }
    assert listing.unchanged()


@pytest.mark.parametrize("change", NAME_CHANGES)
def test_a_changed_name_is_seen(root: Path, monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    later(monkeypatch)
    listing = scanned(root)
    change_names(root, change)
    assert not listing.unchanged()


def test_a_temp_file_in_a_directory_counts_as_a_change(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Conservative: any name, even one the listing skips (an agent's temp), moves the directory's stat."""
    later(monkeypatch)
    listing = scanned(root)
    (root / "work" / ".entry2.json.tmp").write_text("{}", encoding="utf-8")
    assert not listing.unchanged()


def test_names_only_a_file_rewritten_in_place_keeps_the_listing(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the record vouches for is the names: a caller that needs bytes must look at the files itself."""
    later(monkeypatch)
    listing = scanned(root)
    path = root / "work" / "entry2.json"
    with open(path, "r+", encoding="utf-8") as handle:
        text = handle.read()
        handle.seek(0)
        handle.write(text.replace("Xebia", "Xebiq"))
    assert listing.unchanged()


def test_a_hidden_directory_is_not_part_of_the_listing(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (root / ".embeddings").mkdir()
    later(monkeypatch)
    listing = scanned(root)
    assert str(root / ".embeddings") not in listing.directories
    (root / ".embeddings" / "entry1.npy").write_bytes(b"\x93NUMPY")
    assert listing.unchanged()


def test_a_directory_changed_within_the_racy_window_is_not_trusted(root: Path) -> None:
    """With the real clock the directories were written just now: their stat cannot prove a later change absent."""
    listing = scanned(root)
    assert not listing.unchanged()
    assert any(max(m, c) >= listing.started_ns - RACY_WINDOW_NS for m, c, _ in listing.directories.values())


def test_a_directory_that_could_not_be_listed_is_never_unchanged(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    later(monkeypatch)
    listing = scanned(root)
    listing.failed(str(root / "work"))
    assert not listing.unchanged()
    gone = Listing()
    gone.record(str(root / "nowhere"))
    assert not gone.unchanged()
    not_a_directory = Listing()
    not_a_directory.record(str(root / "work" / "entry2.json"))
    assert not not_a_directory.unchanged()


def test_a_listing_of_nothing_vouches_for_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    later(monkeypatch)
    result = MemoryStore(tmp_path / "no-memory-here").scan()
    assert result.listing is not None and not result.listing.unchanged()
