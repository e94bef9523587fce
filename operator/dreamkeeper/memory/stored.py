"""``StoredEntry``: an entry, the file it lives in, and the fingerprint of the bytes it was read from.

A steady scan (corpus_index.py) yields one per file, 100,000 at 100,000 entries, and most stages then only name
each entry's file as a string (the index's records, the snapshot, the final-state walk are keyed by it). So the path
is kept as its string (``name``) and the ``Path`` is built the first time a stage asks for it: a ``Path`` per entry
cost the steady scan ~0.1 CPU s at 100k (micro-s29.md), and a steady cycle asks for the ``Path`` of only the
few entries it writes or reports. ``StoredEntry(entry, path, fingerprint)`` is built as before (its ``Path`` kept);
``StoredEntry.named`` is the scan's way (the string only).
"""

from __future__ import annotations

import logging
import os
from dataclasses import FrozenInstanceError
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from dreamkeeper.memory.corpus_index_records import ARCHIVED, HELD, LIVE, RESTORED, Record, UndecodableRecord
from dreamkeeper.memory.entry import HELD_IMPORTANCE, RESTORED_BY_HAND
from dreamkeeper.memory.scan_objects import child_path, slot_setters

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime

    from dreamkeeper.memory.atomic import Fingerprint
    from dreamkeeper.memory.entry import Entry

log = logging.getLogger(__name__)


class StoredEntry:
    """An entry together with where it lives and the fingerprint of the bytes it was read from (immutable, compared
    by value like the frozen dataclass it was: entry, path, fingerprint)."""

    __slots__ = ("_path", "entry", "fingerprint", "name")

    entry: Entry
    name: str  # ``str(path)``: the key every index of entries by file uses
    fingerprint: Fingerprint
    _path: Path | None

    def __init__(self, entry: Entry, path: Path, fingerprint: Fingerprint) -> None:
        _set_entry(self, entry)
        _set_name(self, str(path))
        _set_fingerprint(self, fingerprint)
        _set_path(self, path)

    @classmethod
    def named(cls, entry: Entry, name: str, fingerprint: Fingerprint) -> StoredEntry:
        """The entry of the file whose path string is ``name`` (a scan's walk made it: ``os.path.join`` of the
        directory's string and a name it listed); its ``Path`` is made when first asked for."""
        stored = _new(cls)
        _set_entry(stored, entry)
        _set_name(stored, name)
        _set_fingerprint(stored, fingerprint)
        _set_path(stored, None)
        return stored

    @property
    def path(self) -> Path:
        path = self._path
        if path is None:
            path = _path_of(self.name)
            _set_path(self, path)
        return path

    def passing_path(self) -> Path:
        """``path``, not kept on this object when it is not kept already: a bulk write's, which needs the ``Path``
        for the write alone. A cold start rewrites most of its snapshot's files (review stamps, decays, archives),
        and a ``Path`` kept per written entry, with the names pathlib interned for it, was ~14 MiB held from the
        apply stage to the cycle's end at 100,000 entries (bench/results/micro-s35.md section 6)."""
        path = self._path
        return path if path is not None else path_of_name(self.name)

    @property
    def id(self) -> str:
        return self.entry.id

    # The entry's view (corpus_index_records.py): what the stages that look at the whole corpus read of each entry,
    # from the entry here and from the index's record in ``LazyStored``, which then builds no entry.
    @property
    def is_live(self) -> bool:
        return self.entry.is_live

    @property
    def is_archived(self) -> bool:
        return self.entry.archived_at is not None

    @property
    def content(self) -> str:
        return self.entry.content

    @property
    def archived_at(self) -> datetime | None:
        return self.entry.archived_at

    @property
    def held(self) -> bool:
        """Whether a purge hold lifted its importance (``entry.unheld`` has something to undo)."""
        return self.entry.meta(HELD_IMPORTANCE) is not None

    @property
    def restored_by_hand(self) -> bool:
        metadata = self.entry.metadata
        return metadata is not None and RESTORED_BY_HAND in metadata

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StoredEntry):
            return NotImplemented
        assert isinstance(other, StoredEntry)
        return (self.entry, self.name, self.fingerprint) == (other.entry, other.name, other.fingerprint)

    def __hash__(self) -> int:
        return hash((self.entry, self.name, self.fingerprint))

    def __repr__(self) -> str:
        return f"StoredEntry(entry={self.entry!r}, path={self.path!r}, fingerprint={self.fingerprint!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (StoredEntry, (self.entry, self.path, self.fingerprint))


