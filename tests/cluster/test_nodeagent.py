"""The test node agent behaves like a kubelet where the operator's tests will rely on it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.cluster.fixtures import KubeCluster
from tests.cluster.kubeapi import Obj, namespaced

pytestmark = pytest.mark.cluster


def run_pod(cluster: KubeCluster, namespace: str, name: str, spec: Obj) -> None:
    cluster.api.create(namespaced(namespace, "pods"), {"metadata": {"name": name}, "spec": spec})


def status_of(cluster: KubeCluster, namespace: str, name: str) -> Obj:
    return dict(cluster.api.get(namespaced(namespace, "pods", name)).get("status") or {})


def wait_phase(cluster: KubeCluster, namespace: str, name: str, phase: str, timeout: float = 60) -> Obj:
    cluster.wait_for(
        f"{name} to be {phase}", lambda: status_of(cluster, namespace, name).get("phase") == phase, timeout
    )
    return status_of(cluster, namespace, name)


def container(command: str, **extra: Any) -> Obj:
    return {"name": "c", "image": "busybox", "command": ["sh", "-c", command], **extra}


def test_on_failure_restarts_with_last_state(kube_cluster: KubeCluster, kube_namespace: str) -> None:
    count = 'n=$(cat /s/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /s/n; echo "try $n" > /dev/termination-log'
    spec = {
        "restartPolicy": "OnFailure",
        "containers": [container(f'{count}; [ "$n" -ge 3 ]', volumeMounts=[{"name": "s", "mountPath": "/s"}])],
        "volumes": [{"name": "s", "emptyDir": {}}],
    }
    run_pod(kube_cluster, kube_namespace, "flaky", spec)
    status = wait_phase(kube_cluster, kube_namespace, "flaky", "Succeeded")
    state = status["containerStatuses"][0]
    assert state["restartCount"] == 2
    assert state["lastState"]["terminated"]["exitCode"] == 1
    assert state["lastState"]["terminated"]["message"] == "try 2\n"
    assert state["state"]["terminated"]["message"] == "try 3\n"


def test_deletion_sends_sigterm_and_removes_pod(kube_cluster: KubeCluster, kube_namespace: str, tmp_path: Path) -> None:
    script = "trap 'echo got-term > /out/signal; exit 0' TERM; echo up > /out/up; while true; do sleep 0.1; done"
    spec = {
        "terminationGracePeriodSeconds": 5,
        "containers": [container(script, volumeMounts=[{"name": "out", "mountPath": "/out"}])],
        "volumes": [{"name": "out", "hostPath": {"path": str(tmp_path), "type": "Directory"}}],
    }
    run_pod(kube_cluster, kube_namespace, "graceful", spec)
    wait_phase(kube_cluster, kube_namespace, "graceful", "Running")
    kube_cluster.wait_for("the container to be up", (tmp_path / "up").exists, 30)
    kube_cluster.api.delete(namespaced(kube_namespace, "pods", "graceful"))
    kube_cluster.wait_for(
        "the pod to be gone",
        lambda: kube_cluster.api.get_or_none(namespaced(kube_namespace, "pods", "graceful")) is None,
        60,
    )
    assert (tmp_path / "signal").read_text() == "got-term\n"


def test_dreamkeeper_command_runs_the_venv_console_script(kube_cluster: KubeCluster, kube_namespace: str) -> None:
    spec = {
        "restartPolicy": "Never",
        "containers": [{"name": "dk", "image": "dreamkeeper:dev", "command": ["dreamkeeper", "--help"]}],
    }
    run_pod(kube_cluster, kube_namespace, "dk", spec)
    wait_phase(kube_cluster, kube_namespace, "dk", "Succeeded")
    assert "Usage" in kube_cluster.container_log(kube_namespace, "dk", "dk")


def test_missing_secret_blocks_start_until_it_exists(kube_cluster: KubeCluster, kube_namespace: str) -> None:
    env = [{"name": "K", "valueFrom": {"secretKeyRef": {"name": "late", "key": "k"}}}]
    spec = {"restartPolicy": "Never", "containers": [container('echo "$K" > /dev/termination-log', env=env)]}
    run_pod(kube_cluster, kube_namespace, "waits", spec)

    def config_error() -> bool:
        statuses = status_of(kube_cluster, kube_namespace, "waits").get("containerStatuses") or []
        waiting = statuses[0]["state"].get("waiting", {}) if statuses else {}
        return bool(waiting.get("reason") == "CreateContainerConfigError" and "late" in waiting.get("message", ""))

    kube_cluster.wait_for("CreateContainerConfigError", config_error, 60)
    assert status_of(kube_cluster, kube_namespace, "waits")["phase"] == "Pending"
    kube_cluster.api.create(
        namespaced(kube_namespace, "secrets"), {"metadata": {"name": "late"}, "stringData": {"k": "arrived"}}
    )
    status = wait_phase(kube_cluster, kube_namespace, "waits", "Succeeded")
    assert status["containerStatuses"][0]["state"]["terminated"]["message"] == "arrived\n"


def test_start_error_and_active_deadline(kube_cluster: KubeCluster, kube_namespace: str) -> None:
    run_pod(
        kube_cluster,
        kube_namespace,
        "noexec",
        {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "command": ["/nonexistent/bin"]}]},
    )
    run_pod(
        kube_cluster,
        kube_namespace,
        "slow",
        {"restartPolicy": "Never", "activeDeadlineSeconds": 2, "containers": [container("sleep 60")]},
    )
    terminated = wait_phase(kube_cluster, kube_namespace, "noexec", "Failed")["containerStatuses"][0]["state"]
    assert (terminated["terminated"]["exitCode"], terminated["terminated"]["reason"]) == (128, "StartError")
    assert "/nonexistent/bin" in terminated["terminated"]["message"]
    slow = wait_phase(kube_cluster, kube_namespace, "slow", "Failed")
    assert slow["reason"] == "DeadlineExceeded"
    assert slow["containerStatuses"][0]["state"]["terminated"]["exitCode"] != 0
