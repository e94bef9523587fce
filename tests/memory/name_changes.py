"""Every kind of change to the names of a memory tree, for the tests of what vouches that a listing is unchanged
(memory/listing.py's ``Listing``, memory/listing_cache.py's kept listings). ``root`` holds ``people/family/entry1``
and ``work/entry2`` (tests/memory/test_listing.py, test_listing_cache.py); its parent is free for moves."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tests.memory.conftest import rockbot_entry, write_raw

NAME_CHANGES = (
    "file added",
    "file removed",
    "file renamed",
    "directory added",
    "directory with a file added",
    "directory removed",
    "directory replaced",
    "root replaced",
    "file turned into a directory",
    "hidden file added",
    "other file added",
)


def change_names(root: Path, change: str) -> None:
    family = root / "people" / "family"
    aside = root.parent
    if change == "file added":
        write_raw(root, rockbot_entry("entry9", content="A new fact."))
    elif change == "file removed":
        (family / "entry1.json").unlink()
    elif change == "file renamed":
        os.rename(family / "entry1.json", family / "entry0.json")
    elif change == "directory added":
        (root / "people" / "colleagues").mkdir()
    elif change == "directory with a file added":
        write_raw(root, rockbot_entry("entry8", content="Ana leads QA.", category="people/colleagues"))
    elif change == "directory removed":
        shutil.rmtree(root / "work")
    elif change == "directory replaced":  # the same names in another directory (another inode)
        os.rename(root / "work", aside / "work-old")
        (root / "work").mkdir()
        os.rename(aside / "work-old" / "entry2.json", root / "work" / "entry2.json")
    elif change == "root replaced":
        os.rename(root, aside / "memory-old")
        shutil.copytree(aside / "memory-old", root)
        write_raw(root, rockbot_entry("entry6", content="Only in the copy.", category="work"))
    elif change == "file turned into a directory":
        (root / "work" / "entry2.json").unlink()
        (root / "work" / "entry2.json").mkdir()
    elif change == "hidden file added":
        (family / ".entry1.json.tmp").write_text("{}", encoding="utf-8")
    elif change == "other file added":
        (family / "notes.txt").write_text("not an entry", encoding="utf-8")
    else:
        raise ValueError(change)
