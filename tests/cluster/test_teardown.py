"""The fixture fails loudly instead of skipping, and leaves no processes behind (even after failures or SIGKILL).

Each test runs a separate pytest / python process against its own state root, then scans /proc for anything
whose command line still mentions that root.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def processes_mentioning(marker: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline:
            found.append(f"{entry.name}: {cmdline[:200]}")
    return found


def write_suite(directory: Path, body: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "conftest.py").write_text('pytest_plugins = ["tests.cluster.fixtures"]\n')
    test_file = directory / "test_inner.py"
    test_file.write_text(textwrap.dedent(body))
    return test_file


def run_pytest(test_file: Path, env_extra: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    # State and kept logs go below the test's tmp dir, not /dev/shm and /tmp.
    scratch = test_file.parent / "scratch"
    (scratch / "state").mkdir(parents=True, exist_ok=True)
    env_extra = {"TMPDIR": str(scratch), "DREAMKEEPER_CLUSTER_STATE_ROOT": str(scratch / "state"), **env_extra}
    env = {**os.environ, "PYTHONPATH": str(REPO), **env_extra}
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--rootdir", str(test_file.parent)]
    return subprocess.run(
        [*argv, *args, str(test_file)], capture_output=True, text=True, env=env, timeout=600, cwd=test_file.parent
    )


def test_missing_binaries_fail_every_cluster_test_instead_of_skipping(tmp_path: Path) -> None:
    test_file = write_suite(
        tmp_path / "suite",
        """
        def test_a(kube_cluster):
            pass

        def test_b(kube_namespace):
            pass
        """,
    )
    result = run_pytest(test_file, {"DREAMKEEPER_CACHE": str(tmp_path / "empty-cache")}, "-rA")
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "2 errors" in out and "skipped" not in out, out
    assert "ToolMissingError" in out and "make tools" in out, out
    assert "FileNotFoundError" not in out, out  # the failure path itself must not fail
    assert list((test_file.parent / "scratch" / "state").iterdir()) == []  # no state left behind


def test_cluster_tests_are_deselectable_by_marker(tmp_path: Path) -> None:
    test_file = write_suite(
        tmp_path / "suite",
        """
        def test_needs_cluster(kube_namespace):
            raise AssertionError("must not run")

        def test_plain():
            pass
        """,
    )
    result = run_pytest(test_file, {"DREAMKEEPER_CACHE": str(tmp_path / "empty-cache")}, "-m", "not cluster")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed, 1 deselected" in result.stdout


@pytest.mark.cluster
def test_failing_session_leaves_no_processes(tmp_path: Path) -> None:
    root = tmp_path / f"state-{uuid.uuid4().hex[:6]}"
    root.mkdir()
    test_file = write_suite(
        tmp_path / "suite",
        """
        import os
        import sys

        from tests.cluster.kubeapi import namespaced

        def test_fails_with_a_running_pod(kube_cluster, kube_namespace):
            root = os.environ["DREAMKEEPER_CLUSTER_STATE_ROOT"]
            sleeper = [sys.executable, "-c", "import time; time.sleep(300)", root]
            pod = {"metadata": {"name": "p"}, "spec": {"containers": [
                {"name": "c", "image": "busybox", "command": sleeper}]}}
            kube_cluster.api.create(namespaced(kube_namespace, "pods"), pod)
            kube_cluster.wait_for("p to run", lambda: kube_cluster.api.get(
                namespaced(kube_namespace, "pods", "p"))["status"].get("phase") == "Running", 60)
            raise AssertionError("deliberate failure")
        """,
    )
    result = run_pytest(test_file, {"DREAMKEEPER_CLUSTER_STATE_ROOT": str(root)})
    out = result.stdout + result.stderr
    assert result.returncode == 1 and "deliberate failure" in out, out
    assert "logs kept in" in out, out  # a failed session keeps the logs outside tmpfs
    kept = list((test_file.parent / "scratch").glob("dk-k8s-logs-*"))
    assert len(kept) == 1 and (kept[0] / "kube-apiserver.log").is_file(), out
    assert processes_mentioning(str(root)) == []
    assert list(root.iterdir()) == []  # state removed


@pytest.mark.cluster
def test_sigkilled_session_takes_its_processes_along(tmp_path: Path) -> None:
    """PR_SET_PDEATHSIG: the control plane and the containers die with the test process, even on SIGKILL."""
    root = tmp_path / f"state-{uuid.uuid4().hex[:6]}"
    root.mkdir()
    sleeper = [sys.executable, "-c", "import time; time.sleep(300)", str(root)]
    script = textwrap.dedent(f"""
        import time
        from tests.cluster.fixtures import KubeCluster
        from tests.cluster.kubeapi import namespaced
        c = KubeCluster()
        c.start_all()
        ns = c.create_namespace("k")
        c.api.create(namespaced(ns, "pods"), {{"metadata": {{"name": "p"}}, "spec": {{"containers": [
            {{"name": "c", "image": "busybox", "command": {sleeper!r}}}]}}}})
        c.wait_for("p to run", lambda: c.api.get(namespaced(ns, "pods", "p"))["status"].get("phase") == "Running")
        print("READY", flush=True)
        time.sleep(600)
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO), "DREAMKEEPER_CLUSTER_STATE_ROOT": str(root), "TMPDIR": str(root)}
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "READY"
        mentioning = processes_mentioning(str(root))
        assert any("kube-apiserver" in p for p in mentioning) and any("time.sleep(300)" in p for p in mentioning)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        deadline = time.monotonic() + 30
        while processes_mentioning(str(root)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert processes_mentioning(str(root)) == []
    finally:
        if proc.poll() is None:
            proc.kill()
