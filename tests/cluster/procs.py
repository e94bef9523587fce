"""Child processes in their own process groups, killed as groups on stop and at interpreter exit.

Every process started here is registered; an atexit hook kills whatever is still alive, so a crashed fixture or
an interrupted session leaves no orphans. With `die_with_parent` a process also gets PR_SET_PDEATHSIG=SIGKILL,
so it dies even when pytest itself is SIGKILLed (its own children may survive that case; see README).
"""

from __future__ import annotations

import atexit
import ctypes
import logging
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
_live: set[ManagedProcess] = set()
_live_lock = threading.Lock()
# Resolved in the parent: the child (between fork and exec) must not dlopen or import anything.
_prctl = ctypes.CDLL(None, use_errno=True).prctl


def _pdeathsig_kill() -> None:  # runs in the child between fork and exec
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class _Spawner:
    """One never-ending thread that forks the children asking for PDEATHSIG.

    PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, not the process; children forked by
    short-lived threads (the node agent's pod workers) would be killed early. Forking them all from this thread
    means the signal fires only when the whole test process dies.
    """

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple[Callable[[], subprocess.Popen[bytes]], queue.Queue[Any]]] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _loop(self) -> None:
        while True:
            job, reply = self._jobs.get()
            try:
                reply.put(job())
            except BaseException as exc:  # handed back to the caller
                reply.put(exc)

    def run(self, job: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
        if threading.current_thread() is threading.main_thread():
            return job()  # the main thread lives as long as the process
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="procs-spawner", daemon=True)
                self._thread.start()
        reply: queue.Queue[Any] = queue.Queue(maxsize=1)
        self._jobs.put((job, reply))
        result = reply.get()
        if isinstance(result, BaseException):
            raise result
        assert isinstance(result, subprocess.Popen)
        return result


_spawner = _Spawner()


class ManagedProcess:
    """A child started with `start_new_session=True` (its own process group), output appended to `log_path`."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        die_with_parent: bool = False,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as out:

            def popen() -> subprocess.Popen[bytes]:
                return subprocess.Popen(
                    self.argv,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=dict(env) if env is not None else None,
                    cwd=cwd,
                    start_new_session=True,
                    preexec_fn=_pdeathsig_kill if die_with_parent else None,
                )

            self.popen = _spawner.run(popen) if die_with_parent else popen()
        self.pid = self.popen.pid
        with _live_lock:
            _live.add(self)

    def alive(self) -> bool:
        return self.popen.poll() is None

    def returncode(self) -> int | None:
        return self.popen.poll()

    def wait(self, timeout: float | None = None) -> int | None:
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as exc:
            return f"<no log: {exc}>"
        return "\n".join(text.splitlines()[-lines:])

    def _signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            pass
        except PermissionError:  # group leader gone and pgid reused: signal only our own child
            if self.alive():
                self.popen.send_signal(sig)

    def stop(self, grace: float = 10.0) -> int:
        """SIGTERM the whole group, wait up to `grace` seconds, then SIGKILL it. Returns the exit status."""
        if self.alive():
            self._signal_group(signal.SIGTERM)
            deadline = time.monotonic() + grace
            while self.alive() and time.monotonic() < deadline:
                time.sleep(0.05)
        # Also KILL the group when the leader already exited: children it forked may still be around.
        self._signal_group(signal.SIGKILL)
        code = self.popen.wait()
        with _live_lock:
            _live.discard(self)
        return code

    def __repr__(self) -> str:
        return f"ManagedProcess({self.name!r}, pid={self.pid})"


def live_processes() -> list[ManagedProcess]:
    with _live_lock:
        return list(_live)


@atexit.register
def _kill_all_at_exit() -> None:
    for proc in live_processes():
        log.warning("killing leftover process group %s at exit", proc)
        proc.stop(grace=1.0)
