"""The crash tests' child process: a real cycle run in a subprocess that SIGKILLs itself at a chosen point.

``KILL_HOOKS`` is the code a child script includes (after it has set ``kill_at`` and ``phase``) to die at step
``kill_at`` of the journal executor: "before" the step runs, or "after" it ran but before its outcome reached the
journal file. Every step runs through ``Executor._guarded``; outcomes reach the file through
``Journal.record_many`` (stamps in batches: a kill "after" step k leaves every outcome of k's batch unrecorded, k's
write included). ``run_child`` runs a script with this checkout importable first."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

KILL_HOOKS = textwrap.dedent(
    """
    from dreamkeeper.consolidation import executor as X
    from dreamkeeper.consolidation import journal as J
    ran, recorded = {"n": 0}, {"n": 0}
    original_guarded, original_record_many = X.Executor._guarded, J.Journal.record_many

    def guarded(self, step, run):
        if phase == "before" and ran["n"] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        ran["n"] += 1
        return original_guarded(self, step, run)

    def record_many(self, outcomes, **options):
        if phase == "after" and recorded["n"] <= kill_at < recorded["n"] + len(outcomes):
            os.kill(os.getpid(), signal.SIGKILL)  # the step happened; its journal line did not
        recorded["n"] += len(outcomes)
        return original_record_many(self, outcomes, **options)

    X.Executor._guarded = guarded
    J.Journal.record_many = record_many
    """
)


def run_child(script: str, *args: str, timeout: float = 120) -> int:
    """Run ``script`` (``python -c``) with ``args``; returns its exit code, which must be 0 or death by SIGKILL
    (anything else is the child's own failure: its stderr is shown)."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-c", script, *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode in (0, -signal.SIGKILL), done.stderr[-2000:]
    return done.returncode
