"""dreamkeeper's own state files (``AGENT_DIR/.dreamkeeper/...``): read only when they are regular files, bounded.

The state directory is on the agent's volume, where anything can appear. A FIFO at ``writeback-index.json``,
``reversals.jsonl`` or ``holds/pending.json`` blocked ``open()`` forever while the cycle held the agent's lock; a
symlink to ``/dev/zero`` there was a ``MemoryError`` traceback; ``ledger.json`` as a directory a bare errno (issue
22, findings 5 and 7). So every command that writes checks the state files first (``check_state_files``, before its
first write: one ``lstat`` each), and every read of one goes through ``read_state_file``: anything but a regular
file (a symlink included: state never leaves the agent directory) is one clear ``StateFileError`` saying what was
found, that nothing was changed, and what to do. The caller's lock is released as for any other failure.
"""

from __future__ import annotations

import contextlib
import os
import stat
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from dreamkeeper.memory.atomic import _WRITE_ERRNOS, NEW_SUFFIX, fsync_directory, make_dirs_durably
from dreamkeeper.memory.errors import MemoryStoreError, StoreWriteError
from dreamkeeper.memory.files import MiB, UnsafeFileError, describe_mode, read_regular
from dreamkeeper.memory.lock import STATE_DIR

SMALL_STATE_LIMIT: Final = 16 * MiB
"""ledger.json, lock.json: a few KB when we wrote them."""
LARGE_STATE_LIMIT: Final = 2048 * MiB
"""The write-back index, the reversals log and a held plan (one hash per live entry) grow with the corpus (a cold
start at 100k entries: tens of MB)."""

STATE_FILES: Final = (
    "lock.json",
    "ledger.json",
    "writeback-index.json",
    "reversals.jsonl",
    "holds/pending.json",
)
"""Every state file a command reads or replaces, relative to the state directory."""


class StateFileError(MemoryStoreError, OSError):
    """A state file of ours is not a regular file we may read (or replace). Nothing was changed."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(
            f"{path}: {why}; nothing was changed. It is dreamkeeper's own state file: move it aside (it is kept as it "
            "is) and run again"
        )
        self.path = path

    def __str__(self) -> str:
        return str(self.args[0])


def state_file(agent_dir: Path, name: str) -> Path:
    return agent_dir / STATE_DIR / name


def check_state_files(agent_dir: Path, names: tuple[str, ...] = STATE_FILES) -> None:
    """Refuse (``StateFileError``) when a state file exists and is not a regular file: before a command's first
    write, so a FIFO, device, symlink or directory stops it with nothing changed."""
    for name in names:
        path = state_file(agent_dir, name)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        except NotADirectoryError:
            continue  # a parent that is no directory is ensure_state_dir's to report
        except OSError as exc:
            raise StateFileError(path, f"it cannot be examined ({exc.strerror or exc})") from None
        if not stat.S_ISREG(st.st_mode):
            raise StateFileError(path, _not_regular(path, st.st_mode))


def read_state_file(path: Path, limit: int = SMALL_STATE_LIMIT) -> bytes | None:
    """A state file's bytes; None when it does not exist. Anything else than a regular file within ``limit``
    (never opened, never read past the limit) is a ``StateFileError``; so is an I/O error reading it."""
    try:
        return read_regular(path, limit, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except UnsafeFileError as exc:
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            raise StateFileError(path, exc.why) from None
        raise StateFileError(path, _not_regular(path, mode) if not stat.S_ISREG(mode) else exc.why) from None
    except OSError as exc:
        raise StateFileError(path, f"it cannot be read ({exc.strerror or exc})") from None


def replace_state_streamed(path: Path, chunks: Iterable[bytes]) -> None:
    """``replace_file(path, b"".join(chunks), UNCHECKED)`` for a state file of ours that grows with the corpus, never
    whole in memory: the chunks written to a temp file beside ``path`` as they come, fsynced, renamed over ``path``,
    the directory fsynced (atomic.py's order: a crash leaves the old file or the new one, whole). The write-back
    index's text and its bytes, joined, were ~25 MB of a cold cycle's peak at 100,000 entries (issue 27,
    bench/results/micro-s35.md). The file keeps the mode and group of the one it replaces, as ``replace_file``
    does. A full or read-only volume is a ``StoreWriteError``, the previous file intact and no temp left behind."""
    make_dirs_durably(path.parent)
    temp = path.parent / f".{path.name}.{uuid.uuid4().hex}{NEW_SUFFIX}"
    created = replaced = False
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
        created = True
        try:
            for chunk in chunks:
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view) :]
            _keep_mode(fd, path)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
        replaced = True
        fsync_directory(path.parent)
    except BaseException as exc:
        if created and not replaced:
            with contextlib.suppress(OSError):
                os.unlink(temp)  # created by us just now (O_EXCL): nothing but our partial data
        if isinstance(exc, OSError) and exc.errno in _WRITE_ERRNOS and not isinstance(exc, MemoryStoreError):
            raise StoreWriteError(path, exc) from exc
        raise


def _keep_mode(fd: int, path: Path) -> None:
    """The mode and group of the file being replaced, when they differ from what the new one got (``_write_temp``'s
    rule: an operator's chmod of a state file, or an fsGroup-shared volume's group, survives the rewrite)."""
    try:
        old = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(old.st_mode):
        return
    st = os.fstat(fd)
    if stat.S_IMODE(old.st_mode) != stat.S_IMODE(st.st_mode):
        os.fchmod(fd, stat.S_IMODE(old.st_mode))
    if old.st_gid != st.st_gid:
        with contextlib.suppress(PermissionError):
            os.fchown(fd, -1, old.st_gid)


def _not_regular(path: Path, mode: int) -> str:
    what = describe_mode(mode)
    if stat.S_ISLNK(mode):
        with contextlib.suppress(OSError):
            what += f" (to {os.readlink(path)})"
    return f"it is {what}, not a regular file; it was not opened"


__all__ = [
    "LARGE_STATE_LIMIT",
    "SMALL_STATE_LIMIT",
    "STATE_FILES",
    "StateFileError",
    "check_state_files",
    "read_state_file",
    "replace_state_streamed",
    "state_file",
]
