"""The real node refuses to start with a clear error naming everything this machine lacks, and every test that
needs it errors with that reason (nothing is skipped, nothing is left behind). These tests never start a node:
they run where the tools or the kernel features are missing, on purpose."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.cluster import realnode_host
from tests.cluster.realnode_host import RealNodeError, preflight
from tests.cluster.test_teardown import run_pytest, write_suite


def _machine_without_features(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    """A /proc/filesystems without overlay, a cgroup tree without controllers, no br_netfilter, no runc, no CNI."""
    root.mkdir(parents=True)
    (root / "filesystems").write_text("nodev\tsysfs\nnodev\ttmpfs\n\text4\n")
    (root / "cgroup").mkdir()
    monkeypatch.setattr(realnode_host, "PROC_FILESYSTEMS", root / "filesystems")
    monkeypatch.setattr(realnode_host, "CGROUP_ROOT", root / "cgroup")
    monkeypatch.setattr(realnode_host, "BRIDGE_NF", root / "no-br-netfilter")
    monkeypatch.setattr(realnode_host, "RUNC", root / "no-runc")
    monkeypatch.setattr(realnode_host, "CNI_BIN_DIR", root / "no-cni")


def test_preflight_names_every_missing_kernel_feature_and_tool_in_one_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _machine_without_features(monkeypatch, tmp_path / "machine")
    with pytest.raises(RealNodeError) as refused:
        preflight({"kubelet": tmp_path / "cache" / "kubelet", "containerd": tmp_path / "cache" / "containerd"})
    message = str(refused.value)
    expected = [
        "kubelet missing at", "containerd missing at", "build-node.sh",
        "runc missing at", "Debian package runc",
        "CNI plugin bridge missing", "CNI plugin host-local missing", "containernetworking-plugins",
        "no overlay filesystem", "cgroup controllers ['cpu', 'memory', 'pids'] are not mounted",
        "module br_netfilter",
    ]  # fmt: skip
    missing = [e for e in expected if e not in message]
    assert missing == [], message


def test_missing_node_tools_error_every_realnode_test_instead_of_skipping(tmp_path: Path) -> None:
    test_file = write_suite(
        tmp_path / "suite",
        """
        def test_a(real_cluster):
            pass

        def test_b(real_namespace):
            pass
        """,
    )
    result = run_pytest(test_file, {"DREAMKEEPER_CACHE": str(tmp_path / "empty-cache")}, "-rA")
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "2 errors" in out and re.search(r"\d+ skipped", out) is None, out
    assert "RealNodeError" in out and "the real test node cannot run on this machine" in out, out
    assert "kubelet missing at" in out and "make tools" in out, out
    assert list((test_file.parent / "scratch" / "state").iterdir()) == []  # no state left behind
    # Deselected as a group by its marker (and by `cluster`, which it also carries).
    for marker in ("not realnode", "not cluster"):
        deselected = run_pytest(test_file, {"DREAMKEEPER_CACHE": str(tmp_path / "empty-cache")}, "-m", marker)
        assert "2 deselected" in deselected.stdout, deselected.stdout
