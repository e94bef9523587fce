"""The corpus index's records (corpus_index.py says what they are and why trusting them is safe): one per file, and
how each is pickled (``_flat``: flat values) and read back (``rebuilt``: every value checked, as a planted index
could hold anything the restricted unpickler may build).

**A record read back does not rebuild its entry** (issue 27, session 38). Rebuilding ~30 objects per record was the
largest part of a steady cycle's load: 0.66 of a 100,000-entry cycle's ~3.8 CPU s. Every stage that looks at the
whole corpus reads only a few of an entry's values, and a steady cycle decodes no entry at all: the files it decays
were rewritten by the last cycle, so it reads them again. So a record keeps:

* the entry's **view**, read by those stages: its id, its content, whether it is live or archived, whether it carries
  the purge's hold or a person's restore (``view_flags``), and when it was archived;
* its other values as one pickled **blob**, decoded the first time a stage reads ``Record.entry``. The id and the
  content are in the view, not the blob. Its shape and fields-set stay in the index's own pickle, shared among
  the records of one spelling as before.

The view is computed from the entry when the record is written, so it is exact by construction, like the record
itself. A decoded entry must give that same view back (``_decoded``), or the record is undecodable.
``stored.LazyStored`` is the scan's entry for such a record.
"""

from __future__ import annotations

import io
import os
import pickle
from collections.abc import Callable
from datetime import UTC, datetime, tzinfo
from typing import TYPE_CHECKING, Any, Final

from dreamkeeper.memory.atomic import Fingerprint
from dreamkeeper.memory.content_digests import DIGEST_SIZE
from dreamkeeper.memory.corpus_index_files import Reducers, RestrictedUnpickler
from dreamkeeper.memory.entry import (
    _FIELD_NAMES,
    HELD_IMPORTANCE,
    RESTORED_BY_HAND,
    Entry,
    _Origin,
    _Shape,
)
from dreamkeeper.memory.entry_state import restored_fields, state
from dreamkeeper.memory.entry_values import TIMESTAMP_FIELDS
from dreamkeeper.memory.scan_objects import slot_setters

if TYPE_CHECKING:
    from dreamkeeper.memory.store import StoredEntry

# (size, mtime_ns, ctime_ns, inode) of the version that was read
StatKey = tuple[int, int, int, int]


def stat_key(st: os.stat_result) -> StatKey:
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


# The view's flags (``view_flags``)
LIVE: Final = 1
ARCHIVED: Final = 2
HELD: Final = 4
RESTORED: Final = 8
_FLAGS_MAX: Final = LIVE | ARCHIVED | HELD | RESTORED
_ID_AT: Final = _FIELD_NAMES.index("id")
_CONTENT_AT: Final = _FIELD_NAMES.index("content")
_STAMP_NAMES: Final = tuple(name for name in _FIELD_NAMES if name in TIMESTAMP_FIELDS)
_STAMPS_AT: Final = tuple(_FIELD_NAMES.index(name) for name in _STAMP_NAMES)
# Called with a datetime's pickled state and its zone, as the unpickler calls it (typeshed knows no such signature).
_datetime: Final[Callable[[bytes, tzinfo], datetime]] = datetime  # type: ignore[assignment]

View = tuple[str, str, int, datetime | None]  # id, content, flags, archived at


def view_flags(entry: Entry) -> int:
    """``Entry.is_live``, ``is_archived``, a purge hold (``unheld``'s key) and a restore by hand (gating's key)."""
    meta = entry.metadata or {}
    return (
        (LIVE if entry.is_live else 0)
        | (ARCHIVED if entry.archived_at is not None else 0)
        | (HELD if meta.get(HELD_IMPORTANCE) is not None else 0)
        | (RESTORED if RESTORED_BY_HAND in meta else 0)
    )


def view_of(entry: Entry) -> View:
    return (entry.id, entry.content, view_flags(entry), entry.archived_at)


class UndecodableRecord(ValueError):
    """A record's blob gives no entry, or an entry whose view is not the record's (only a planted index holds one:
    the index file is checked whole when it is loaded)."""


