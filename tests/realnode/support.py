"""Shared steps of the end-to-end tests on the real node (tests/cluster/realnode.py): the chart installed with its
defaults, a `local` PersistentVolume on the node holding the bundled sample agent, the caching agent as a real
Deployment of its own image, and what the node itself shows (containerd's containers, kube-proxy's rules)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dreamkeeper.demo.sample import copy_bundled
from dreamkeeper.kube import GROUP, SCHEDULE_PLURAL, VERSION, VOCABULARY_PLURAL
from tests.agents import ledger
from tests.cluster.kubeapi import ApiError, Obj, namespaced
from tests.cluster.realnode import RealNodeCluster
from tests.cluster.realnode_host import NODE_NAME
from tests.packaging.helm import CHART, helm

RESTRICTED_LABELS = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
    "pod-security.kubernetes.io/warn": "restricted",
}
RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "runAsNonRoot": True,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}
RELEASE_NAMESPACE = "dreamkeeper-system"
RELEASE = "dreamkeeper"
AGENT_UID = 1000  # the agent's user and fsGroup (its image's USER)
APPS = {"group": "apps"}


def eventually(cluster: RealNodeCluster, what: str, probe: Callable[[], Any], timeout: float = 180) -> Any:
    """Poll ``probe`` until it returns something truthy (failing at once if a node process died); return it."""
    box: list[Any] = []

    def check() -> bool:
        value = probe()
        if value:
            box.append(value)
        return bool(value)

    cluster.wait_for_node(what, check, timeout)
    return box[-1]


def restrict(cluster: RealNodeCluster, namespace: str) -> None:
    """Pod Security `restricted`, enforced by the apiserver's admission for every pod of the namespace."""
    cluster.api.patch(f"/api/v1/namespaces/{namespace}", {"metadata": {"labels": RESTRICTED_LABELS}})


# ---- the chart --------------------------------------------------------------------------------------------------


@dataclass
class Release:
    """`helm install dreamkeeper charts/dreamkeeper` with no values at all, in a namespace under `restricted`."""

    cluster: RealNodeCluster
    namespace: str = RELEASE_NAMESPACE
    name: str = RELEASE

    def helm(self, *args: str, check: bool = True, timeout: float = 600) -> str:
        return helm(*args, "--namespace", self.namespace, kubeconfig=self.cluster.kubeconfig, check=check,
                    timeout=timeout)  # fmt: skip

    def installed(self) -> bool:
        out = self.helm("status", self.name, "--output", "json", check=False)
        try:
            return bool(json.loads(out[out.index("{") :])["info"]["status"] == "deployed")
        except (ValueError, KeyError):
            return False

    def install(self) -> float:
        """Install and wait (helm --wait: the Deployment available, i.e. its pod Ready); returns the seconds."""
        api = self.cluster.api
        if api.get_or_none(f"/api/v1/namespaces/{self.namespace}") is None:
            self.cluster.create_namespace(self.namespace, labels=RESTRICTED_LABELS)
        start = time.monotonic()
        self.helm("install", self.name, str(CHART), "--wait", "--timeout", "8m")
        return time.monotonic() - start

    def ensure(self) -> Release:
        if not self.installed():
            self.install()
        self.wait_ready()
        return self

    def uninstall(self) -> None:
        self.helm("uninstall", self.name, "--wait", "--timeout", "5m")

    def operator_pod(self) -> Obj:
        pods = self.cluster.api.get(
            namespaced(self.namespace, "pods"), labelSelector=f"app.kubernetes.io/instance={self.name}"
        )["items"]
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        assert len(live) == 1, [p["metadata"]["name"] for p in pods]
        return dict(live[0])

    def wait_ready(self, timeout: float = 300) -> Obj:
        def ready() -> Obj | None:
            try:
                pod = self.operator_pod()
            except AssertionError:
                return None
            conditions = {c["type"]: c["status"] for c in pod.get("status", {}).get("conditions", [])}
            return pod if conditions.get("Ready") == "True" else None

        pod: Obj = eventually(self.cluster, "the operator pod Ready", ready, timeout)
        return pod


# ---- the agent's volume and Deployment -----------------------------------------------------------------------


