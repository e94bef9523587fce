"""The caching agent as a real Deployment on the test control plane, and a watcher of who mounts its claim.

``AgentDeployment`` creates the claim (a hostPath PV holding the bundled sample under agent/) and an apps/v1
Deployment whose pod runs ``python -m tests.agents.caching_agent`` (the node agent runs it with the venv's
interpreter and maps /data to the volume's host directory), so the real Deployment and ReplicaSet controllers
and the scheduler are involved. Each agent process appends to ``ledger/<pod>.jsonl`` on the volume (outside the
agent's directory). ``ClaimWatcher`` samples the pods mounting the claim every 0.2 s: an agent pod and a cycle
pod alive in the same sample is two writers. Shared by the Stop, RestartAfter and None cluster tests.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dreamkeeper.kube import LABEL_MANAGED_BY, MANAGED_BY
from tests.agents import ledger
from tests.cluster.controlplane import ControlPlane
from tests.cluster.kubeapi import ApiError, namespaced
from tests.kube.cluster_support import REPO, OperatorProcess, eventually, make_agent, schedule_path, status_of

APPS = {"group": "apps"}
AGENT_IMAGE = "localhost/caching-agent:test"


@dataclass
class AgentDeployment:
    cluster: ControlPlane
    namespace: str
    host_root: Path
    name: str = "rockbot"
    claim: str = "agent-data"
    kind: str = "Deployment"  # or StatefulSet
    agent_dir: Path = field(init=False)
    ledger_dir: Path = field(init=False)

    def create(
        self,
        *,
        replicas: int = 1,
        mode: str = "atomic",
        interval: float = 0.1,
        hostile: bool = False,
        linger: float = 0.0,
        create_every: int = 15,
        grace_seconds: int = 10,
    ) -> AgentDeployment:
        self.agent_dir = make_agent(self.cluster, self.namespace, self.host_root, claim=self.claim, with_pod=False)
        self.ledger_dir = self.agent_dir.parent / "ledger"
        args = ["/data/agent", "--ledger", "/data/ledger/$(POD_NAME).jsonl", "--mode", mode]
        args += ["--interval", str(interval), "--create-every", str(create_every), "--linger", str(linger)]
        if hostile:
            args.append("--hostile")
        labels = {"app": self.name}
        # One writer at a time on a ReadWriteOnce volume: Recreate (a Deployment), Parallel pods (a StatefulSet).
        rollout: dict[str, Any] = (
            {"strategy": {"type": "Recreate"}}
            if self.kind == "Deployment"
            else {"serviceName": self.name, "podManagementPolicy": "Parallel"}
        )
        body = {
            "apiVersion": "apps/v1",
            "kind": self.kind,
            "metadata": {"name": self.name, "labels": labels},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                **rollout,
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "terminationGracePeriodSeconds": grace_seconds,
                        "automountServiceAccountToken": False,
                        "securityContext": {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000},
                        "containers": [
                            {
                                "name": "agent",
                                "image": AGENT_IMAGE,
                                "command": ["python", "-m", "tests.agents.caching_agent"],
                                "args": args,
                                "env": [
                                    {"name": "PYTHONPATH", "value": str(REPO)},
                                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                                ],
                                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                            }
                        ],
                        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": self.claim}}],
                    },
                },
            },
        }
        self.cluster.api.create(namespaced(self.namespace, self.plural, **APPS), body)
        self.wait_writing(replicas)
        return self

    # ---- reading it -----------------------------------------------------------------------------------------

    @property
    def plural(self) -> str:
        return "deployments" if self.kind == "Deployment" else "statefulsets"

    @property
    def path(self) -> str:
        return namespaced(self.namespace, self.plural, self.name, **APPS)

    def get(self) -> dict[str, Any]:
        return self.cluster.api.get(self.path)

    def replicas(self) -> int:
        return int(self.get()["spec"].get("replicas", 1))

    def replica_changes(self) -> int:
        """How often the replicas were changed: the generation of the Deployment's ReplicaSet, which moves with its
        spec only (the Deployment's own generation also moves with its annotations, our stop record among them).
        One ReplicaSet: the pod template never changes in these tests."""
        path = namespaced(self.namespace, "replicasets", **APPS)
        (replica_set,) = self.cluster.api.get(path, labelSelector=f"app={self.name}")["items"]
        return int(replica_set["metadata"]["generation"])

    def annotations(self) -> dict[str, str]:
        return dict(self.get()["metadata"].get("annotations") or {})

    def pods(self) -> list[dict[str, Any]]:
        items = self.cluster.api.get(namespaced(self.namespace, "pods"), labelSelector=f"app={self.name}")["items"]
        return [p for p in items if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]

    def records(self) -> list[ledger.Record]:
        return ledger.read_all(self.ledger_dir) if self.ledger_dir.is_dir() else []

    def writes_since(self, moment: datetime) -> int:
        stamp = moment.isoformat()
        return sum(1 for r in ledger.writes(self.records()) if r["t"] > stamp)

    def wait_writing(self, replicas: int, *, writes: int = 5, timeout: float = 120) -> None:
        """``replicas`` agent processes started after now and each wrote at least ``writes`` times."""
        since = datetime.now(UTC).isoformat()

        def writing() -> bool:
            running = [p for p in self.pods() if p["status"].get("phase") == "Running"]
            if len(running) != replicas:
                return False
            counts: dict[str, int] = {}
            for r in ledger.writes(self.records()):
                if r["t"] > since:
                    counts[r["pod"]] = counts.get(r["pod"], 0) + 1
            return replicas == 0 or sum(1 for n in counts.values() if n >= writes) >= replicas

        eventually(self.cluster, f"{replicas} agent(s) writing", writing, timeout=timeout)

    def scale(self, replicas: int) -> None:
        """As the agent's owner would (kubectl scale): through the scale subresource."""
        self.cluster.api.patch(self.path + "/scale", {"spec": {"replicas": replicas}})

    def stop_and_wait(self, timeout: float = 90) -> None:
        self.scale(0)
        eventually(self.cluster, "agent pods gone", lambda: not self.pods(), timeout=timeout)

    def delete(self) -> None:
        try:
            self.cluster.api.delete(self.path, propagationPolicy="Foreground")
        except ApiError as exc:
            if exc.status != 404:
                raise


@dataclass(frozen=True)
class Sample:
    at: datetime
    agents: tuple[str, ...]  # agent pods mounting the claim, not finished
    running_agents: tuple[str, ...]
    cycles: tuple[str, ...]  # cycle pods mounting the claim, not finished


class ClaimWatcher(threading.Thread):
    """Samples the pods that mount the claim until stopped."""

    def __init__(self, cluster: ControlPlane, namespace: str, claim: str, interval: float = 0.2) -> None:
        super().__init__(name="claim-watcher", daemon=True)
        self.cluster, self.namespace, self.claim, self.interval = cluster, namespace, claim, interval
        self.samples: list[Sample] = []
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            try:
                pods = self.cluster.api.get(namespaced(self.namespace, "pods"))["items"]
            except Exception:  # an apiserver hiccup: the next sample
                time.sleep(self.interval)
                continue
            agents, running, cycles = [], [], []
            for pod in pods:
                phase = (pod.get("status") or {}).get("phase")
                volumes = pod["spec"].get("volumes") or []
                claims = {(v.get("persistentVolumeClaim") or {}).get("claimName") for v in volumes}
                if self.claim not in claims or phase in ("Succeeded", "Failed"):
                    continue
                name = pod["metadata"]["name"]
                if (pod["metadata"].get("labels") or {}).get(LABEL_MANAGED_BY) == MANAGED_BY:
                    cycles.append(name)
                else:
                    agents.append(name)
                    if phase == "Running":
                        running.append(name)
            self.samples.append(Sample(datetime.now(UTC), tuple(agents), tuple(running), tuple(cycles)))
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()
        if self.ident is not None:  # started
            self.join(timeout=5)

    def two_writers(self) -> list[Sample]:
        return [s for s in self.samples if s.agents and s.cycles]

    def cycles_seen(self) -> int:
        """Distinct cycle pods seen (each ran while sampled)."""
        return len({name for s in self.samples for name in s.cycles})

    def outages(self) -> list[float]:
        """Seconds from the last sample with an agent pod running to the next one (each Stop's downtime as the
        agent's users see it: no agent process serving)."""
        out, down_since = [], None
        for s in self.samples:
            if not s.running_agents and down_since is None:
                down_since = s.at
            elif s.running_agents and down_since is not None:
                out.append((s.at - down_since).total_seconds())
                down_since = None
        return out


@dataclass
class AgentEnv:
    """A namespace with the operator's Role, the operator (not started), a caching agent (not created) and a
    watcher of its claim (not started): what every spec.agent cluster test starts from (fixture ``agent_env``)."""

    cluster: ControlPlane
    ns: str
    operator: OperatorProcess
    agent: AgentDeployment
    watcher: ClaimWatcher

    def schedule(self, coordination: str = "Stop", kind: str = "Deployment", **agent: Any) -> None:
        """The schedule ``nightly`` on the agent's claim, run by runNowToken only (its cron is a year away)."""
        body = {
            "apiVersion": "dreamkeeper.io/v1alpha1",
            "kind": "DreamSchedule",
            "metadata": {"name": "nightly"},
            "spec": {
                "schedule": "0 3 1 1 *",
                "claimName": self.agent.claim,
                "safeguards": {"minIntervalHours": 0},
                "agent": {
                    "workloadRef": {"kind": kind, "name": self.agent.name},
                    "coordination": coordination,
                    **agent,
                },
            },
        }
        self.cluster.api.create(schedule_path(self.ns, ""), body)

    def status(self) -> dict[str, Any]:
        return status_of(self.cluster, self.ns, "nightly")

    def run_now(self, token: str) -> None:
        self.cluster.api.patch(schedule_path(self.ns, "nightly"), {"spec": {"runNowToken": token}})

    def wait_status(self, what: str, probe: Any, timeout: float = 240) -> dict[str, Any]:
        """The status once ``probe(status)`` is truthy."""

        def check() -> dict[str, Any] | None:
            status = self.status()
            return status if probe(status) else None

        result: dict[str, Any] = eventually(self.cluster, what, check, timeout=timeout)
        return result
