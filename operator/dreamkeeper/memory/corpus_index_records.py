"""The corpus index's records (corpus_index.py says what they are and why trusting them is safe): one per file, and
how each is pickled (``_flat``: flat values, its entry's state inline) and rebuilt (``_rebuilt``: every value
checked, as a planted index could hold anything the restricted unpickler may build)."""

from __future__ import annotations

import os
import pickle
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from dreamkeeper.memory.atomic import Fingerprint
from dreamkeeper.memory.content_digests import DIGEST_SIZE
from dreamkeeper.memory.corpus_index_files import Reducers
from dreamkeeper.memory.entry import _FIELD_NAMES, Entry, _Origin, _Shape
from dreamkeeper.memory.entry_state import restored_fields, state
from dreamkeeper.memory.scan_objects import slot_setters

if TYPE_CHECKING:
    from dreamkeeper.memory.store import StoredEntry

# (size, mtime_ns, ctime_ns, inode) of the version that was read
StatKey = tuple[int, int, int, int]


def stat_key(st: os.stat_result) -> StatKey:
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


@dataclass(slots=True)
class Record:
    """One file as last read: its stat key, its parse, its fingerprint, and whether the cycle's screen
    (``consolidation/quarantine.py``) found the entry fit (None: not asked yet)."""

    key: StatKey
    entry: Entry
    fingerprint: Fingerprint
    fit: bool | None = None
    # What a scan yields for it, built once per process (its path kept as the walk's string: stored.py), and
    # yielded again by a later scan of the same process.
    stored: StoredEntry | None = None
    # Its entry's content digest (content_digests.py: every field but decay's two), once a cycle asked for one.
    content: bytes | None = None
    # When a stage (decay) next has anything to do about its entry, under the stage's key (entry_dues.py).
    due_key: str | None = None
    due: int = 0


def _flat(record: Record) -> tuple[Any, ...]:
    """How the index's pickler writes a record (its ``dispatch_table``): flat values, no Path, no dataclass state, the
    entry's own state inline (``entry_state.state``, its values as its ``__dict__``), read back as a plain tuple
    (``tuple`` of a tuple is that very tuple) and turned into a record by ``rebuilt``: the unpickler calls nothing of
    ours, and every check is in that one loop. Not faster than format 6's call per record (the same records, both
    ways, load alike at 100k: bench/results/micro-s27.md); what made the load cheaper at 10k is building the objects
    through their slot descriptors (``scan_objects.slot_setters``)."""
    fp, entry = record.fingerprint, record.entry
    values, extra, fields_set, origin = state(entry)
    fields = entry.__dict__
    if tuple(fields) != _FIELD_NAMES:  # never seen; in the model's order, as ``restored_fields`` requires
        fields = dict(zip(_FIELD_NAMES, values, strict=True))
    key = record.key
    flat = (
        *key,
        *(fields, extra, fields_set, *_origin_flat(origin)),
        *(fp.sha256, fp.size, fp.mtime_ns, record.fit, record.content, record.due_key, record.due),
    )
    return (tuple, (flat,))


def _origin_flat(origin: _Origin | None) -> tuple[Any, Any, Any]:
    """How the entry was read, as three flat values: (None, None, None) for an entry built in code; (its shape,
    None, None) for the shape's shared origin (nothing kept: most files of a corpus Python wrote); else (its shape,
    the raw values kept, the createdAt default). An origin pickled as an object cost a ``BUILD`` of a state dict
    per entry, about a sixth of a 100k-entry load (bench/results/micro-s36.md): an entry of RockBot's keeps its
    7-digit timestamps, so nearly every one has its own."""
    if origin is None:
        return (None, None, None)
    shape = origin.shape
    if origin is shape.plain:
        return (shape, None, None)
    return (shape, origin.kept, origin.created_default)


REDUCERS: Final[Reducers] = {Record: _flat}
FLAT_SIZE: Final = 17


