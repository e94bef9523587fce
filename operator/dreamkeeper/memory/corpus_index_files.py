"""How the corpus index's files are written (corpus_index.py says why each is safe): the base streamed to a temp file
beside it, hashed on the way, fsynced and renamed over it; a log frame appended and fsynced; the log never opened
through a symbolic link, a FIFO or a file with a second name."""

from __future__ import annotations

import copyreg
import hashlib
import io
import os
import pickle
import stat
import struct
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from dreamkeeper.memory.atomic import NEW_SUFFIX, fsync_directory
from dreamkeeper.memory.files import UnsafeFileError

FRAME_MAGIC: Final = b"DKIL"
FRAME_HEAD: Final = struct.Struct(">4sQ32s")  # magic, payload length, sha256 of the payload


# What an index may contain; nothing else can be built by loading one (see the module docstring).
ALLOWED: Final = frozenset(
    {
        ("builtins", "tuple"),  # a record's flat values (``corpus_index._flat``): ``tuple`` of a tuple is that tuple
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


class RestrictedUnpickler(pickle.Unpickler):
    """Builds nothing but what ``ALLOWED`` names: an index lives on the agent's volume (corpus_index.py)."""

    def find_class(self, module: str, name: str) -> Any:
        # Each allowed class resolved once per process: a record's blob is unpickled on its own (a steady cycle
        # decodes thousands), and the import machinery's lookup of its three datetime classes was half its cost.
        found = _RESOLVED.get((module, name))
        if found is None:
            if (module, name) not in ALLOWED:
                raise pickle.UnpicklingError(f"{module}.{name} is not something a corpus index holds")
            found = _RESOLVED[module, name] = super().find_class(module, name)
        return found


_RESOLVED: dict[tuple[str, str], Any] = {}  # only ever names in ``ALLOWED``


def open_log(path: Path, flags: int) -> int:
    """The log opened for writing: never through a symbolic link, never blocking on a FIFO, and only a regular file
    with no other name (a hard link planted there could be an entry file: it is never appended to or emptied)."""
    extra = getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    fd = os.open(path, os.O_WRONLY | flags | extra, 0o644)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        raise UnsafeFileError(path, "is not a regular file of one name; left as it is")
    return fd


Reducers = Mapping[type, Callable[[Any], Any]]  # how the caller's own types are pickled (a pickler's dispatch table)


def _pickler(file: Any, reducers: Reducers) -> pickle.Pickler:
    pickler = pickle.Pickler(file, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = {**copyreg.dispatch_table, **reducers}
    return pickler


def append_frame(path: Path, content: object, reducers: Reducers) -> None:
    """One frame appended to the log and fsynced (the directory too when the log is new): a crash mid-write leaves a
    torn last frame, which the next load ignores."""
    buffer = io.BytesIO()
    _pickler(buffer, reducers).dump(content)
    payload = buffer.getvalue()
    frame = FRAME_HEAD.pack(FRAME_MAGIC, len(payload), hashlib.sha256(payload).digest()) + payload
    created = not os.path.lexists(path)
    fd = open_log(path, os.O_APPEND | os.O_CREAT)
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


def write_streamed(path: Path, magic: bytes, content: object, reducers: Reducers) -> None:
    """``magic`` (the index's format line), the payload's sha256, the payload: streamed to a temp file beside
    ``path``, the digest written into its place at the end, fsynced, renamed over ``path``, the directory fsynced
    (``atomic.py``'s order)."""
    temp = path.parent / f".{path.name}.{uuid.uuid4().hex}{NEW_SUFFIX}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        try:
            os.write(fd, magic + b"0" * 64 + b"\n")
            writer = _HashingWriter(fd)
            _pickler(writer, reducers).dump(content)
            os.pwrite(fd, writer.sha.hexdigest().encode("ascii"), len(magic))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)  # our own temp (O_EXCL), never anything else
        raise
    fsync_directory(path.parent)


__all__ = [
    "ALLOWED",
    "FRAME_HEAD",
    "FRAME_MAGIC",
    "Reducers",
    "RestrictedUnpickler",
    "append_frame",
    "open_log",
    "write_streamed",
]
