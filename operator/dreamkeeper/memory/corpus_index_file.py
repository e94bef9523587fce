"""The corpus index's files (corpus_index.py says what the index is and why it is safe): the format of a base and
of a log frame, the records they hold, and the one unpickler that may read them.

A base is ``FORMAT``, the sha256 of the payload, and the payload: one pickler's output (one memo) of a header
(the code version, the memory root, the base's id, the number of records) and then the records in chunks of
columns (``_base_parts``): flat lists of names, stat keys, fingerprints and screen flags, and each entry's state
(``entry_state.state``). A log frame is a magic, its length and its sha256, and a pickle of the base's id and the
changed records (each by ``Record.__reduce__``) and removed names.
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import stat
import struct
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from dreamkeeper.memory.atomic import NEW_SUFFIX, Fingerprint, fsync_directory
from dreamkeeper.memory.entry import Entry
from dreamkeeper.memory.entry_state import restored
from dreamkeeper.memory.entry_state import state as entry_state
from dreamkeeper.memory.files import UnsafeFileError

FORMAT: Final = b"dreamkeeper-corpus-index 5\n"  # the version: a reader of another version discards the file
FRAME_MAGIC: Final = b"DKIL"
_FRAME_HEAD: Final = struct.Struct(">4sQ32s")  # magic, payload length, sha256 of the payload

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
    path: Path | None = None  # built once per process (a Path per entry costs as much as the stat)

    def __reduce__(self) -> tuple[Any, ...]:
        # Flat values, rebuilt by ``_record`` (the one function an index may call): no Path, no dataclass state.
        fp = self.fingerprint
        return (_record, (*self.key, self.entry, fp.sha256, fp.size, fp.mtime_ns, self.fit))


def _record(
    size: int, mtime: int, ctime: int, ino: int, entry: Entry, sha: str, fsize: int, fmtime: int, fit: bool | None
) -> Record:
    # Spelled out, not ``all(...)`` over a tuple: this runs once per record of a 100k-entry index.
    ints = type(size) is type(mtime) is type(ctime) is type(ino) is type(fsize) is type(fmtime) is int
    if not ints or not isinstance(entry, Entry) or not isinstance(sha, str):
        raise pickle.UnpicklingError("unexpected record")
    if fit not in (None, True, False):
        raise pickle.UnpicklingError("unexpected record")
    return Record((size, mtime, ctime, ino), entry, Fingerprint(sha, fsize, fmtime), fit)


# What an index may contain; nothing else can be built by loading one (see the module docstring).
_ALLOWED: Final = frozenset(
    {
        ("dreamkeeper.memory.corpus_index_file", "_record"),
        ("dreamkeeper.memory.entry_state", "restored"),  # an entry: flat values, checked (``Entry.__reduce__``)
        ("dreamkeeper.memory.entry", "_Origin"),
        ("dreamkeeper.memory.entry", "_Shape"),
        ("dreamkeeper.memory.entry", "_Derived"),
        ("datetime", "datetime"),
        ("datetime", "timezone"),
        ("datetime", "timedelta"),
        # A fixed UTC offset, as pydantic gives a timestamp read from a number (``"createdAt": 0``): without it, an
        # index holding one such entry could not be loaded at all, and every scan read every file.
        ("pydantic_core._pydantic_core", "TzInfo"),
        ("builtins", "set"),
        ("builtins", "frozenset"),
    }
)


def code_version() -> str:
    """What decides a record's meaning: the entry parser and the screen. Another version of either (an upgrade)
    and the index is discarded, never read with rules it was not made by."""
    digest = hashlib.sha256(FORMAT)
    here = Path(__file__).resolve().parent
    # entry_values: the fast path's checks; entry_state: how an index's entries are rebuilt
    parser = (here / "entry.py", here / "entry_values.py", here / "entry_state.py", here / "store.py")
    for source in (*parser, here.parent / "consolidation" / "quarantine.py"):
        try:
            digest.update(source.read_bytes())
        except OSError:
            digest.update(b"?")
    return digest.hexdigest()


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not something a corpus index holds")
        return super().find_class(module, name)


def _decode(data: bytes) -> tuple[str, str, dict[str, Record]]:
    if not data.startswith(FORMAT):
        raise ValueError("not a corpus index of this version")
    # The payload is hashed and unpickled in place: slices of it were two more copies of the file alive while its
    # records were being built (~96 MB more at the peak of a steady cycle at 100k entries).
    end = data.find(b"\n", len(FORMAT))
    if end < 0 or hashlib.sha256(memoryview(data)[end + 1 :]).hexdigest().encode("ascii") != data[len(FORMAT) : end]:
        raise ValueError("its checksum does not match (truncated or damaged)")
    stream = io.BytesIO(data)  # shares the bytes object's buffer until written to (never)
    stream.seek(end + 1)
    unpickler = _Unpickler(stream)  # one memo for the header and every chunk, as they were pickled (``_base_parts``)
    header = unpickler.load()
    if not (isinstance(header, tuple) and len(header) == 4 and isinstance(header[1], str)):
        raise ValueError("unexpected content")
    version, root, base_id, count = header
    if version != code_version():
        raise ValueError("made by another version of the entry parser or the screen")
    if not isinstance(base_id, str) or not base_id:
        raise ValueError("unexpected base id")
    if type(count) is not int or count < 0:
        raise ValueError("unexpected record count")
    records: dict[str, Record] = {}
    while len(records) < count:
        before = len(records)
        _add_chunk(records, unpickler.load())
        if len(records) == before:
            raise ValueError("an empty chunk")
    if len(records) != count or stream.tell() != len(data):
        raise ValueError("the records do not add up to the count (a name twice, or bytes after the last chunk)")
    return root, base_id, records


# The records of a base, in chunks of columns: flat lists of strings and ints, which the unpickler builds in C, and
# each entry's state (``entry_state.state``). Rebuilding a record from its columns here cost less than calling a
# pickled ``_record`` per record (a REDUCE each: an argument tuple and a call), about a third of the load; chunks
# bound what a save builds at once (a few thousand records' columns, not the whole index's).
_CHUNK: Final = 4096
_NONE_OR_BOOL: Final = frozenset({type(None), bool})


def _base_parts(version: str, root: str, base_id: str, records: dict[str, Record]) -> Iterator[object]:
    """What a base file holds, pickled one after another with one memo: the header, then the records' chunks."""
    yield (version, root, base_id, len(records))
    items = list(records.items())
    for start in range(0, len(items), _CHUNK):
        chunk = items[start : start + _CHUNK]
        yield (
            [name for name, _ in chunk],
            [value for _, record in chunk for value in record.key],
            [record.fingerprint.sha256 for _, record in chunk],
            [value for _, record in chunk for value in (record.fingerprint.size, record.fingerprint.mtime_ns)],
            [record.fit for _, record in chunk],
            [entry_state(record.entry) for _, record in chunk],
        )


