"""Finding 2 of issue 17: `helm uninstall` and `kubectl delete -f manifests/install.yaml` complete with schedules
present, with the operator running or already gone, on the real control plane (the operator installed from the
chart / the manifest, its pod run by the test node agent).

Nothing carries a finalizer only a running operator can remove: the schedules' reconcile loops are started and
stopped by watch events (kube/handlers.py), so the CRD, the schedules and their namespaces are deleted whenever
asked. Deleting the CRDs (install.yaml does) deletes every schedule of the cluster; this module puts the session's
CRDs and admission policy back afterwards for the tests that follow.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from dreamkeeper.kube import GROUP, SCHEDULE_PLURAL, VERSION, VOCABULARY_PLURAL
from tests.cluster.controlplane import free_port
from tests.cluster.fixtures import KubeCluster
from tests.cluster.kubeapi import namespaced
from tests.kube.cluster_support import install_admission, install_crds, unbound_claim
from tests.packaging import cluster_support as cs
from tests.packaging.helm import CHART, REPO, helm

pytestmark = pytest.mark.cluster

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


@pytest.fixture(scope="module")
def session_crds(kube_cluster: KubeCluster) -> Iterator[KubeCluster]:
    install_crds(kube_cluster)
    install_admission(kube_cluster)
    try:
        yield kube_cluster
    finally:
        install_crds(kube_cluster)  # install.yaml's deletion took them: the session's later tests need them
        install_admission(kube_cluster)


def _schedule_served(cluster: KubeCluster, ns: str) -> None:
    """A vocabulary and a schedule in ``ns``, seen by the operator (Ready set, ConfigMap rendered)."""
    api = cluster.api
    unbound_claim(cluster, ns, "agent-data")
    api.create(
        cs.cr_path(ns, VOCABULARY_PLURAL),
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "MemoryVocabulary", "metadata": {"name": "words"},
         "spec": {"alwaysSpecificWords": ["Rose"]}},
    )  # fmt: skip
    api.create(
        cs.cr_path(ns, SCHEDULE_PLURAL),
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DreamSchedule", "metadata": {"name": "nightly"},
         "spec": {"schedule": "0 3 1 1 *", "claimName": "agent-data", "vocabularyRef": {"name": "words"}}},
    )  # fmt: skip

    def served() -> bool:
        conditions = cs.schedule_status(cluster, ns, "nightly").get("conditions") or []
        rendered = api.get_or_none(namespaced(ns, "configmaps", "words-memvocab")) is not None
        return rendered and any(c["type"] == "Ready" for c in conditions)

    cs.poll(cluster, f"{ns}: schedule and vocabulary served", served, timeout=120)
    for plural, name in ((SCHEDULE_PLURAL, "nightly"), (VOCABULARY_PLURAL, "words")):
        assert not api.get(cs.cr_path(ns, plural, name))["metadata"].get("finalizers"), plural


def _operator_gone(cluster: KubeCluster, ns: str, deployment: str) -> None:
    """Scale the operator to zero and wait until its pod is gone: it is not there to remove anything."""
    cluster.kubectl("scale", "deployment", deployment, "-n", ns, "--replicas=0")
    cs.poll(
        cluster,
        "operator pod gone",
        lambda: (
            not cluster.api.get(namespaced(ns, "pods"), labelSelector="app.kubernetes.io/component=operator")["items"]
        ),
        timeout=90,
    )


@pytest.mark.parametrize("operator_running", [True, False], ids=["operator-running", "operator-gone"])
def test_helm_uninstall_with_schedules_present_completes(
    session_crds: KubeCluster, kube_namespace: str, operator_running: bool
) -> None:
    cluster, ns = session_crds, kube_namespace
    sets = [
        "operator.scope=namespaces",
        f"operator.metricsPort={free_port()}",
        f"operator.healthPort={free_port()}",
        "operator.pollSeconds=1",
        "rbac.aggregateToDefaultRoles=false",
        "dashboard.enabled=false",
    ]
    args = ["install", "dk", str(CHART), "--namespace", ns, "--wait", "--timeout", "2m"]
    for item in sets:
        args += ["--set", item]
    helm(*args, kubeconfig=cluster.kubeconfig)
    _schedule_served(cluster, ns)
    if not operator_running:
        _operator_gone(cluster, ns, "dk-dreamkeeper")
    helm("uninstall", "dk", "--namespace", ns, "--wait", "--timeout", "2m", kubeconfig=cluster.kubeconfig)
    # The chart keeps its CRDs (helm never deletes crds/): the schedule is still there, deletable without anybody.
    assert cluster.api.get_or_none(cs.cr_path(ns, SCHEDULE_PLURAL, "nightly")) is not None
    cluster.delete_namespace(ns, wait=True, timeout=90)


def _install_yaml(metrics_port: int, health_port: int) -> str:
    """manifests/install.yaml as committed, with the operator's ports moved off 8080/8081 (a shared machine)."""
    text = (REPO / "manifests" / "install.yaml").read_text()
    text = re.sub(r"--metrics-port=\d+", f"--metrics-port={metrics_port}", text)
    return re.sub(r"--health-port=\d+", f"--health-port={health_port}", text)


@pytest.mark.parametrize("operator_running", [True, False], ids=["operator-running", "operator-gone"])
def test_kubectl_delete_of_install_yaml_with_schedules_present_completes(
    session_crds: KubeCluster, kube_namespace: str, tmp_path: Path, operator_running: bool
) -> None:
    cluster, ns = session_crds, kube_namespace
    health = free_port()
    manifest = tmp_path / "install.yaml"
    manifest.write_text(_install_yaml(free_port(), health))
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(manifest))
    try:
        cs.poll(cluster, "operator /healthz", lambda: bool(_healthy(health)), timeout=120)
        _schedule_served(cluster, ns)
        if not operator_running:
            _operator_gone(cluster, "dreamkeeper-system", "dreamkeeper")
    finally:
        deleted = cluster.kubectl("delete", "-f", str(manifest), "--timeout=120s", check=False, timeout=180)
    assert deleted.returncode == 0, deleted.stderr
    for plural in (SCHEDULE_PLURAL, VOCABULARY_PLURAL):
        assert cluster.api.get_or_none(f"{CRD_PATH}/{plural}.{GROUP}") is None  # not left Terminating
    assert cluster.api.get_or_none("/api/v1/namespaces/dreamkeeper-system") is None
    cluster.delete_namespace(ns, wait=True, timeout=90)


def _healthy(port: int) -> str:
    try:
        return cs.http_get(f"http://127.0.0.1:{port}/healthz")
    except OSError:
        return ""
