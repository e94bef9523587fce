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


def test_a_slotted_class_must_be_given_all_its_own_slots() -> None:
    """StoredEntry is no dataclass: its own ``__slots__`` are the fields every object built so must be given."""
    from dreamkeeper.memory.stored import SETTERS

    assert len(SETTERS) == 4
    with pytest.raises(AssertionError, match="_path"):
        slot_setters(StoredEntry, ("entry", "name", "fingerprint"))

    class Sub(StoredEntry):
        __slots__ = ("extra",)

    with pytest.raises(AssertionError, match="extra"):
        slot_setters(Sub, ("entry", "name", "fingerprint", "_path"))


def test_inherited_slots_are_found_along_the_class_chain() -> None:
    """Entry's slots are pydantic's (``BaseModel``) and its own ``_origin``: each setter is the defining class's."""
    from pydantic import BaseModel

    extra, origin = slot_setters(Entry, ("__pydantic_extra__", "_origin"))
    assert extra == BaseModel.__dict__["__pydantic_extra__"].__set__
    assert origin == Entry.__dict__["_origin"].__set__
    entry = Entry(id="a1", content="x")
    extra(entry, {"colour": "red"})
    assert entry.__pydantic_extra__ == {"colour": "red"}
    with pytest.raises(AttributeError, match="no_such_slot"):
        slot_setters(Entry, ("_origin", "no_such_slot"))