def _add_chunk(records: dict[str, Record], chunk: Any) -> None:
    """One chunk's records added to ``records``; raises on anything but flat columns of the right types and sizes
    (every entry state is checked by ``entry_state.restored``)."""
    if not (type(chunk) is tuple and len(chunk) == 6 and all(type(column) is list for column in chunk)):
        raise ValueError("unexpected chunk")
    names, keys, shas, fingerprints, fits, states = chunk
    n = len(names)
    if (len(keys), len(shas), len(fingerprints), len(fits), len(states)) != (4 * n, n, 2 * n, n, n):
        raise ValueError("chunk columns of different lengths")
    # Checked a column at a time (``map``/``set`` run in C): one int, str or flag per cell, nothing else.
    if not (
        set(map(type, names)) <= {str}
        and set(map(type, shas)) <= {str}
        and set(map(type, keys)) <= {int}
        and set(map(type, fingerprints)) <= {int}
        and set(map(type, fits)) <= _NONE_OR_BOOL
    ):
        raise ValueError("unexpected values in a chunk")
    each_key, each_fingerprint = iter(keys), iter(fingerprints)
    for name, key, sha, (size, mtime), fit, state in zip(
        names,
        zip(each_key, each_key, each_key, each_key, strict=True),
        shas,
        zip(each_fingerprint, each_fingerprint, strict=True),
        fits,
        states,
        strict=True,
    ):
        if type(state) is not tuple or len(state) != 4:
            raise ValueError("not an entry's pickled state")
        records[name] = Record(key, restored(*state), Fingerprint(sha, size, mtime), fit)


