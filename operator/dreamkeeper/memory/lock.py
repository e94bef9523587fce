"""The cycle lock: one consolidation at a time per agent directory.

``flock`` does the exclusion (the kernel releases it when a holder dies, even by SIGKILL); the JSON beside it says
who holds it and until when, so a crashed holder is reported and a stuck one is visible to operators.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import socket
import stat
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType

from dreamkeeper.memory.atomic import UNCHECKED, fsync_directory, replace_file
from dreamkeeper.memory.entry import format_timestamp, utcnow
from dreamkeeper.memory.errors import LockHeldError, StateDirError
from dreamkeeper.memory.files import MiB, describe_mode, loads_json, read_regular

log = logging.getLogger(__name__)

STATE_DIR = ".dreamkeeper"
STATE_FILE_LIMIT = 16 * MiB  # lock.json, ledger.json: a few hundred bytes when we wrote them


def state_dir(agent_dir: Path) -> Path:
    return agent_dir / STATE_DIR


def ensure_state_dir(agent_dir: Path, *parts: str, create: bool = True) -> Path | None:
    """``AGENT_DIR/.dreamkeeper[/parts...]`` as real directories: none may be a symlink (state would land outside
    the agent directory) or anything but a directory. Missing ones are created when ``create`` (else None is
    returned); the agent directory itself never is."""
    try:
        st = os.stat(agent_dir)
    except FileNotFoundError:
        raise StateDirError(agent_dir, "the agent directory does not exist") from None
    except OSError as exc:
        raise StateDirError(agent_dir, f"the agent directory cannot be read ({exc.strerror or exc})") from None
    if not stat.S_ISDIR(st.st_mode):
        raise StateDirError(agent_dir, f"the agent directory is {describe_mode(st.st_mode)}")
    directory = agent_dir
    for name in (STATE_DIR, *parts):
        directory = directory / name
        try:
            st = os.lstat(directory)
        except FileNotFoundError:
            if not create:
                return None
            try:
                directory.mkdir()
                fsync_directory(directory.parent)
            except FileExistsError:
                pass
            except OSError as exc:
                raise StateDirError(directory, f"it cannot be created ({exc.strerror or exc})") from None
            st = os.lstat(directory)
        except OSError as exc:
            raise StateDirError(directory, f"it cannot be read ({exc.strerror or exc})") from None
        if stat.S_ISLNK(st.st_mode):
            raise StateDirError(
                directory,
                f"it is a symbolic link (to {os.readlink(directory)}); state must stay in the agent directory",
            )
        if not stat.S_ISDIR(st.st_mode):
            raise StateDirError(directory, f"it is {describe_mode(st.st_mode)}, not a directory")
    return directory


def read_state_json(path: Path) -> object:
    """One of our small state files (lock.json, ledger.json) as JSON; ValueError/OSError when it is not one."""
    return loads_json(read_regular(path, STATE_FILE_LIMIT, follow_symlinks=False).decode("utf-8"))


@dataclass(frozen=True)
class LockHolder:
    pid: int
    host: str
    purpose: str
    acquired_at: str
    expires_at: str

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}, {self.purpose}, since {self.acquired_at}, expires {self.expires_at}"


class CycleLock:
    """``with CycleLock(agent_dir, "dream"):`` — raises LockHeldError if another cycle runs."""

    def __init__(self, agent_dir: Path, purpose: str, ttl: timedelta = timedelta(hours=6)) -> None:
        self.path = state_dir(agent_dir) / "lock"
        self.info_path = state_dir(agent_dir) / "lock.json"
        self.purpose = purpose
        self.ttl = ttl
        self._fd: int | None = None
        self.previous_holder_crashed: LockHolder | None = None

    def acquire(self) -> CycleLock:
        ensure_state_dir(self.path.parent.parent)
        try:
            # 0666: the umask decides (002: --shared-group)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise OSError(errno.EINVAL, "not a regular file")
        except OSError as exc:
            raise StateDirError(self.path, f"the lock file cannot be opened ({exc.strerror or exc})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = self.read_holder()
            detail = holder.describe() if holder else "holder unknown"
            if holder and _parse(holder.expires_at) < utcnow():
                detail += " — past its expiry: the holder may be hung"
            raise LockHeldError(self.path, detail) from None
        self._fd = fd
        try:
            stale = self.read_holder()
            if stale is not None:
                # The info file survives a crash but the flock does not: the previous run died holding it.
                self.previous_holder_crashed = stale
                log.warning("previous dreamkeeper run did not release its lock (%s); taking over", stale.describe())
            now = utcnow()
            holder = LockHolder(
                pid=os.getpid(),
                host=socket.gethostname(),
                purpose=self.purpose,
                acquired_at=format_timestamp(now),
                expires_at=format_timestamp(now + self.ttl),
            )
            try:
                replace_file(self.info_path, json.dumps(holder.__dict__, indent=2).encode(), UNCHECKED)
            except OSError as exc:
                raise StateDirError(self.info_path, f"it cannot be written ({exc.strerror or exc})") from None
        except BaseException:
            # e.g. a full disk while writing the holder file: do not keep the flock for the rest of the process.
            self._fd = None
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            raise
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            self.info_path.unlink()
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    def read_holder(self) -> LockHolder | None:
        try:
            data = read_state_json(self.info_path)
            return LockHolder(**data) if isinstance(data, dict) else None
        except (OSError, ValueError, TypeError):
            return None

    def __enter__(self) -> CycleLock:
        return self.acquire()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


def _parse(value: str) -> datetime:
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return utcnow()
