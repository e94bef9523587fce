"""Durable atomic file replacement and the fingerprints used for optimistic concurrency.

Every mutation of an entry file goes through :func:`replace_file`: a hidden temp file in the same directory,
fsync of the file, rename over the target, fsync of the directory. A crash at any instant leaves the old file or
the new one, never a torn or missing one.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from dreamkeeper.memory.errors import ConflictError, StoreWriteError


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """What the caller last read: content hash plus mtime and size. Any difference means someone wrote."""

    sha256: str
    size: int
    mtime_ns: int

    @classmethod
    def of_bytes(cls, data: bytes, st: os.stat_result) -> Fingerprint:
        return cls(hashlib.sha256(data).hexdigest(), st.st_size, st.st_mtime_ns)

    def short(self) -> str:
        return self.sha256[:12]


class _Unchecked:
    """Marker: write without a concurrency check (dreamkeeper's own state files only)."""


UNCHECKED: Final = _Unchecked()
MUST_NOT_EXIST: Final = None

_NO_HARDLINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS}
_WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EIO, errno.EPERM, errno.EFBIG}


def read_with_fingerprint(path: Path) -> tuple[bytes, Fingerprint]:
    with open(path, "rb") as handle:
        st = os.fstat(handle.fileno())
        data = handle.read()
    return data, Fingerprint.of_bytes(data, st)


def current_fingerprint(path: Path) -> Fingerprint | None:
    try:
        return read_with_fingerprint(path)[1]
    except FileNotFoundError:
        return None


def check_unchanged(path: Path, expected: Fingerprint | None) -> None:
    """Refuse when the file is not what the caller read (expected=None means: must not exist)."""
    actual = current_fingerprint(path)
    if expected is None:
        if actual is not None:
            raise ConflictError(path, "a file appeared where a new entry was to be created")
        return
    if actual is None:
        raise ConflictError(path, "the file was removed since it was read")
    if actual.sha256 != expected.sha256:
        raise ConflictError(path, f"content changed since it was read ({expected.short()} -> {actual.short()})")
    if actual.size != expected.size or actual.mtime_ns != expected.mtime_ns:
        raise ConflictError(path, "the file was rewritten since it was read")


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dirs_durably(directory: Path) -> None:
    """mkdir -p that also fsyncs each parent it added a directory to, so a new category survives a crash."""
    missing: list[Path] = []
    probe = directory
    while not probe.is_dir():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for created in reversed(missing):
        with contextlib.suppress(FileExistsError):
            created.mkdir()
        fsync_directory(created.parent)


def _write_temp(path: Path, data: bytes) -> tuple[Path, Fingerprint]:
    temp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    # A new file gets what the umask leaves of 0666: 0644 by default, group-writable under --shared-group.
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        with contextlib.suppress(FileNotFoundError):
            # Keep the agent's file mode (and group, on fsGroup-shared volumes) across rewrites.
            old = os.stat(path)
            os.fchmod(fd, stat.S_IMODE(old.st_mode))
            with contextlib.suppress(PermissionError):
                os.fchown(fd, -1, old.st_gid)
        os.fsync(fd)
        # rename keeps the inode, so this is the fingerprint the target will have — taken from our own fd, not by
        # re-reading the target, which the agent may already have rewritten.
        fingerprint = Fingerprint.of_bytes(data, os.fstat(fd))
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    os.close(fd)
    return temp, fingerprint


def replace_file(
    path: Path, data: bytes, expected: Fingerprint | _Unchecked | None, *, sync_directory: bool = True
) -> Fingerprint:
    """Durably replace (or create) ``path`` with ``data``.

    ``expected``: a Fingerprint = the file must still be exactly that; ``MUST_NOT_EXIST`` (None) = exclusive
    create, never clobbering a file that appeared; ``UNCHECKED`` = dreamkeeper's own state files only.
    ``sync_directory=False`` leaves the fsync of the directory (which makes the rename itself durable) to the
    caller, who batches it over many files; the file's own data is always fsynced before the rename, so a crash
    still leaves the old file or the new one, whole.
    """
    temp: Path | None = None
    try:
        make_dirs_durably(path.parent)
        temp, fingerprint = _write_temp(path, data)
        if expected is None:
            # link() fails if the name exists: a concurrent creator is never overwritten.
            try:
                os.link(temp, path)
            except FileExistsError as exc:
                raise ConflictError(path, "a file appeared where a new entry was to be created") from exc
            except OSError as exc:
                if exc.errno not in _NO_HARDLINKS:
                    raise
                # Volumes without hard links (some SMB/CSI drivers): check then rename; the race window is tiny.
                check_unchanged(path, None)
                os.replace(temp, path)
            else:
                linked, temp = temp, None
                with contextlib.suppress(OSError):
                    # A leftover would be a hidden temp, which scans ignore; the entry itself is in place.
                    os.unlink(linked)
        else:
            if isinstance(expected, Fingerprint):
                # The window between this check and the rename is microseconds; the agent does not lock.
                check_unchanged(path, expected)
            os.replace(temp, path)
        temp = None
        if sync_directory:
            fsync_directory(path.parent)
    except OSError as exc:
        if temp is not None:
            with contextlib.suppress(OSError):
                temp.unlink()
        if exc.errno in _WRITE_ERRNOS:
            raise StoreWriteError(path, exc) from exc
        raise
    except BaseException:
        if temp is not None:
            with contextlib.suppress(OSError):
                temp.unlink()
        raise
    return fingerprint


def create_exclusive(path: Path, data: bytes) -> bool:
    """Create ``path`` only if it does not exist; never renames over an existing file.

    Returns True when created, False when a file was already there (left byte-identical).
    """
    try:
        replace_file(path, data, MUST_NOT_EXIST)
    except ConflictError:
        return False
    return True


def unlink_durably(path: Path) -> None:
    """Remove a file and persist the directory change. Only purge may call this on an entry file."""
    os.unlink(path)
    fsync_directory(path.parent)
