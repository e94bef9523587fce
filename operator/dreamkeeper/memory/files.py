"""Reading a file someone else controls: regular files only, never more than a limit.

A FIFO named like a settings file blocks ``open()`` forever, ``/dev/zero`` as a vocabulary fills memory, and a
volume can hold anything. So every file dreamkeeper reads that it did not write itself comes through here: it is
``stat``-ed first and refused unless it is a regular file no larger than the caller's limit (a special file is
never opened), then opened non-blocking (in case it was swapped for one meanwhile) and checked again on the
descriptor, and read up to the limit only.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any, Final

KiB: Final = 1024
MiB: Final = 1024 * KiB

_KINDS: Final = (
    (stat.S_ISREG, "a regular file"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link"),
)


class UnsafeFileError(OSError):
    """The file is not something to read: not a regular file, or larger than allowed. Nothing was read."""

    def __init__(self, path: Path | str, why: str) -> None:
        super().__init__(errno.EINVAL, why, str(path))
        self.why = why

    def __str__(self) -> str:
        return f"{self.filename}: {self.why}"


def describe_mode(mode: int) -> str:
    for test, kind in _KINDS:
        if test(mode):
            return kind
    return "a special file of an unknown kind"


def check_regular(path: Path | str, st: os.stat_result, limit: int) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeFileError(path, f"is {describe_mode(st.st_mode)}, not a regular file; it was not opened")
    if st.st_size > limit:
        raise UnsafeFileError(path, f"is {st.st_size} bytes, over the {_size(limit)} limit; it was not read")


def open_regular(path: Path | str, limit: int, *, follow_symlinks: bool = True) -> tuple[int, os.stat_result]:
    """An fd on ``path`` opened for reading, after checking it is a regular file within ``limit`` bytes.

    ``follow_symlinks=False`` refuses a symbolic link itself (entry files); True follows it (Kubernetes mounts
    ConfigMaps and Secrets through symlinks)."""
    st = os.stat(path, follow_symlinks=follow_symlinks)
    check_regular(path, st, limit)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        check_regular(path, st, limit)  # it may have been replaced between the stat and the open
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_fd(fd: int, path: Path | str, limit: int, size: int | None = None) -> bytes:
    """Up to ``limit`` bytes from ``fd``; a file that grew past the limit while being read is refused.

    ``size``: the file's size by an ``fstat`` of ``fd``. The first read then asks for one byte more than that, and
    when it gives exactly ``size`` bytes (short of what it asked: the end of a regular file) it is the whole file:
    one read into one buffer of the file's size. Without it, every read asked for 1 MiB (an entry file of a few
    hundred bytes got a 1 MiB buffer, then a second read to find its end) and a large file was read in 1 MiB
    pieces and joined (a 55 MB corpus index copied twice). A file that is not ``size`` bytes by then (it grew or
    shrank since the ``fstat``) is read on to its end, as without it."""
    chunks: list[bytes] = []
    remaining = limit + 1
    want = min(remaining, MiB if size is None or size < 0 else size + 1)
    while remaining > 0:
        chunk = os.read(fd, want)
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
        if len(chunk) < want and limit + 1 - remaining == size:
            break
        want = min(remaining, MiB)
    if remaining <= 0:
        raise UnsafeFileError(path, f"grew past the {_size(limit)} limit while being read")
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def read_regular(path: Path | str, limit: int, *, follow_symlinks: bool = True) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; ``UnsafeFileError`` (an OSError) otherwise."""
    fd, st = open_regular(path, limit, follow_symlinks=follow_symlinks)
    try:
        return read_fd(fd, path, limit, st.st_size)
    finally:
        os.close(fd)


def read_regular_text(path: Path | str, limit: int) -> str:
    """``read_regular`` decoded as UTF-8 (a BOM is dropped); UnicodeDecodeError is the caller's to report."""
    return read_regular(path, limit).decode("utf-8-sig")


def _size(limit: int) -> str:
    if limit % MiB == 0:
        return f"{limit // MiB} MiB"
    if limit % KiB == 0:
        return f"{limit // KiB} KiB"
    return f"{limit} byte"


def loads_json(text: str | bytes, *, strict: bool = True) -> Any:
    """``json.loads`` whose every refusal is a ValueError: nesting too deep to parse (the C decoder raises
    RecursionError) and bytes whose detected encoding cannot be decoded (LookupError), which no ``except ValueError``
    around a file or reply read would catch."""
    try:
        return json.loads(text, strict=strict)
    except RecursionError:
        raise ValueError("JSON nested too deeply to parse") from None
    except LookupError as exc:  # bytes of NULs: json's encoding detection names a codec/handler pair Python lacks
        raise ValueError(f"not JSON text ({exc})") from None