class LazyStored(StoredEntry):
    """A scan's entry whose corpus-index record was read back and not decoded (corpus_index_records.py): its view is
    the record's, and its entry is decoded the first time it is read. Equal to the ``StoredEntry`` of
    the same entry, path and fingerprint."""

    __slots__ = ("_record",)

    _record: Record

    @property
    def entry(self) -> Entry:  # type: ignore[override]
        try:
            return _get_entry(self)  # type: ignore[no-any-return]
        except AttributeError:
            pass
        try:
            entry = self._record.entry
        except UndecodableRecord as exc:
            entry = _read_back(self.name, self.fingerprint, str(exc))
        _set_entry(self, entry)
        return entry

    @property
    def id(self) -> str:
        return self._record.view_id  # type: ignore[return-value]

    @property
    def is_live(self) -> bool:
        return bool(self._record.flags & LIVE)

    @property
    def is_archived(self) -> bool:
        return bool(self._record.flags & ARCHIVED)

    @property
    def content(self) -> str:
        return self._record.view_content  # type: ignore[return-value]

    @property
    def archived_at(self) -> datetime | None:
        return self._record.archived_at

    @property
    def held(self) -> bool:
        return bool(self._record.flags & HELD)

    @property
    def restored_by_hand(self) -> bool:
        return bool(self._record.flags & RESTORED)


def _read_back(name: str, fingerprint: Fingerprint, why: str) -> Entry:
    """The entry of a file whose index record could not be decoded (a planted index): its file read and parsed now.
    The fingerprint stays the scan's, so a write is refused if the bytes are no longer those (``atomic``'s check)."""
    from dreamkeeper.memory.atomic import read_with_stat
    from dreamkeeper.memory.entry import Entry as _Entry
    from dreamkeeper.memory.errors import ConflictError

    path = path_of_name(name)
    log.warning("corpus index record of %s could not be decoded (%s): its file is read instead", name, why)
    try:
        data, now, _ = read_with_stat(path)
        entry = _Entry.from_json_bytes(data)
    except (OSError, ValueError) as exc:
        raise ConflictError(path, f"its index record is damaged and the file cannot be read now ({exc})") from None
    if now != fingerprint:
        log.warning("%s changed since the scan: any write to it will be refused", name)
    return entry


def lazy_named(record: Record, name: str, fingerprint: Fingerprint) -> LazyStored:
    """The scan's entry for a record read back and not decoded (``StoredEntry.named``'s way)."""
    stored = _new(LazyStored)
    _set_record(stored, record)
    _set_name(stored, name)
    _set_fingerprint(stored, fingerprint)
    _set_path(stored, None)
    return stored


_new = object.__new__
# Its slots' setters: how ``__init__`` and ``named`` (and the corpus index's scan loop) fill a new one.
SETTERS: Final = slot_setters(StoredEntry, ("entry", "name", "fingerprint", "_path"))
_set_entry, _set_name, _set_fingerprint, _set_path = SETTERS
_get_entry = StoredEntry.__dict__["entry"].__get__
(_set_record,) = slot_setters(LazyStored, ("_record",))

# The directories' Paths the lazy ``path`` builds from (``child_path``: a tenth of ``Path(name)``'s cost). Bounded:
# a long-lived process (the operator, a test run) sees many roots; past the bound it starts again.
_PARENTS: dict[str, tuple[Callable[[str], Path], bool]] = {}
_PARENTS_MAX: Final = 4096


def path_of_name(name: str) -> Path:
    """``Path(name)`` for a file's path string, built from its directory's ``Path`` (``child_path``): no parse, and
    the file's name not interned (pathlib interns every part it parses, and the interpreter's table of them grew by
    every name a cold start wrote)."""
    return _path_of(name)


def _path_of(name: str) -> Path:
    # Where joining the child to its parent's Path may not give ``Path(name)``, made the long way: a directory part of
    # separators only ("/a.json", "//a.json": a memory root at "/", whose leading slashes pathlib counts) or a last
    # part that is no file name. A walk's names are neither.
    directory, _, base = name.rpartition(os.sep)
    if not directory.strip(os.sep) or base in ("", ".", ".."):
        return Path(name)
    if len(_PARENTS) >= _PARENTS_MAX:
        _PARENTS.clear()
    return child_path(_PARENTS, name)


__all__ = ["SETTERS", "LazyStored", "StoredEntry", "lazy_named", "path_of_name"]
