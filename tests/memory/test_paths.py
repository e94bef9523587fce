"""Ids and categories cannot name a path outside the memory root; symlinks are not followed out of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from dreamkeeper.memory import (
    Entry,
    InvalidCategoryError,
    InvalidIdError,
    MemoryStore,
    PathEscapeError,
    id_key,
    validate_category,
    validate_id,
)
from tests.memory.conftest import rockbot_entry, tree_bytes, write_raw

BAD_IDS = ["../x", "..", "a/b", "/etc/passwd", "", ".hidden", "a..b", "a\\b", "x" * 129, "a b", "a\x00b", "ü1"]
BAD_CATEGORIES = [
    "../x",
    "/etc",
    "a/../b",
    "a//b",
    "a/./b",
    "a/",
    "/",
    "",
    "  ",
    "C:\\x",
    "a\\b",
    "a b",
    "people/..",
    "./people",
    "a/b c",
]


@pytest.mark.parametrize("entry_id", BAD_IDS)
def test_bad_ids_are_refused(entry_id: str) -> None:
    with pytest.raises(InvalidIdError, match="nothing was written"):
        validate_id(entry_id)


@pytest.mark.parametrize("category", BAD_CATEGORIES)
def test_bad_categories_are_refused(category: str) -> None:
    with pytest.raises(InvalidCategoryError, match="nothing was written"):
        validate_category(category)


@pytest.mark.parametrize("entry_id", ["a1b2c3d4e5f6", "ABC", "a.b-c_d", "7"])
def test_good_ids_pass(entry_id: str) -> None:
    assert validate_id(entry_id) == entry_id


def test_store_writes_nothing_for_bad_names(tmp_path: Path) -> None:
    root = tmp_path / "agent" / "memory"
    root.mkdir(parents=True)
    store = MemoryStore(root)
    for entry_id in BAD_IDS:
        with pytest.raises(InvalidIdError):
            store.create(Entry(id=entry_id, content="x", category="people"))
        with pytest.raises(InvalidIdError):
            store.get(entry_id)
    for category in BAD_CATEGORIES:
        with pytest.raises(InvalidCategoryError):
            store.create(Entry(id="a1b2c3d4e5f6", content="x", category=category))
    assert tree_bytes(tmp_path) == {}
    assert [p for p in tmp_path.rglob("*") if p.is_dir()] == [tmp_path / "agent", root]


def test_a_file_whose_category_field_is_a_traversal_is_quarantined(store: MemoryStore, memory_root: Path) -> None:
    """Quarantined at scan time (issue 16 finding 4): no write can ever target it, so none can leave the root."""
    path = write_raw(memory_root, rockbot_entry(category="../../outside"), category="people")
    before = path.read_bytes()
    scan = store.scan()
    assert scan.entries == []
    assert [(m.path, m.kind) for m in scan.malformed] == [(path, "misfiled")]
    assert "is not a path" in scan.malformed[0].error
    assert store.get("a1b2c3d4e5f6") is None
    assert path.read_bytes() == before
    assert not (memory_root.parent.parent / "outside").exists()


def test_symlinked_category_dir_pointing_outside_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "people").symlink_to(outside, target_is_directory=True)
    store = MemoryStore(root)
    with pytest.raises(PathEscapeError, match="outside the memory root"):
        store.create(Entry(id="a1b2c3d4e5f6", content="x", category="people/family"))
    assert list(outside.iterdir()) == []


def test_symlinks_are_not_followed_when_scanning(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    root.mkdir()
    outside = tmp_path / "outside"
    write_raw(outside, rockbot_entry("0000000000aa"))
    (root / "linked-dir").symlink_to(outside / "people", target_is_directory=True)
    (root / "0000000000aa.json").symlink_to(outside / "people" / "family" / "0000000000aa.json")
    write_raw(root, rockbot_entry("0000000000bb"))
    store = MemoryStore(root)
    assert [s.id for s in store.scan().entries] == ["0000000000bb"]
    assert store.get("0000000000aa") is None


def test_memory_root_itself_may_be_a_symlink(tmp_path: Path) -> None:
    """A PVC mounted elsewhere and linked in is normal; only escapes from the root are refused."""
    real = tmp_path / "volume" / "memory"
    real.mkdir(parents=True)
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "memory").symlink_to(real, target_is_directory=True)
    store = MemoryStore(tmp_path / "agent" / "memory")
    stored = store.create(Entry(id="a1b2c3d4e5f6", content="x", category="people"))
    assert (real / "people" / "a1b2c3d4e5f6.json").is_file()
    store.archive(stored, "test")


def test_an_id_key_is_the_id_lower_cased_and_its_own_string_when_already_lower() -> None:
    """``id_key``: how ids are compared (case-insensitively, as RockBot's), without a second string per entry for
    the dicts a scan keeps all cycle."""
    lower = "".join(["a1b2c3", "d4e5f6"])  # built at run time: not a constant shared with anything else
    assert id_key(lower) is lower
    digits = "".join(["0123", "4567"])
    assert id_key(digits) is digits
    assert id_key("A1B2c3D4") == "a1b2c3d4"
    assert id_key("Straße-İ") == "Straße-İ".lower() and id_key("straße") == "straße"