def _frame(view: memoryview, offset: int) -> tuple[str, dict[str, Record | None], bytes, int]:
    """The log frame at ``offset``: (base id, changes, its checksum, offset of the next frame); raises on any
    damage."""
    end_head = offset + _FRAME_HEAD.size
    if end_head > len(view):
        raise ValueError("torn frame header")
    magic, length, digest = _FRAME_HEAD.unpack(view[offset:end_head])
    if magic != FRAME_MAGIC:
        raise ValueError("not a frame")
    end = end_head + length
    if end > len(view):
        raise ValueError("torn frame")
    payload = view[end_head:end]
    if hashlib.sha256(payload).digest() != digest:
        raise ValueError("its checksum does not match")
    loaded = _Unpickler(io.BytesIO(payload)).load()
    if not (isinstance(loaded, tuple) and len(loaded) == 2 and isinstance(loaded[0], str)):
        raise ValueError("unexpected frame")
    base_id, changes = loaded
    if not isinstance(changes, dict) or not all(
        isinstance(k, str) and (v is None or isinstance(v, Record)) for k, v in changes.items()
    ):
        raise ValueError("unexpected frame records")
    return base_id, changes, digest, end


def _open_log(path: Path, flags: int) -> int:
    """The log opened for writing: never through a symbolic link, never blocking on a FIFO, and only a regular file
    with no other name (a hard link planted there could be an entry file: it is never appended to or emptied)."""
    extra = getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    fd = os.open(path, os.O_WRONLY | flags | extra, 0o644)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        raise UnsafeFileError(path, "is not a regular file of one name; left as it is")
    return fd


def _append_frame(path: Path, content: object) -> None:
    """One frame appended to the log and fsynced (the directory too when the log is new): a crash mid-write leaves a
    torn last frame, which the next load ignores."""
    payload = pickle.dumps(content, protocol=pickle.HIGHEST_PROTOCOL)
    frame = _FRAME_HEAD.pack(FRAME_MAGIC, len(payload), hashlib.sha256(payload).digest()) + payload
    created = not os.path.lexists(path)
    fd = _open_log(path, os.O_APPEND | os.O_CREAT)
    try:
        view = memoryview(frame)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:
        fsync_directory(path.parent)


class _HashingWriter:
    """A file the pickle is streamed into, hashed on the way (no second copy of a 100k-entry payload in memory)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.sha = hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]
        return len(data)


def _write_streamed(path: Path, parts: Iterable[object]) -> None:
    """``FORMAT``, the payload's sha256, the payload (``parts`` pickled in turn by one pickler: one memo): streamed
    to a temp file beside ``path``, the digest written into its place at the end, fsynced, renamed over ``path``,
    the directory fsynced (``atomic.py``'s order)."""
    temp = path.parent / f".{path.name}.{uuid.uuid4().hex}{NEW_SUFFIX}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        try:
            os.write(fd, FORMAT + b"0" * 64 + b"\n")
            writer = _HashingWriter(fd)
            pickler = pickle.Pickler(writer, protocol=pickle.HIGHEST_PROTOCOL)
            for part in parts:
                pickler.dump(part)
            os.pwrite(fd, writer.sha.hexdigest().encode("ascii"), len(FORMAT))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)  # our own temp (O_EXCL), never anything else
        raise
    fsync_directory(path.parent)