def rebuilt(records: dict[Any, Any], *, removals: bool) -> None:
    """The flat tuples ``_flat`` wrote turned into records, in place (``removals``: a log frame's None, a removed
    file, is kept).
    Everything is checked, as a planted index could hold anything the unpickler may build: a record of the wrong
    shape or kinds raises ``pickle.UnpicklingError`` and the caller discards the whole file."""
    new, set_sha, set_size, set_mtime = object.__new__, _FP_SHA256, _FP_SIZE, _FP_MTIME
    set_shape, set_kept, set_created = _ORIGIN_SHAPE, _ORIGIN_KEPT, _ORIGIN_CREATED
    shapes: set[_Shape] = set()  # the shapes ``_origin_rebuilt`` checked (one per spelling: shared)
    for name, flat in records.items():
        if flat is None and removals:
            continue
        if type(name) is not str or type(flat) is not tuple or len(flat) != FLAT_SIZE:
            raise pickle.UnpicklingError("unexpected record")
        (
            size,
            mtime,
            ctime,
            ino,
            fields,
            extra,
            fields_set,
            shape,
            kept,
            created,
            sha,
            fsize,
            fmtime,
            fit,
            content,
            due_key,
            due,
        ) = flat
        # ``_origin_rebuilt``, inline for the common case (a kept tuple on a shape already checked)
        origin: _Origin | None
        if type(kept) is tuple and shape in shapes and created is None and not len(kept) % 2:
            origin = new(_Origin)
            set_shape(origin, shape)
            set_kept(origin, kept)
            set_created(origin, None)
        else:
            origin = _origin_rebuilt(shape, kept, created)
            if shape is not None:
                shapes.add(shape)
        # Spelled out, not ``all(...)`` over a tuple: this runs once per record of a 100k-entry index.
        ints = type(size) is type(mtime) is type(ctime) is type(ino) is type(fsize) is type(fmtime) is type(due) is int
        if not ints or type(sha) is not str or not (fit is None or fit is True or fit is False):
            raise pickle.UnpicklingError("unexpected record")
        if due_key is not None and type(due_key) is not str:
            raise pickle.UnpicklingError("unexpected due key")
        if content is not None and (type(content) is not bytes or len(content) != DIGEST_SIZE):
            raise pickle.UnpicklingError("unexpected content digest")
        try:
            entry = restored_fields(fields, extra, fields_set, origin)  # checks what it is given
        except ValueError as exc:
            raise pickle.UnpicklingError(f"unexpected record: {exc}") from None
        # The frozen dataclass's slots set through their descriptors: its ``__init__`` looks each name up again.
        fingerprint = new(Fingerprint)
        set_sha(fingerprint, sha)
        set_size(fingerprint, fsize)
        set_mtime(fingerprint, fmtime)
        records[name] = Record((size, mtime, ctime, ino), entry, fingerprint, fit, None, content, due_key, due)


_FP_SHA256, _FP_SIZE, _FP_MTIME = slot_setters(Fingerprint, ("sha256", "size", "mtime_ns"))
_ORIGIN_SHAPE, _ORIGIN_KEPT, _ORIGIN_CREATED = slot_setters(_Origin, ("shape", "kept", "created_default"))


def _origin_rebuilt(shape: Any, kept: Any, created: Any) -> _Origin | None:
    """``_origin_flat`` read back, checked (a planted index may hold anything there)."""
    if shape is None:
        if kept is not None or created is not None:
            raise pickle.UnpicklingError("unexpected origin")
        return None
    if type(shape) is not _Shape or type(shape.plain) is not _Origin:
        raise pickle.UnpicklingError("unexpected origin")
    if kept is None:
        if created is not None:
            raise pickle.UnpicklingError("unexpected origin")
        return shape.plain
    if type(kept) is not tuple or len(kept) % 2 or not (created is None or type(created) is datetime):
        raise pickle.UnpicklingError("unexpected origin")
    origin: _Origin = object.__new__(_Origin)
    _ORIGIN_SHAPE(origin, shape)
    _ORIGIN_KEPT(origin, kept)
    _ORIGIN_CREATED(origin, created)
    return origin


__all__ = ["FLAT_SIZE", "REDUCERS", "Record", "StatKey", "rebuilt", "stat_key"]
