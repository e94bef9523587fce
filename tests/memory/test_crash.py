"""SIGKILL a process in the middle of save/archive/restore/create: every file is whole, old or new, never missing."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from dreamkeeper.memory import Entry, MemoryStore

REPO = Path(__file__).resolve().parents[2]
VERSIONED = re.compile(r"^(?P<id>\S+) v(?P<version>\d+) x*$")


@dataclass
class CrashStats:
    kills: int = 0
    mutations: int = 0
    kills_leaving_temp_files: int = 0


def _seed_store(root: Path, count: int) -> None:
    store = MemoryStore(root)
    for index in range(count):
        entry_id = f"c{index:011x}"
        store.create(
            Entry(
                id=entry_id,
                content=f"{entry_id} v1 ",
                category=f"crash/c{index % 3}",
                metadata={"version": "1", "keep": "unknown keys must survive"},
            )
        )


def _versions(root: Path) -> dict[str, int]:
    """Parse every entry file strictly; fail on anything torn, inconsistent or unexpected."""
    versions: dict[str, int] = {}
    for path in root.rglob("*.json"):
        if path.name.startswith("."):
            continue
        obj = json.loads(path.read_bytes())  # a torn file fails here
        match = VERSIONED.match(obj["content"])
        assert match, f"{path}: content is not a version the worker wrote"
        assert match["id"] == obj["id"] == path.stem
        assert obj["metadata"]["version"] == match["version"], f"{path}: content and metadata from different writes"
        if obj["archivedAt"] is not None:
            assert obj["archiveReason"].startswith("crash test at v")
        versions[obj["id"]] = int(match["version"])
    return versions


def _run_crash_loop(tmp_path: Path, iterations: int, seed: int) -> CrashStats:
    root = tmp_path / "memory"
    _seed_store(root, 12)
    rng = random.Random(seed)
    stats = CrashStats()
    before = _versions(root)
    seen_temps: set[Path] = set()
    for iteration in range(iterations):
        worker = subprocess.Popen(
            [sys.executable, "-m", "tests.memory.crash_worker", str(root), str(seed * 100_000 + iteration)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert worker.stdout is not None
        ready = worker.stdout.readline()
        assert ready == b"ready\n", worker.stderr.read() if worker.stderr else ready
        time.sleep(rng.uniform(0.0, 0.06))
        worker.send_signal(signal.SIGKILL)
        out, err = worker.communicate(timeout=60)
        assert worker.returncode == -signal.SIGKILL, err.decode()  # it was still running: no worker crash
        stats.kills += 1
        stats.mutations += out.count(b".")

        after = _versions(root)
        missing = set(before) - set(after)
        assert not missing, f"iteration {iteration}: entries vanished: {missing}"
        regressed = {i: (before[i], after[i]) for i in before if after[i] < before[i]}
        assert not regressed, f"iteration {iteration}: entries went back to older versions: {regressed}"
        # Leftover temps (killed between temp write and rename) are hidden, and scans ignore them.
        temps = {p for p in root.rglob("*") if p.is_file() and p.suffix == ".tmp"}
        assert all(p.name.startswith(".") for p in temps)
        stats.kills_leaving_temp_files += bool(temps - seen_temps)
        seen_temps |= temps
        scan = MemoryStore(root).scan()
        assert not scan.malformed
        assert {s.id for s in scan.entries} == set(after)
        before = after
    return stats


def test_sigkill_during_writes_short(tmp_path: Path) -> None:
    stats = _run_crash_loop(tmp_path, iterations=15, seed=1)
    assert stats.kills == 15
    assert stats.mutations > 0, "the worker never got to write: the test proved nothing"


@pytest.mark.slow
def test_sigkill_during_writes_long(tmp_path: Path) -> None:
    started = time.monotonic()
    stats = _run_crash_loop(tmp_path, iterations=250, seed=2)
    assert stats.kills == 250
    assert stats.mutations > 250
    print(
        f"\ncrash loop: {stats.kills} SIGKILLs, {stats.mutations} completed mutations, "
        f"{stats.kills_leaving_temp_files} kills left a temp file (killed mid-write), "
        f"{time.monotonic() - started:.1f}s"
    )


def test_worker_versions_are_checked_strictly(tmp_path: Path) -> None:
    """The checker itself must catch a torn file and a content/metadata mix-up (else the crash test is blind)."""
    root = tmp_path / "memory"
    _seed_store(root, 2)
    victim = next(root.rglob("*.json"))
    whole = victim.read_bytes()
    victim.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(json.JSONDecodeError):
        _versions(root)
    obj = json.loads(whole)
    obj["metadata"]["version"] = "7"
    victim.write_text(json.dumps(obj))
    with pytest.raises(AssertionError):
        _versions(root)
    os.remove(victim)