class Record:
    """One file as last read: its stat key, its parse, its fingerprint, and whether the cycle's screen
    (``consolidation/quarantine.py``) found the entry fit (None: not asked yet). One made from a read holds its
    entry; one read back from the index holds its view and blob, and decodes its entry when ``entry`` is read."""

    __slots__ = (
        "_entry",
        "archived_at",
        "blob",
        "content",
        "due",
        "due_key",
        "fields_set",
        "fingerprint",
        "fit",
        "flags",
        "key",
        "shape",
        "stored",
        "view_content",
        "view_id",
    )

    key: StatKey
    fingerprint: Fingerprint
    fit: bool | None
    # What a scan yields for it, built once per process (its path kept as the walk's string: stored.py), and
    # yielded again by a later scan of the same process.
    stored: StoredEntry | None
    # Its entry's content digest (content_digests.py: every field but decay's two), once a cycle asked for one.
    content: bytes | None
    # When a stage (decay) next has anything to do about its entry, under the stage's key (entry_dues.py).
    due_key: str | None
    due: int
    # Read back from the index only (None / 0 for a record made from a read): the entry's values but its id and
    # content, pickled; its shape and fields-set; its view.
    blob: bytes | None
    shape: _Shape | None
    fields_set: set[str] | None
    view_id: str | None
    view_content: str | None
    flags: int
    archived_at: datetime | None

    def __init__(
        self,
        key: StatKey,
        entry: Entry,
        fingerprint: Fingerprint,
        fit: bool | None = None,
        stored: StoredEntry | None = None,
        content: bytes | None = None,
        due_key: str | None = None,
        due: int = 0,
    ) -> None:
        self.key = key
        self._entry: Entry | None = entry
        self.fingerprint = fingerprint
        self.fit = fit
        self.stored = stored
        self.content = content
        self.due_key = due_key
        self.due = due
        self.blob = self.shape = self.fields_set = self.view_id = self.view_content = self.archived_at = None
        self.flags = 0

    @property
    def entry(self) -> Entry:
        """The parse: decoded from the blob the first time (``UndecodableRecord`` if it cannot be)."""
        entry = self._entry
        if entry is None:
            entry = self._entry = _decoded(self)
        return entry

    @property
    def decoded(self) -> bool:
        """Whether the entry is built (a record made from a read always is)."""
        return self._entry is not None


def _decoded(record: Record) -> Entry:
    """The entry a record read back describes: its blob's values, its view's id and content, its shape."""
    try:
        loaded = RestrictedUnpickler(io.BytesIO(record.blob or b"")).load()
        if not (type(loaded) is tuple and len(loaded) == 4):
            raise ValueError("unexpected blob")
        values, extra, kept, created = loaded
        if type(values) is not tuple or len(values) != len(_FIELD_NAMES):
            raise ValueError("unexpected values")
        if values[_ID_AT] is not None or values[_CONTENT_AT] is not None:
            raise ValueError("the id and content belong to the view")
        fields = dict(zip(_FIELD_NAMES, values, strict=True))
        for name in _STAMP_NAMES:
            stamp = fields[name]
            if type(stamp) is bytes:
                fields[name] = _datetime(stamp, UTC)  # ``_flat``'s compact form (raises on any other bytes)
        fields["id"], fields["content"] = record.view_id, record.view_content
        entry = restored_fields(fields, extra, record.fields_set or set(), _origin_rebuilt(record.shape, kept, created))
        if view_of(entry) != (record.view_id, record.view_content, record.flags, record.archived_at):
            raise ValueError("its view is not its entry's")
    except Exception as exc:  # anything at all: the caller reads the file instead
        raise UndecodableRecord(f"{type(exc).__name__}: {exc}") from None
    return entry