def local_volume(cluster: RealNodeCluster, namespace: str, host_dir: Path, claim: str = "agent-data") -> Path:
    """A `local` PersistentVolume on the node (the kubelet applies fsGroup to it, unlike hostPath), pre-bound to
    a claim, holding the bundled sample agent under agent/ as root-owned files. Returns the agent's host dir."""
    copy_bundled(host_dir / "agent")
    host_dir.chmod(0o755)
    pv = f"pv-{namespace}-{claim}"[:63].rstrip("-")
    term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [NODE_NAME]}]}
    cluster.api.create(
        "/api/v1/persistentvolumes",
        {
            "metadata": {"name": pv, "labels": {"dreamkeeper.test/ns": namespace}},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "",
                "local": {"path": str(host_dir)},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
                "claimRef": {"namespace": namespace, "name": claim},
            },
        },
    )
    cluster.api.create(
        namespaced(namespace, "persistentvolumeclaims"),
        {
            "metadata": {"name": claim},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "",
                "volumeName": pv,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
    )

    def bound() -> bool:
        pvc = cluster.api.get(namespaced(namespace, "persistentvolumeclaims", claim))
        return bool(pvc.get("status", {}).get("phase") == "Bound")

    eventually(cluster, f"PVC {claim} bound", bound, 60)
    return host_dir / "agent"


def remove_volumes(cluster: RealNodeCluster, namespace: str) -> None:
    for pv in cluster.api.get("/api/v1/persistentvolumes", labelSelector=f"dreamkeeper.test/ns={namespace}")["items"]:
        try:
            cluster.api.delete(f"/api/v1/persistentvolumes/{pv['metadata']['name']}")
        except ApiError as exc:
            if exc.status != 404:
                raise


@dataclass
class Agent:
    """The caching agent (tests/agents/caching_agent.py) as a Deployment of its own image, as its user."""

    cluster: RealNodeCluster
    namespace: str
    agent_dir: Path
    image: str
    name: str = "rockbot"
    claim: str = "agent-data"
    ledger_dir: Path = field(init=False)

    def __post_init__(self) -> None:
        self.ledger_dir = self.agent_dir.parent / "ledger"

    @property
    def path(self) -> str:
        return namespaced(self.namespace, "deployments", self.name, **APPS)

    def create(self, replicas: int = 1) -> Agent:
        labels = {"app": self.name}
        args = ["/data/agent", "--ledger", "/data/ledger/$(POD_NAME).jsonl", "--interval", "0.1"]
        body = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": self.name, "labels": labels},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                "strategy": {"type": "Recreate"},  # one writer at a time on a ReadWriteOnce volume
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "terminationGracePeriodSeconds": 10,
                        "automountServiceAccountToken": False,
                        "securityContext": {
                            "runAsNonRoot": True,
                            "runAsUser": AGENT_UID,
                            "runAsGroup": AGENT_UID,
                            "fsGroup": AGENT_UID,
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                        "containers": [
                            {
                                "name": "agent",
                                "image": self.image,
                                "imagePullPolicy": "Never",  # imported into containerd; there is no registry
                                "args": args,
                                "env": [
                                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
                                ],
                                "securityContext": RESTRICTED_CONTAINER,
                                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                            }
                        ],
                        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": self.claim}}],
                    },
                },
            },
        }
        self.cluster.api.create(namespaced(self.namespace, "deployments", **APPS), body)
        self.wait_writing(replicas)
        return self

    def pods(self) -> list[Obj]:
        items = self.cluster.api.get(namespaced(self.namespace, "pods"), labelSelector=f"app={self.name}")["items"]
        return [p for p in items if p.get("status", {}).get("phase") not in ("Succeeded", "Failed")]

    def replicas(self) -> int:
        return int(self.cluster.api.get(self.path)["spec"].get("replicas", 1))

    def records(self) -> list[ledger.Record]:
        return ledger.read_all(self.ledger_dir) if self.ledger_dir.is_dir() else []

    def wait_writing(self, replicas: int, writes: int = 5, timeout: float = 180) -> None:
        since = datetime.now(UTC).isoformat()

        def writing() -> bool:
            running = [p for p in self.pods() if p["status"].get("phase") == "Running"]
            if len(running) != replicas:
                return False
            fresh = [r for r in ledger.writes(self.records()) if r["t"] > since]
            return replicas == 0 or len(fresh) >= writes

        eventually(self.cluster, f"{replicas} agent pod(s) running and writing", writing, timeout)

    def scale(self, replicas: int) -> None:
        """As the agent's owner would (kubectl scale): through the scale subresource."""
        self.cluster.api.patch(self.path + "/scale", {"spec": {"replicas": replicas}})

    def stop(self) -> None:
        self.scale(0)
        eventually(self.cluster, "agent pods gone", lambda: not self.pods(), 120)


