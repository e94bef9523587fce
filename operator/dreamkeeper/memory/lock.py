"""The cycle lock: one consolidation at a time per agent directory.

``flock`` does the exclusion (the kernel releases it when a holder dies, even by SIGKILL); the JSON beside it says
who holds it and until when, so a crashed holder is reported and a stuck one is visible to operators.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import socket
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType

from dreamkeeper.memory.atomic import UNCHECKED, replace_file
from dreamkeeper.memory.entry import format_timestamp, utcnow
from dreamkeeper.memory.errors import LockHeldError

log = logging.getLogger(__name__)

STATE_DIR = ".dreamkeeper"


def state_dir(agent_dir: Path) -> Path:
    return agent_dir / STATE_DIR


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
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)  # the umask decides (002: --shared-group)
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
            replace_file(self.info_path, json.dumps(holder.__dict__, indent=2).encode(), UNCHECKED)
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
            data = json.loads(self.info_path.read_text(encoding="utf-8"))
            return LockHolder(**data)
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