def _flat(record: Record) -> tuple[Any, ...]:
    """How the index's pickler writes a record (its ``dispatch_table``): flat values, no Path, no dataclass state, read
    back as a plain tuple (``tuple`` of a tuple is that very tuple) and turned into a record by ``rebuilt``: the
    unpickler calls nothing of ours, and every check is in that one loop. A record read back and not changed since
    is written as it was read (its blob and view); any other pickles its entry's values (``entry_state.state``)
    into a new blob."""
    fp = record.fingerprint
    blob = record.blob
    if blob is None:
        entry = record.entry
        values, extra, fields_set, origin = state(entry)
        shape, kept, created = _origin_flat(origin)
        listed = list(values)
        listed[_ID_AT] = listed[_CONTENT_AT] = None
        for at in _STAMPS_AT:
            stamp = listed[at]
            if type(stamp) is datetime and stamp.tzinfo is UTC:
                # A timestamp in UTC (nearly all) as its own pickled state, ten bytes: pickling a datetime and its
                # zone cost ~3 us each, most of a blob's pickle (a steady cycle keeps ~6% of the corpus's entries
                # for the next, a cold start the whole corpus; issue 27). ``_decoded`` builds it back from them.
                listed[at] = stamp.__reduce__()[1][0]
        blob = pickle.dumps((tuple(listed), extra, kept, created), protocol=pickle.HIGHEST_PROTOCOL)
        view: tuple[Any, ...] = view_of(entry)
    else:
        shape, fields_set = record.shape, record.fields_set
        view = (record.view_id, record.view_content, record.flags, record.archived_at)
    flat = (
        *record.key,
        *view,
        shape,
        fields_set,
        blob,
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
FLAT_SIZE: Final = 18


def rebuilt(records: dict[Any, Any], *, removals: bool) -> None:
    """The flat tuples ``_flat`` wrote turned into records, in place (``removals``: a log frame's None, a removed
    file, is kept). Everything but the blob is checked here, as a planted index could hold anything the unpickler
    may build: a record of the wrong shape or kinds raises ``pickle.UnpicklingError`` and the caller discards the
    whole file. The blob is checked when it is decoded (``_decoded``)."""
    new, set_sha, set_size, set_mtime = object.__new__, _FP_SHA256, _FP_SIZE, _FP_MTIME
    shapes: set[_Shape] = set()  # the shapes already checked (one per spelling: shared)
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
            view_id,
            view_content,
            flags,
            archived_at,
            shape,
            fields_set,
            blob,
            sha,
            fsize,
            fmtime,
            fit,
            content,
            due_key,
            due,
        ) = flat
        # Spelled out, not ``all(...)`` over a tuple: this runs once per record of a 100k-entry index.
        ints = type(size) is type(mtime) is type(ctime) is type(ino) is type(fsize) is type(fmtime) is type(due) is int
        if not ints or type(sha) is not str or not (fit is None or fit is True or fit is False):
            raise pickle.UnpicklingError("unexpected record")
        if type(blob) is not bytes or type(view_id) is not str or type(view_content) is not str:
            raise pickle.UnpicklingError("unexpected record")
        if type(flags) is not int or not 0 <= flags <= _FLAGS_MAX or flags & (LIVE | ARCHIVED) == LIVE | ARCHIVED:
            raise pickle.UnpicklingError("unexpected view")
        archived = archived_at is not None
        if archived is not bool(flags & ARCHIVED) or (archived and type(archived_at) is not datetime):
            raise pickle.UnpicklingError("unexpected view")
        if shape not in shapes and shape is not None:
            if type(shape) is not _Shape or type(shape.plain) is not _Origin:
                raise pickle.UnpicklingError("unexpected origin")
            shapes.add(shape)
        if type(fields_set) is not set:
            raise pickle.UnpicklingError("unexpected fields")
        if due_key is not None and type(due_key) is not str:
            raise pickle.UnpicklingError("unexpected due key")
        if content is not None and (type(content) is not bytes or len(content) != DIGEST_SIZE):
            raise pickle.UnpicklingError("unexpected content digest")
        # The slots set through their descriptors: ``__init__`` would look each name up again.
        fingerprint = new(Fingerprint)
        set_sha(fingerprint, sha)
        set_size(fingerprint, fsize)
        set_mtime(fingerprint, fmtime)
        # Stored inline, not through the slots' setters (``scan_objects.slot_setters``): Python 3.11 specialises a
        # plain slot store, which costs half a setter's call (a 100k-entry load builds 100k records).
        record = new(Record)
        record.key = (size, mtime, ctime, ino)
        record._entry = None
        record.fingerprint = fingerprint
        record.fit = fit
        record.stored = None
        record.content = content
        record.due_key = due_key
        record.due = due
        record.blob = blob
        record.shape = shape
        record.fields_set = fields_set
        record.view_id = view_id
        record.view_content = view_content
        record.flags = flags
        record.archived_at = archived_at
        records[name] = record


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


__all__ = [
    "ARCHIVED",
    "FLAT_SIZE",
    "HELD",
    "LIVE",
    "REDUCERS",
    "RESTORED",
    "Record",
    "StatKey",
    "UndecodableRecord",
    "View",
    "rebuilt",
    "stat_key",
    "view_flags",
    "view_of",
]
