"""scan_objects.py: the objects a scan builds through slot descriptors are the objects the constructors build, and a
class whose fields are not the ones named is refused (a field added to ``Fingerprint`` must be set by the index's
load too, never left unset)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from dreamkeeper.memory import StoredEntry
from dreamkeeper.memory.atomic import Fingerprint
from dreamkeeper.memory.entry import Entry
from dreamkeeper.memory.scan_objects import slot_setters


def test_built_through_the_slots_is_what_the_constructor_builds() -> None:
    sha, size, mtime = slot_setters(Fingerprint, ("sha256", "size", "mtime_ns"))
    fingerprint = object.__new__(Fingerprint)
    sha(fingerprint, "ab" * 32)
    size(fingerprint, 10)
    mtime(fingerprint, 20)
    assert fingerprint == Fingerprint("ab" * 32, 10, 20)
    assert hash(fingerprint) == hash(Fingerprint("ab" * 32, 10, 20))
    with pytest.raises(AttributeError):  # still frozen
        fingerprint.size = 11  # type: ignore[misc]

    entry = Entry(id="a1", content="x")
    stored = StoredEntry.named(entry, "/m/a1.json", fingerprint)  # the scan's way (tests/memory/test_stored.py)
    assert stored == StoredEntry(entry, Path("/m/a1.json"), fingerprint)
    assert stored.id == "a1"


def test_a_class_with_other_fields_is_refused() -> None:
    @dataclass(frozen=True, slots=True)
    class Wider:
        sha256: str
        size: int
        mtime_ns: int
        inode: int

    with pytest.raises(AssertionError, match="inode"):
        slot_setters(Wider, ("sha256", "size", "mtime_ns"))
    with pytest.raises(AssertionError):
        slot_setters(Fingerprint, ("size", "sha256", "mtime_ns"))  # another order
