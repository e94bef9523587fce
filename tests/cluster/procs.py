"""Child processes in their own process groups, killed as groups on stop and at interpreter exit.

Every process started here is registered; an atexit hook kills whatever is still alive, so a crashed fixture or
an interrupted session leaves no orphans. Control-plane processes additionally get PR_SET_PDEATHSIG so they die
even when pytest itself is SIGKILLed (see `die_with_parent`).
"""

from __future__ import annotations

import atexit
import ctypes
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
_live: set[ManagedProcess] = set()
_live_lock = threading.Lock()


def _pdeathsig_kill() -> None:  # runs in the child between fork and exec
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


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
        # PDEATHSIG fires when the *thread* that forked exits, so only use it for processes started from a
        # long-lived thread (the control plane is started from pytest's main thread).
        preexec: Callable[[], None] | None = _pdeathsig_kill if die_with_parent else None
        with open(log_path, "ab") as out:
            self.popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                start_new_session=True,
                preexec_fn=preexec,
            )
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
