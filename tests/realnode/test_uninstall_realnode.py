"""`helm uninstall` on the real node, with a schedule that has run: nothing of the release is left in the API, and
nothing of its pod is left on the node (containerd's containers and sandbox, the kubelet's pod directory, logs and
cgroup, kube-proxy's rules for its Service). What stays is what Helm documents as staying: the CRDs (crds/ is
never deleted) and the user's own schedules, which nothing holds (no finalizer), so their namespace still goes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cluster.kubeapi import namespaced
from tests.cluster.realnode import RealNodeCluster
from tests.realnode.support import (
    Release,
    create_schedule,
    create_vocabulary,
    eventually,
    local_volume,
    nat_rules,
    node_containers,
    run_now,
    wait_run,
)

pytestmark = pytest.mark.realnode

NAMESPACED = [
    ("apps", "deployments"), ("apps", "replicasets"), ("", "pods"), ("", "services"), ("", "serviceaccounts"),
    ("", "configmaps"), ("rbac.authorization.k8s.io", "roles"), ("rbac.authorization.k8s.io", "rolebindings"),
    ("discovery.k8s.io", "endpointslices"),
]  # fmt: skip
CLUSTER_SCOPED = [
    "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
    "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
]


def _left_in_api(cluster: RealNodeCluster, release: Release) -> list[str]:
    selector = f"app.kubernetes.io/instance={release.name}"
    left = []
    for group, plural in NAMESPACED:
        version = "v1"
        path = namespaced(release.namespace, plural, group=group, version=version)
        items = cluster.api.get(path, labelSelector=selector)["items"]
        if plural == "endpointslices":  # labelled by their Service, not by Helm
            items = cluster.api.get(path, labelSelector=f"kubernetes.io/service-name={release.name}-metrics")["items"]
        left += [f"{plural}/{i['metadata']['name']}" for i in items]
    for path in CLUSTER_SCOPED:
        left += [f"{path}/{i['metadata']['name']}" for i in cluster.api.get(path, labelSelector=selector)["items"]]
    return left


def _pod_cgroups(uid: str) -> list[Path]:
    return [p for p in Path("/sys/fs/cgroup").glob("*/kubepods/**/pod" + uid) if p.is_dir()]


def test_helm_uninstall_leaves_nothing_behind_in_the_api_or_on_the_node(
    real_cluster: RealNodeCluster, release: Release, restricted_namespace: str, tmp_path: Path
) -> None:
    ns = restricted_namespace
    local_volume(real_cluster, ns, tmp_path / "volume")
    create_vocabulary(real_cluster, ns)
    create_schedule(real_cluster, ns, "nightly", agentPath="agent", vocabularyRef={"name": "words"})
    run_now(real_cluster, ns, "nightly", "before-uninstall")
    assert wait_run(real_cluster, ns, "nightly", "before-uninstall", stop=False)["lastRun"]["result"] == "completed"

    pod = release.operator_pod()
    name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
    comment = f"{release.namespace}/{release.name}-metrics:metrics"
    # What is there before: the pod's containers, its kubelet directory, logs and cgroup, the Service's rules.
    assert {c["kind"] for c in node_containers(real_cluster) if c["pod"] == name} == {"sandbox", "container"}
    pod_dir = real_cluster.paths.kubelet_root / "pods" / uid
    logs = real_cluster.paths.pod_logs / f"{release.namespace}_{name}_{uid}"
    assert pod_dir.is_dir() and logs.is_dir() and _pod_cgroups(uid)
    assert comment in nat_rules()
    assert _left_in_api(real_cluster, release) != []

    release.uninstall()

    # helm --wait waits for what it deleted; the pod goes after it, by the garbage collector and a graceful stop.
    eventually(
        real_cluster, "nothing of the release in the API", lambda: _left_in_api(real_cluster, release) == [], 120
    )
    eventually(real_cluster, "the operator's containers and sandbox removed from containerd",
               lambda: not [c for c in node_containers(real_cluster) if c["pod"] == name], 120)  # fmt: skip
    eventually(real_cluster, "the kubelet's pod directory, logs and cgroups removed",
               lambda: not pod_dir.exists() and not logs.exists() and not _pod_cgroups(uid), 180)  # fmt: skip
    eventually(real_cluster, "kube-proxy's Service rules removed", lambda: comment not in nat_rules(), 60)
    # The schedule is the user's and stays, but nothing holds it: no finalizer a gone operator would have to remove.
    schedule = real_cluster.api.get(
        namespaced(ns, "dreamschedules", "nightly", group="dreamkeeper.io", version="v1alpha1")
    )
    assert not schedule["metadata"].get("finalizers")
