"""Helpers for the operator's tests against the real control plane (tests/cluster): CRDs, RBAC, an agent on a
PersistentVolume holding the bundled sample, and the operator itself as a subprocess with its own kubeconfig."""

from __future__ import annotations

import json
import os
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codegen.admission import admission_binding, admission_policy
from codegen.crds import all_crds
from codegen.rbac import aggregate_rules, operator_binding, operator_role
from prometheus_client.parser import text_string_to_metric_families

from dreamkeeper.demo.sample import copy_bundled
from dreamkeeper.kube import GROUP, SCHEDULE_PLURAL, VERSION, VOCABULARY_PLURAL
from tests.cluster.controlplane import ControlPlane, free_port
from tests.cluster.kubeapi import ApiError, Obj, namespaced
from tests.cluster.procs import ManagedProcess

REPO = Path(__file__).resolve().parents[2]
DREAMKEEPER = REPO / ".venv" / "bin" / "dreamkeeper"
OPERATOR_SA = "dreamkeeper-operator"
JOB_IMAGE = "localhost/dreamkeeper:test"
# The admission policy's allowed images in these tests: the test image exactly, a tagless repository (no boundary:
# matched exactly, never as a prefix) and a registry path ending at its boundary (a prefix).
ALLOWED_IMAGES = (JOB_IMAGE, "registry.example/dreamkeeper", "registry.example/approved/")
RESTRICTED = {
    "runAsNonRoot": True,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def cr_path(namespace: str, plural: str, name: str = "") -> str:
    return namespaced(namespace, plural, name, group=GROUP, version=VERSION)


def schedule_path(namespace: str, name: str = "") -> str:
    return cr_path(namespace, SCHEDULE_PLURAL, name)


def vocabulary_path(namespace: str, name: str = "") -> str:
    return cr_path(namespace, VOCABULARY_PLURAL, name)


def install_crds(cluster: ControlPlane) -> None:
    for crd in all_crds():
        name = crd["metadata"]["name"]
        existing = cluster.api.get_or_none(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
        if existing is None:
            cluster.api.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        else:
            crd = {**crd, "metadata": {**crd["metadata"], "resourceVersion": existing["metadata"]["resourceVersion"]}}
            cluster.api.request("PUT", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}", crd)

        def established(name: str = name) -> bool:
            got = cluster.api.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
            return any(
                c["type"] == "Established" and c["status"] == "True"
                for c in got.get("status", {}).get("conditions", [])
            )

        cluster.wait_for(f"CRD {name} established", established, timeout=60)


ADMISSION_NAME = "tests.schedules.dreamkeeper.io"
EDIT_ROLE = "dreamkeeper-edit"
SYSTEM_NAMESPACES = ["kube-system", "kube-public", "kube-node-lease"]


def _apply(cluster: ControlPlane, collection: str, body: Obj) -> None:
    """Create, or replace what is there (the session's control plane may hold an older copy)."""
    path = f"{collection}/{body['metadata']['name']}"
    existing = cluster.api.get_or_none(path)
    if existing is None:
        cluster.api.create(collection, body)
    else:
        body = {**body, "metadata": {**body["metadata"], "resourceVersion": existing["metadata"]["resourceVersion"]}}
        cluster.api.request("PUT", path, body)


def install_admission(cluster: ControlPlane) -> None:
    """The generated ValidatingAdmissionPolicy, bound with its parameters, as the chart installs it; returns once
    the API server enforces it (a schedule in kube-system is refused)."""
    registration = "/apis/admissionregistration.k8s.io/v1"
    policy = admission_policy(
        ADMISSION_NAME, allowed_images=list(ALLOWED_IMAGES), excluded_namespaces=SYSTEM_NAMESPACES
    )
    _apply(cluster, f"{registration}/validatingadmissionpolicies", policy)
    binding = admission_binding(ADMISSION_NAME, ADMISSION_NAME)
    _apply(cluster, f"{registration}/validatingadmissionpolicybindings", binding)
    probe = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "DreamSchedule",
        "metadata": {"name": "admission-probe"},
        "spec": {"schedule": "@daily", "claimName": "none"},
    }

    def enforced() -> bool:
        try:
            cluster.api.request("POST", schedule_path("kube-system"), probe, params={"dryRun": "All"})
        except ApiError as exc:
            if exc.status == 403 and "not served by the dreamkeeper operator" in exc.message:
                return True
            raise AssertionError(f"not (yet) the policy's answer: {exc}") from None
        raise AssertionError("a schedule in kube-system was admitted")

    cluster.wait_for("the admission policy enforced", enforced, timeout=60)


def grant_edit_only(cluster: ControlPlane, namespace: str, user: str = "tenant") -> Obj:
    """A ServiceAccount bound only to the chart's aggregate `dreamkeeper-edit` ClusterRole; returns a JSON client
    authenticating as it (a real token: the admission policy's authorizer sees exactly this identity)."""
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    _apply(
        cluster,
        f"{rbac}/clusterroles",
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": EDIT_ROLE},
         "rules": aggregate_rules(edit=True)},
    )  # fmt: skip
    cluster.api.create(f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": user}})
    cluster.api.create(
        f"{rbac}/namespaces/{namespace}/rolebindings",
        {
            "metadata": {"name": f"{user}-{EDIT_ROLE}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": EDIT_ROLE},
            "subjects": [{"kind": "ServiceAccount", "name": user, "namespace": namespace}],
        },
    )
    return {
        "user": f"system:serviceaccount:{namespace}:{user}",
        "token": cluster.service_account_token(namespace, user),
    }


def grant_operator_rbac(cluster: ControlPlane, namespace: str) -> Path:
    """The operator's ServiceAccount with exactly the generated Role; returns a kubeconfig authenticating as it."""
    role = operator_role("dreamkeeper-operator", namespace)
    binding = operator_binding("dreamkeeper-operator", role, OPERATOR_SA, namespace, namespace)
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    cluster.api.create(f"{rbac}/namespaces/{namespace}/roles", role)
    cluster.api.create(f"{rbac}/namespaces/{namespace}/rolebindings", binding)
    return cluster.service_account_kubeconfig(namespace, OPERATOR_SA, create=True)


def pv_name_of(namespace: str, claim: str) -> str:
    """The static PV backing a test claim (a DNS-1123 name: at most 63 characters, no trailing dash)."""
    return f"pv-{namespace}-{claim}"[:63].rstrip("-")


def make_agent(
    cluster: ControlPlane,
    namespace: str,
    host_root: Path,
    *,
    claim: str = "agent-data",
    access_mode: str = "ReadWriteOnce",
    with_pod: bool = True,
    populate: Callable[[Path], Path] | None = None,
) -> Path:
    """A PV (hostPath) + bound PVC holding the bundled sample agent under agent/, and an agent pod mounting it.
    ``populate(volume_dir)`` fills the volume instead (an OpenClaw state directory at its root, say) and says where
    the agent directory is.

    Returns the host path of the agent directory (what the cycle's /data/agent maps to)."""
    volume_dir = host_root / f"{namespace}-{claim}"
    if populate is None:
        copy_bundled(volume_dir / "agent")
        agent_dir = volume_dir / "agent"
    else:
        agent_dir = populate(volume_dir)
    pv_name = pv_name_of(namespace, claim)
    cluster.create_host_volume(pv_name, volume_dir, access_modes=(access_mode,), claim=(namespace, claim))
    pvc = {
        "metadata": {"name": claim},
        "spec": {
            "accessModes": [access_mode],
            "storageClassName": "",
            "volumeName": pv_name,
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }
    cluster.api.create(namespaced(namespace, "persistentvolumeclaims"), pvc)
    cluster.wait_for(
        f"PVC {claim} bound",
        lambda: (
            cluster.api.get(namespaced(namespace, "persistentvolumeclaims", claim)).get("status", {}).get("phase")
            == "Bound"
        ),
        timeout=60,
    )
    if with_pod:
        agent_pod = {
            "metadata": {"name": "agent-0", "labels": {"app": "agent"}},
            "spec": {
                "securityContext": {
                    "runAsNonRoot": True,
                    "runAsUser": 1000,
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
                "containers": [
                    {
                        "name": "agent",
                        "image": "localhost/agent:test",
                        "command": ["python", "-c", "import time; time.sleep(3600)"],
                        "securityContext": RESTRICTED,
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                    }
                ],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
            },
        }
        cluster.api.create(namespaced(namespace, "pods"), agent_pod)
        cluster.wait_for(
            "agent pod running",
            lambda: (
                cluster.api.get(namespaced(namespace, "pods", "agent-0")).get("status", {}).get("phase") == "Running"
            ),
            timeout=90,
        )
    return agent_dir


def unbound_claim(cluster: ControlPlane, namespace: str, name: str = "agent-data", mode: str = "ReadWriteOnce") -> None:
    """A PersistentVolumeClaim no volume will bind (storage class "none"): enough for what only reads the claim."""
    cluster.api.create(
        namespaced(namespace, "persistentvolumeclaims"),
        {
            "metadata": {"name": name},
            "spec": {"accessModes": [mode], "storageClassName": "none", "resources": {"requests": {"storage": "1Gi"}}},
        },
    )


def remove_volume(cluster: ControlPlane, namespace: str, claim: str = "agent-data") -> None:
    try:
        cluster.api.delete(f"/api/v1/persistentvolumes/{pv_name_of(namespace, claim)}")
    except ApiError as exc:
        if exc.status != 404:
            raise


class OperatorProcess:
    """`dreamkeeper operator -n NS` (no namespaces: `-A`) as a subprocess, authenticated as its ServiceAccount."""

    def __init__(
        self,
        cluster: ControlPlane,
        namespaces: list[str],
        kubeconfig: Path,
        log_dir: Path,
        *extra_args: str,
        env: dict[str, str] | None = None,
        binary: Path | None = None,
    ) -> None:
        self.cluster = cluster
        self.binary = binary or DREAMKEEPER  # another checkout's executable: the scale bench's baseline
        self.extra_args = list(extra_args)  # more `dreamkeeper operator` flags (e.g. --redact-logs)
        self.env = dict(env or {})  # extra environment of the next start (e.g. a crash seam)
        self.namespaces = namespaces
        self.kubeconfig = kubeconfig
        self.log_path = log_dir / "operator.log"
        self.metrics_port = free_port()
        self.health_port = free_port()
        self.proc: ManagedProcess | None = None
        self.starts = 0

    def start(self) -> None:
        argv = [str(self.binary), "operator"]
        for ns in self.namespaces:
            argv += ["--namespace", ns]
        if not self.namespaces:
            argv.append("--all-namespaces")
        argv += [
            "--metrics-port", str(self.metrics_port), "--health-port", str(self.health_port), "--bind", "127.0.0.1",
            "--kubeconfig", str(self.kubeconfig), "--job-image", JOB_IMAGE, "--poll-seconds", "1", *self.extra_args,
        ]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        env["NO_PROXY"] = "127.0.0.1,localhost"
        env.update(self.env)
        self.starts += 1
        self.proc = ManagedProcess(f"operator-{self.starts}", argv, self.log_path, env=env, die_with_parent=True)
        self.cluster.wait_for("operator liveness", self._healthy, timeout=90)

    def _healthy(self) -> bool:
        assert self.proc is not None
        if not self.proc.alive():
            raise AssertionError(f"operator exited {self.proc.returncode()}:\n{self.proc.log_tail(60)}")
        with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/healthz", timeout=2) as response:
            return bool(response.status == 200)

    def stop(self, *, kill: bool = False) -> None:
        if self.proc is not None:
            self.proc.stop(grace=0.0 if kill else 15.0)
            self.proc = None

    def restart(self, *, kill: bool = False) -> None:
        self.stop(kill=kill)
        self.start()

    def metrics_text(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as response:
            return str(response.read().decode())

    def metric(self, name: str, **labels: str) -> float | None:
        """The value of one sample (None when the series does not exist)."""
        for family in text_string_to_metric_families(self.metrics_text()):
            for sample in family.samples:
                if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                    return float(sample.value)
        return None

    def settled_metric(
        self, name: str, expect: float | Callable[[float | None], bool] | None, timeout: float = 30.0, **labels: str
    ) -> float | None:
        """The sample once it reads ``expect`` (a value, or a predicate), else its last value after ``timeout``.

        The operator writes a schedule's status first and its metrics just after (``_after_persist``: a metric must
        never show what the apiserver refused), so a test that has just seen the status must give the metrics that
        moment; the caller still asserts the returned value, so a wrong metric fails as before."""
        matches = expect if callable(expect) else (lambda value: value == expect)
        deadline = time.monotonic() + timeout
        while True:
            value = self.metric(name, **labels)
            if matches(value) or time.monotonic() >= deadline:
                return value
            time.sleep(0.2)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def tracebacks(self) -> list[str]:
        return [line for line in self.log_text().splitlines() if "Traceback" in line]


def eventually(
    cluster: ControlPlane, what: str, probe: Callable[[], Any], timeout: float = 120.0, interval: float = 0.5
) -> Any:
    """Poll ``probe`` until it returns something truthy; return that value."""
    box: list[Any] = []

    def check() -> bool:
        value = probe()
        if value:
            box.append(value)
            return True
        return False

    cluster.wait_for(what, check, timeout=timeout, interval=interval)
    return box[-1]


def jobs_of(cluster: ControlPlane, namespace: str) -> list[Obj]:
    return list(cluster.api.get(namespaced(namespace, "jobs", group="batch"))["items"])


def events_of(cluster: ControlPlane, namespace: str, involved: str) -> list[Obj]:
    items = cluster.api.get(namespaced(namespace, "events"))["items"]
    return [e for e in items if e.get("involvedObject", {}).get("name") == involved]


def status_of(cluster: ControlPlane, namespace: str, name: str) -> Obj:
    return dict(cluster.api.get(schedule_path(namespace, name)).get("status") or {})


def settled_events(
    cluster: ControlPlane, namespace: str, involved: str, probe: Callable[[list[Obj]], bool], timeout: float = 30.0
) -> list[Obj]:
    """The object's Events once ``probe`` holds for them, else as they are after ``timeout``.

    The operator posts a pass's Events after that pass's status write (``_after_persist``), so a test that has just
    seen the status reads the Events a moment later; the caller still asserts on what is returned."""
    deadline = time.monotonic() + timeout
    while True:
        events = events_of(cluster, namespace, involved)
        if probe(events) or time.monotonic() >= deadline:
            return events
        time.sleep(0.2)


def has_reasons(*wanted: str) -> Callable[[list[Obj]], bool]:
    """A ``settled_events`` probe: every one of ``wanted`` among the Events' reasons."""
    return lambda events: set(wanted) <= {e["reason"] for e in events}


def condition_of(status: Obj, type_: str) -> Obj | None:
    return next((c for c in status.get("conditions") or [] if c["type"] == type_), None)


def release_finalizers(cluster: ControlPlane, namespace: str) -> None:
    """Teardown of a test that stopped the operator while a Stop held its agent down (the only time a schedule
    carries a finalizer, ``dreamkeeper.io/agent-stop``): clear it so the namespace deletion does not wait."""
    for plural in (SCHEDULE_PLURAL, VOCABULARY_PLURAL):
        try:
            items = cluster.api.get(cr_path(namespace, plural))["items"]
        except ApiError:
            continue
        for item in items:
            if item["metadata"].get("finalizers"):
                cluster.api.patch(
                    cr_path(namespace, plural, item["metadata"]["name"]), {"metadata": {"finalizers": None}}
                )


FAR_AWAY = "0 3 1 1 *"  # once a year: only run-now tokens start cycles in the tests that use it


@dataclass
class Env:
    """A test namespace with the operator's Role, and the operator (started by the test)."""

    cluster: ControlPlane
    ns: str
    operator: OperatorProcess
    host: Path

    def schedule(self, name: str, **spec: Any) -> dict[str, Any]:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "DreamSchedule",
            "metadata": {"name": name},
            "spec": {"schedule": FAR_AWAY, "claimName": "agent-data", **spec},
        }
        return dict(self.cluster.api.create(schedule_path(self.ns, ""), body))

    def patch_spec(self, name: str, **spec: Any) -> None:
        self.cluster.api.patch(schedule_path(self.ns, name), {"spec": spec})

    def status(self, name: str) -> dict[str, Any]:
        return status_of(self.cluster, self.ns, name)

    def wait_status(self, name: str, what: str, probe: Any, timeout: float = 180.0) -> dict[str, Any]:
        """The schedule's status once ``probe(status)`` is truthy."""

        def check() -> dict[str, Any] | None:
            status = self.status(name)
            return status if probe(status) else None

        result: dict[str, Any] = eventually(self.cluster, f"{name}: {what}", check, timeout=timeout)
        return result


def read_cycle_report(agent_dir: Path, cycle_id: str) -> Obj:
    return dict(json.loads((agent_dir / ".dreamkeeper" / "cycles" / f"{cycle_id}.json").read_text()))


def wait_seconds(seconds: float) -> None:
    time.sleep(seconds)
