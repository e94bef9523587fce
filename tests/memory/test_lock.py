"""The cycle lock: one holder per agent directory; a SIGKILLed holder is detected and its lock taken over."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from dreamkeeper.memory import CycleLock, LockHeldError

HOLDER = """
import sys, time
from pathlib import Path
from dreamkeeper.memory import CycleLock
lock = CycleLock(Path(sys.argv[1]), "dream cycle-42").acquire()
print("locked", flush=True)
time.sleep(600)
"""


def test_second_holder_is_refused_with_the_holder_named(tmp_path: Path) -> None:
    with CycleLock(tmp_path, "dream"), pytest.raises(LockHeldError) as refused:
        CycleLock(tmp_path, "restore").acquire()
    assert f"pid {os.getpid()}" in refused.value.holder
    assert "dream" in refused.value.holder
    assert "nothing was changed" in str(refused.value)


def test_released_lock_is_free_and_not_reported_as_crashed(tmp_path: Path) -> None:
    with CycleLock(tmp_path, "dream"):
        pass
    with CycleLock(tmp_path, "dream") as again:
        assert again.previous_holder_crashed is None
    assert not (tmp_path / ".dreamkeeper" / "lock.json").exists()


def test_sigkilled_holder_is_detected_and_lock_reacquired(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        with pytest.raises(LockHeldError) as refused:
            CycleLock(tmp_path, "restore").acquire()
        assert f"pid {holder.pid}" in refused.value.holder and "dream cycle-42" in refused.value.holder
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    caplog.set_level(logging.WARNING, logger="dreamkeeper.memory.lock")
    with CycleLock(tmp_path, "restore") as lock:
        assert lock.previous_holder_crashed is not None
        assert lock.previous_holder_crashed.pid == holder.pid
        assert lock.previous_holder_crashed.purpose == "dream cycle-42"
        info = json.loads((tmp_path / ".dreamkeeper" / "lock.json").read_text())
        assert info["pid"] == os.getpid() and info["purpose"] == "restore"
    assert any(
        "did not release its lock" in r.getMessage() and str(holder.pid) in r.getMessage() for r in caplog.records
    )


def test_holder_past_expiry_is_reported_as_possibly_hung(tmp_path: Path) -> None:
    with (
        CycleLock(tmp_path, "dream", ttl=timedelta(seconds=-1)),
        pytest.raises(LockHeldError, match="past its expiry"),
    ):
        CycleLock(tmp_path, "restore").acquire()


def test_failed_holder_write_does_not_keep_the_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import dreamkeeper.memory.lock as lock_module

    def disk_full(*_: object, **__: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(lock_module, "replace_file", disk_full)
    with pytest.raises(OSError):
        CycleLock(tmp_path, "dream").acquire()
    monkeypatch.undo()
    with CycleLock(tmp_path, "dream"):
        pass