# ---- schedules -------------------------------------------------------------------------------------------------


def cr_path(namespace: str, plural: str, name: str = "") -> str:
    return namespaced(namespace, plural, name, group=GROUP, version=VERSION)


def create_vocabulary(cluster: RealNodeCluster, namespace: str, name: str = "words") -> None:
    cluster.api.create(
        cr_path(namespace, VOCABULARY_PLURAL),
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "MemoryVocabulary", "metadata": {"name": name},
         "spec": {"extraCommonWords": ["briefing"], "alwaysSpecificWords": ["May", "Will", "Rose"]}},
    )  # fmt: skip


def create_schedule(cluster: RealNodeCluster, namespace: str, name: str, **spec: Any) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "DreamSchedule",
        "metadata": {"name": name},
        "spec": {"schedule": "0 3 1 1 *", "claimName": "agent-data", "safeguards": {"minIntervalHours": 0}, **spec},
    }
    cluster.api.create(cr_path(namespace, SCHEDULE_PLURAL), body)


def status(cluster: RealNodeCluster, namespace: str, name: str) -> Obj:
    return dict(cluster.api.get(cr_path(namespace, SCHEDULE_PLURAL, name)).get("status") or {})


def run_now(cluster: RealNodeCluster, namespace: str, name: str, token: str) -> None:
    cluster.api.patch(cr_path(namespace, SCHEDULE_PLURAL, name), {"spec": {"runNowToken": token}})


def wait_run(
    cluster: RealNodeCluster, namespace: str, name: str, token: str, *, stop: bool, timeout: float = 420
) -> Obj:
    """The schedule's status once the cycle for ``token`` was counted (and, with ``stop``, its agent restored)."""

    def done() -> Obj | None:
        s = status(cluster, namespace, name)
        run = s.get("lastRun") or {}
        if s.get("lastRunNowToken") != token or not run.get("jobName"):
            return None
        if stop:
            agent = s.get("agent") or {}
            if agent.get("stop") is not None or (agent.get("lastStop") or {}).get("jobName") != run["jobName"]:
                return None
        return s

    result: Obj = eventually(cluster, f"{namespace}/{name}: cycle {token} counted", done, timeout)
    return result


def condition(s: Obj, type_: str) -> Obj | None:
    return next((c for c in s.get("conditions") or [] if c["type"] == type_), None)


def events_for(cluster: RealNodeCluster, namespace: str, name: str) -> list[Obj]:
    items = cluster.api.get(namespaced(namespace, "events"))["items"]
    return [e for e in items if e.get("involvedObject", {}).get("name") == name]


def job_pod(cluster: RealNodeCluster, namespace: str, job: str) -> Obj:
    (pod,) = cluster.api.get(namespaced(namespace, "pods"), labelSelector=f"job-name={job}")["items"]
    return dict(pod)


# ---- the node itself ----------------------------------------------------------------------------------------------


def node_containers(cluster: RealNodeCluster) -> list[dict[str, str]]:
    """containerd's containers in the kubelet's namespace, with their CRI labels (pod, namespace, container)."""
    out = cluster.ctr("containers", "list", "--quiet").split()
    found = []
    for cid in out:
        info = json.loads(cluster.ctr("containers", "info", cid))
        labels = info.get("Labels") or {}
        found.append(
            {
                "id": cid,
                "pod": labels.get("io.kubernetes.pod.name", ""),
                "namespace": labels.get("io.kubernetes.pod.namespace", ""),
                "container": labels.get("io.kubernetes.container.name", ""),
                "kind": labels.get("io.cri-containerd.kind", ""),
            }
        )
    return found


def nat_rules() -> str:
    return subprocess.run(["iptables-save", "-t", "nat"], capture_output=True, text=True, check=True).stdout
