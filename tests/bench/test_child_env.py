"""The measured children of the CPU benches run with one BLAS thread, as every ``dreamkeeper`` process does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from bench.results_io import child_env


def test_a_child_gets_one_blas_thread_unless_the_caller_chose(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    env = child_env("/some/tree/operator")
    assert env["OPENBLAS_NUM_THREADS"] == "1" and env["PYTHONPATH"] == "/some/tree/operator"
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    env = child_env()
    assert "OPENBLAS_NUM_THREADS" not in env and env["OMP_NUM_THREADS"] == "3"


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc (Linux)")
def test_a_child_that_loads_numpy_starts_no_blas_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    # The worker spun ~0.1 s of CPU into what a child measured right after its imports (results_io.child_env).
    for name in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    probe = "import json, os, numpy; print(json.dumps(len(os.listdir('/proc/self/task'))))"
    done = subprocess.run([sys.executable, "-c", probe], env=child_env(), capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == 1
