"""The agent's own lock, held around every rewrite of its files.

dreamkeeper's cycle lock keeps two dreamkeeper runs apart; the agent's lock keeps dreamkeeper apart from the agent's
own writers for the moment a file is read, rewritten and put in place:

* Hermes serialises every ``add``/``replace``/``remove`` with ``fcntl.flock`` on ``MEMORY.md.lock`` (a sidecar, so
  the file itself can be replaced by rename). Holding it while dreamkeeper reads and swaps ``MEMORY.md`` means a
  live session's next write re-reads the file dreamkeeper wrote, rather than writing its own stale list over it.
* OpenClaw's dreaming promotion holds ``<stateDir>/locks/memory-promotion-<sha256(realpath(workspace))>.lock``, a
  file created exclusively with ``{"pid", "createdAt"}``, while it rewrites ``MEMORY.md``; Claude Code's autoDream
  holds ``.consolidate-lock``. dreamkeeper creates the same file the same way and removes it after.

A lock that stays held past ``wait_seconds`` is not broken: the rewrite is refused this time (a LockHeldError names
the holder) and the unit records keep the work pending for the next run. Writes stay fingerprint-guarded either way:
the lock only spares the agent a refused write, never the data a wrong one.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

from dreamkeeper.formats.profile import AgentLock
from dreamkeeper.memory import LockHeldError, format_timestamp, fsync_directory, utcnow

POLL_SECONDS = 0.05


@contextlib.contextmanager
def agent_lock(lock: AgentLock, agent_dir: Path, memory_dir: Path, file: Path) -> Iterator[None]:
    """Hold the agent's lock for ``file`` (a file of the agent's memory directory)."""
    if lock.kind == "flock-sidecar":
        with _flock(file.with_name(file.name + lock.suffix), lock.wait_seconds):
            yield
    elif lock.kind == "exclusive-file" and lock.path:
        with _exclusive(agent_dir / _expand(lock.path, memory_dir), lock.wait_seconds):
            yield
    else:
        yield


def _expand(template: str, memory_dir: Path) -> str:
    real = os.path.realpath(memory_dir)
    return template.replace("{workspace_sha256}", hashlib.sha256(real.encode()).hexdigest())


@contextlib.contextmanager
def _flock(path: Path, wait: float) -> Iterator[None]:
    # As the agent opens it ("a+": created when missing, never truncated), so both lock the same inode.
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW, 0o666)
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockHeldError(path, f"the agent's lock was held for more than {wait:g} s") from None
                time.sleep(POLL_SECONDS)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _exclusive(path: Path, wait: float) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = json.dumps({"pid": os.getpid(), "createdAt": format_timestamp(utcnow()), "owner": "dreamkeeper"})
    deadline = time.monotonic() + wait
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
            break
        except FileExistsError:
            if time.monotonic() >= deadline:
                raise LockHeldError(path, f"{_holder(path)}; held for more than {wait:g} s") from None
            time.sleep(POLL_SECONDS)
    try:
        os.write(fd, payload.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    inode = os.lstat(path).st_ino
    try:
        yield
    finally:
        # Only our own file: if someone replaced it meanwhile (a stale-lock reclaim), theirs stays.
        with contextlib.suppress(OSError):
            if os.lstat(path).st_ino == inode:
                os.unlink(path)
                fsync_directory(path.parent)


def _holder(path: Path) -> str:
    try:
        data = json.loads(path.read_text(encoding="utf-8")[:4096])
    except (OSError, ValueError) as exc:
        if isinstance(exc, OSError) and exc.errno == errno.ENOENT:
            return "released just now"
        return "holder unknown"
    if not isinstance(data, dict):
        return "holder unknown"
    return f"held by pid {data.get('pid', '?')} since {data.get('createdAt', '?')}"


__all__ = ["agent_lock"]
