"""spec.agent against the in-memory API server, with the controllers a Stop relies on played between passes.

`World` plays the ReplicaSet controller (agent pods follow spec.replicas; a removed pod terminates for a few
ticks), the Job controller and the kubelet (a cycle pod runs for a few ticks, then the Job completes or fails).
`WatchedCluster` checks the two safety rules on every call: no cycle Job is created while a pod mounts the claim,
and the replicas are never raised while a cycle Job is active or its pod still mounts the claim. A crash is an
exception raised right after the N-th write succeeded; the reconciler is then replaced (a new operator process),
for every N, so every instant between two API calls is a crash point.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from dreamkeeper.consolidation.report import CycleReport
from dreamkeeper.kube import (
    ANNOTATION_AGENT_STOP,
    ANNOTATION_AGENT_STOPPED,
    ANNOTATION_RESTARTED_AT,
    FINALIZER_AGENT_STOP,
    LABEL_MANAGED_BY,
    MANAGED_BY,
)
from dreamkeeper.kube.metrics import OperatorMetrics
from dreamkeeper.kube.reconcile import ReconcileSettings, ScheduleReconciler
from dreamkeeper.kube.results import job_active
from tests.kube.fakes import FakeCluster, Obj

NS = "agents"
T0 = datetime(2026, 3, 1, 4, 0, tzinfo=UTC)
CLAIM = "agent-data"
AGENT = {"workloadRef": {"kind": "Deployment", "name": "rockbot"}}


class Crashed(Exception):
    """The operator process died right after an API call succeeded."""


WRITES = ("patch_schedule_status", "create_job", "patch_job", "delete_job", "patch_workload", "scale_workload")


class WatchedCluster(FakeCluster):
    def __init__(self) -> None:
        super().__init__()
        self.crash_after: int | None = None
        self.writes = 0
        self.violations: list[str] = []
        self.scales: list[int] = []

    def __getattribute__(self, name: str) -> Any:
        attr = super().__getattribute__(name)
        if name in WRITES:

            def call(*args: Any, **kwargs: Any) -> Any:
                result = attr(*args, **kwargs)
                self.writes += 1
                if self.crash_after is not None and self.writes == self.crash_after:
                    self.crash_after = None
                    raise Crashed(f"after write #{self.writes} ({name})")
                return result

            return call
        return attr

    def claim_users(self) -> tuple[list[str], list[str]]:
        agents, cycles = [], []
        for pod in self.of_kind("Pod", NS):
            if pod["status"].get("phase") in ("Succeeded", "Failed"):
                continue
            if not any(
                (v.get("persistentVolumeClaim") or {}).get("claimName") == CLAIM for v in pod["spec"]["volumes"]
            ):
                continue
            ours = (pod["metadata"].get("labels") or {}).get(LABEL_MANAGED_BY) == MANAGED_BY
            (cycles if ours else agents).append(pod["metadata"]["name"])
        return agents, cycles

    def create_job(self, namespace: str, body: Obj) -> Obj:
        agents, cycles = self.claim_users()
        if agents or cycles:
            self.violations.append(f"Job {body['metadata']['name']} created while {agents + cycles} mount the claim")
        return super().create_job(namespace, body)

    def scale_workload(self, namespace: str, kind: str, name: str, replicas: int) -> Obj:
        if replicas > 0:
            active = [j["metadata"]["name"] for j in self.of_kind("Job", NS) if job_active(j)]
            _, cycles = self.claim_users()
            if active or cycles:
                self.violations.append(f"{name} scaled to {replicas} while {active + cycles} run")
        self.scales.append(replicas)
        return super().scale_workload(namespace, kind, name, replicas)


def report(**counts: Any) -> str:
    return CycleReport(
        cycle_id="c-1", started_at=T0, finished_at=T0 + timedelta(seconds=5), result="completed", **counts
    ).summary_json()


@dataclass
class World:
    """The controllers and the node, one tick per second of the fake clock."""

    c: WatchedCluster
    grace_ticks: int = 2  # a deleted agent pod keeps running (SIGTERM, finishing its write) this long
    cycle_ticks: int = 3
    outcome: Callable[[World, str], None] | None = None  # how a cycle ends (default: completes with changes)
    now: datetime = T0
    ages: dict[str, int] = field(default_factory=dict)
    overlaps: int = 0
    serial: int = 0

    def _pod(self, name: str, labels: dict[str, str], **spec: Any) -> None:
        self.c.put(
            "Pod",
            {
                "metadata": {"name": name, "namespace": NS, "labels": labels},
                "spec": {
                    "nodeName": "node-a",
                    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": CLAIM}}],
                    **spec,
                },
                "status": {"phase": "Running"},
            },
        )

    def tick(self) -> None:
        self.now += timedelta(seconds=1)
        self.c.now = self.now
        self._replica_set()
        self._jobs()
        agents, cycles = self.c.claim_users()
        if agents and cycles:
            self.overlaps += 1

    def _replica_set(self) -> None:
        deployment = self.c.get("Deployment", NS, "rockbot")
        if deployment is None:
            return
        wanted = deployment["spec"].get("replicas", 1)
        pods = sorted(
            p["metadata"]["name"] for p in self.c.of_kind("Pod", NS) if p["metadata"]["labels"].get("app") == "rockbot"
        )
        live = [n for n in pods if not self.c.objects[("Pod", NS, n)]["metadata"].get("deletionTimestamp")]
        for name in live[wanted:]:  # scale-down: mark terminating; the pod stops after its grace
            self.c.objects[("Pod", NS, name)]["metadata"]["deletionTimestamp"] = "now"
            self.ages[name] = 0
        for name in [n for n in pods if n not in live or n in live[wanted:]]:
            self.ages[name] = self.ages.get(name, 0) + 1
            if self.ages[name] > self.grace_ticks:
                del self.c.objects[("Pod", NS, name)]
        for _ in range(wanted - min(wanted, len(live))):
            self.serial += 1
            self._pod(f"rockbot-{self.serial}", {"app": "rockbot"}, securityContext={"runAsUser": 1000})

    def _jobs(self) -> None:
        for job in self.c.of_kind("Job", NS):
            name = job["metadata"]["name"]
            pod = f"{name}-pod"
            if not job_active(job):
                if ("Pod", NS, pod) in self.c.objects:
                    self.c.objects[("Pod", NS, pod)]["status"]["phase"] = "Succeeded"
                continue
            if ("Pod", NS, pod) not in self.c.objects:
                self._pod(
                    pod, {LABEL_MANAGED_BY: MANAGED_BY, "batch.kubernetes.io/controller-uid": job["metadata"]["uid"]}
                )
                self.ages[pod] = 0
                continue
            self.ages[pod] += 1
            if self.ages[pod] >= self.cycle_ticks:
                del self.c.objects[("Pod", NS, pod)]  # finish_job publishes its own terminated pod
                (self.outcome or _completes)(self, name)


def _completes(world: World, job: str) -> None:
    world.c.finish_job(NS, job, message=report(archived=3, saved=1, reviewed=6))


def setup(replicas: int = 2, **agent: Any) -> tuple[WatchedCluster, World]:
    c = WatchedCluster()
    c.now = T0
    c.put(
        "PersistentVolumeClaim",
        {"metadata": {"name": CLAIM, "namespace": NS}, "spec": {"accessModes": ["ReadWriteOnce"]}},
    )
    c.put(
        "Deployment",
        {
            "metadata": {"name": "rockbot", "namespace": NS},
            "spec": {
                "replicas": replicas,
                "template": {
                    "spec": {
                        "securityContext": {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 2000},
                        "tolerations": [{"key": "agents", "operator": "Exists"}],
                    }
                },
            },
        },
    )
    c.put(
        "DreamSchedule",
        {
            "apiVersion": "dreamkeeper.io/v1alpha1",
            "kind": "DreamSchedule",
            "metadata": {"name": "nightly", "namespace": NS},
            "spec": {
                "schedule": "0 3 1 1 *",
                "claimName": CLAIM,
                "runNowToken": "a",
                "agent": {**AGENT, **agent},
            },
        },
    )
    world = World(c)
    for _ in range(replicas):
        world.tick()  # the agent's pods are up before the operator starts
    return c, world


def reconciler(c: FakeCluster, world: World) -> ScheduleReconciler:
    return ScheduleReconciler(
        c, OperatorMetrics(CollectorRegistry()), settings=ReconcileSettings(), clock=lambda: world.now
    )


def status(c: FakeCluster) -> dict[str, Any]:
    body = c.get_schedule(NS, "nightly")
    assert body is not None
    return dict(body.get("status") or {})


def deployment(c: FakeCluster) -> Obj:
    obj = c.get("Deployment", NS, "rockbot")
    assert obj is not None
    return obj


def drive(
    c: WatchedCluster, world: World, *, until: Callable[[], bool], ticks: int = 120, settle: int = 15
) -> ScheduleReconciler:
    """Passes (one per tick) until ``until()``, then ``settle`` more (nothing may start again); a crash replaces
    the reconciler, as a restarted operator."""
    r = reconciler(c, world)
    left: int | None = None
    for _ in range(ticks):
        body = c.get_schedule(NS, "nightly")
        assert body is not None
        try:
            r.reconcile(body)
        except Crashed:
            r = reconciler(c, world)  # a fresh process: no memory of the pass it died in
        world.tick()
        if left is None and until():
            left = settle
        if left is not None:
            if left == 0:
                return r
            left -= 1
    raise AssertionError(f"not done after {ticks} ticks: {status(c).get('agent')}")


def _passes(c: FakeCluster, world: World, r: ScheduleReconciler, n: int) -> None:
    """``n`` reconcile passes, one per tick."""
    for _ in range(n):
        body = c.get_schedule(NS, "nightly")
        assert body is not None
        r.reconcile(body)
        world.tick()


def _collect_garbage(c: FakeCluster) -> None:
    """The garbage collector: a deleted Job's pod goes too."""
    jobs = {j["metadata"]["name"] for j in c.of_kind("Job", NS)}
    for pod in c.of_kind("Pod", NS):
        name = pod["metadata"]["name"]
        if name.endswith("-pod") and name[: -len("-pod")] not in jobs:
            del c.objects[("Pod", NS, name)]


def released() -> Callable[[WatchedCluster], bool]:
    def check(c: WatchedCluster) -> bool:
        s = status(c)
        return (s.get("agent") or {}).get("stop") is None and "lastStop" in (s.get("agent") or {})

    return check


def _done(c: WatchedCluster) -> Callable[[], bool]:
    check = released()
    return lambda: check(c) and (status(c).get("totals") or {}).get("cyclesCompleted", 0) >= 1


# ---- Stop ------------------------------------------------------------------------------------------------------


def test_stop_records_scales_down_runs_the_cycle_unpinned_and_restores() -> None:
    c, world = setup(replicas=2)
    generation = deployment(c)["metadata"]["generation"]
    r = drive(c, world, until=_done(c))
    s = status(c)
    assert c.violations == [] and world.overlaps == 0
    assert deployment(c)["spec"]["replicas"] == 2
    assert deployment(c)["metadata"]["generation"] == generation + 2  # one scale-down, one restore
    assert c.scales == [0, 2]
    assert ANNOTATION_AGENT_STOP not in (deployment(c)["metadata"].get("annotations") or {})
    last = s["agent"]["lastStop"]
    assert (last["replicas"], last["reason"]) == (2, "CycleFinished") and last["downtimeSeconds"] > 0
    (job,) = c.of_kind("Job", NS)
    pod_spec = job["spec"]["template"]["spec"]
    assert "affinity" not in pod_spec  # nothing to pin to: the agent is down
    assert pod_spec["securityContext"]["runAsUser"] == 1000 and pod_spec["securityContext"]["fsGroup"] == 2000
    assert pod_spec["tolerations"] == [{"key": "agents", "operator": "Exists"}]
    assert job["metadata"]["annotations"][ANNOTATION_AGENT_STOPPED] == "Deployment/rockbot"
    assert job["spec"]["activeDeadlineSeconds"] <= 1800  # within maxDowntimeSeconds
    stopped = next(x for x in s["conditions"] if x["type"] == "AgentStopped")
    assert (stopped["status"], stopped["reason"]) == ("False", "CycleFinished")
    reasons = c.reasons()
    for reason in ("AgentStopping", "AgentScaledDown", "CycleStarted", "AgentRestored"):
        assert reason in reasons, reasons
    assert reasons.index("AgentScaledDown") < reasons.index("CycleStarted") < reasons.index("AgentRestored")
    ident = {"dreamschedule": "nightly", "dreamschedule_namespace": NS}
    m = r.metrics.registry
    assert m.get_sample_value("dreamkeeper_agent_downtime_seconds_count", ident) == 1
    assert m.get_sample_value("dreamkeeper_agent_stopped", ident) == 0


def test_the_record_is_persisted_on_the_workload_and_in_the_status_before_any_scale_down() -> None:
    c, world = setup(replicas=3)
    seen: list[tuple[bool, bool, int]] = []
    original = c.scale_workload

    def scale(namespace: str, kind: str, name: str, replicas: int) -> Obj:
        if replicas == 0:
            stop = (status(c).get("agent") or {}).get("stop") or {}
            annotation = (deployment(c)["metadata"].get("annotations") or {}).get(ANNOTATION_AGENT_STOP, "")
            seen.append((stop.get("replicas") == 3, '"replicas":3' in annotation, deployment(c)["spec"]["replicas"]))
        return original(namespace, kind, name, replicas)

    c.scale_workload = scale  # type: ignore[method-assign]
    drive(c, world, until=_done(c))
    assert seen and all(s[:2] == (True, True) for s in seen), seen


def _write_count(until: Callable[[WatchedCluster], Callable[[], bool]], **agent: Any) -> int:
    """How many writes a whole run makes without a crash: each is a crash point."""
    c, world = setup(**agent)
    drive(c, world, until=until(c))
    return c.writes


@pytest.mark.parametrize("crash_after", range(1, _write_count(_done) + 1))
def test_a_crash_after_any_write_restores_the_agent_exactly_once(crash_after: int) -> None:
    c, world = setup(replicas=2)
    c.crash_after = crash_after
    generation = deployment(c)["metadata"]["generation"]
    drive(c, world, until=_done(c), ticks=200)
    assert c.crash_after is None, "the crash point was never reached"
    assert c.violations == [] and world.overlaps == 0
    assert deployment(c)["spec"]["replicas"] == 2
    assert deployment(c)["metadata"]["generation"] == generation + 2, c.scales
    assert len(c.of_kind("Job", NS)) == 1
    s = status(c)
    assert s["totals"]["cyclesCompleted"] == 1 and len(s["countedJobUIDs"]) == 1
    assert ANNOTATION_AGENT_STOP not in (deployment(c)["metadata"].get("annotations") or {})
    assert s["lastRunNowToken"] == "a" and "RunNowDeferred" not in c.reasons()  # the request was handled once


def _fails(world: World, job: str) -> None:
    world.c.finish_job(NS, job, succeeded=False, reason="DeadlineExceeded", message='{"result":"failed"}')


def _deleted(world: World, job: str) -> None:
    del world.c.objects[("Job", NS, job)]


@pytest.mark.parametrize(
    ("outcome", "reason", "counted"),
    [(_fails, "CycleFinished", "cyclesFailed"), (_deleted, "CycleLost", "cyclesFailed")],
)
def test_a_failed_or_deleted_cycle_still_restores(outcome: Any, reason: str, counted: str) -> None:
    c, world = setup(replicas=1)
    world.outcome = outcome
    drive(c, world, until=lambda: released()(c) and (status(c).get("totals") or {}).get(counted, 0) >= 1)
    assert c.violations == [] and deployment(c)["spec"]["replicas"] == 1
    assert status(c)["agent"]["lastStop"]["reason"] == reason


def test_an_agent_that_does_not_stop_in_time_is_restored_and_no_cycle_runs() -> None:
    c, world = setup(replicas=1, scaleDownTimeoutSeconds=10, maxDowntimeSeconds=60)
    world.grace_ticks = 1000  # the pod never terminates
    drive(c, world, until=lambda: released()(c))
    s = status(c)
    assert c.of_kind("Job", NS) == [] and c.violations == []
    assert s["agent"]["lastStop"]["reason"] == "ScaleDownTimedOut"
    assert deployment(c)["spec"]["replicas"] == 1
    assert "AgentRestored" in c.reasons()
    restored = next(e for e in c.events if e["reason"] == "AgentRestored")
    assert restored["type"] == "Warning" and "cycle not run" in restored["message"]


def test_a_pod_outside_the_workload_mounting_the_claim_keeps_the_cycle_from_starting() -> None:
    c, world = setup(replicas=1, scaleDownTimeoutSeconds=15, maxDowntimeSeconds=60)
    world._pod("debug-shell", {"app": "debug"})
    drive(c, world, until=lambda: released()(c))
    assert c.of_kind("Job", NS) == [] and status(c)["agent"]["lastStop"]["reason"] == "ScaleDownTimedOut"


def test_the_cycle_deadline_is_cut_to_the_downtime_left() -> None:
    c, world = setup(replicas=1, scaleDownTimeoutSeconds=30, maxDowntimeSeconds=100)
    world.grace_ticks = 10
    drive(c, world, until=_done(c))
    (job,) = c.of_kind("Job", NS)
    assert 60 <= job["spec"]["activeDeadlineSeconds"] <= 100 - 10


def test_a_second_run_now_during_a_stop_waits_for_it() -> None:
    c, world = setup(replicas=1)
    r = reconciler(c, world)
    for _ in range(3):
        body = c.get_schedule(NS, "nightly")
        assert body is not None
        r.reconcile(body)
        world.tick()
    assert (status(c).get("agent") or {}).get("stop") is not None
    c.edit_spec("DreamSchedule", NS, "nightly", runNowToken="b")
    drive(c, world, until=lambda: released()(c) and status(c).get("lastRunNowToken") == "b" and released()(c))
    drive(c, world, until=lambda: (status(c).get("totals") or {}).get("cyclesCompleted", 0) >= 2 and released()(c))
    assert len(c.of_kind("Job", NS)) == 2 and c.violations == [] and world.overlaps == 0
    assert "RunNowDeferred" in c.reasons()
    assert deployment(c)["spec"]["replicas"] == 1


def test_a_missing_workload_makes_the_schedule_not_ready() -> None:
    c, world = setup(replicas=1)
    del c.objects[("Deployment", NS, "rockbot")]
    r = reconciler(c, world)
    body = c.get_schedule(NS, "nightly")
    assert body is not None
    r.reconcile(body)
    ready = next(x for x in status(c)["conditions"] if x["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "WorkloadNotFound")
    assert c.of_kind("Job", NS) == []


def test_a_stop_record_lost_from_the_status_while_its_cycle_runs_is_adopted_from_the_workload() -> None:
    """The status reset by hand while the cycle Job runs: the annotation names a Job the operator created for this
    schedule, for the slot it says, so it is adopted and the agent comes back once the cycle ends."""
    c, world = setup(replicas=1)
    r = reconciler(c, world)
    for _ in range(30):
        _passes(c, world, r, 1)
        if c.of_kind("Job", NS):
            break
    assert c.of_kind("Job", NS) and deployment(c)["spec"]["replicas"] == 0
    schedule = c.objects[("DreamSchedule", NS, "nightly")]
    schedule["status"].pop("agent")  # someone reset the status
    drive(c, world, until=_done(c))
    assert deployment(c)["spec"]["replicas"] == 1 and c.violations == []
    assert "StopRecordIgnored" not in c.reasons()


def test_a_stop_record_whose_cycle_never_started_is_removed_and_quoted_never_acted_on() -> None:
    """Issue 21: the status is the record. Reset by hand before the cycle Job exists, the annotation is
    indistinguishable from a forgery: removed with a Warning Event that quotes it (its replicas, for whoever reset
    the status), never scaled from, and lastScheduleTime does not move."""
    c, world = setup(replicas=1)
    r = reconciler(c, world)
    _passes(c, world, r, 4)  # recorded and scaled down
    assert deployment(c)["spec"]["replicas"] == 0
    annotation = deployment(c)["metadata"]["annotations"][ANNOTATION_AGENT_STOP]
    schedule = c.objects[("DreamSchedule", NS, "nightly")]
    schedule["status"].pop("agent")  # someone reset the status
    before = status(c).get("lastScheduleTime")
    c.edit_spec("DreamSchedule", NS, "nightly", suspend=True)  # a full pass, and no new stop
    _passes(c, world, reconciler(c, world), 3)
    assert ANNOTATION_AGENT_STOP not in (deployment(c)["metadata"].get("annotations") or {})
    (ignored,) = [e for e in c.events if e["reason"] == "StopRecordIgnored"]
    assert ignored["type"] == "Warning" and annotation[:200] in ignored["message"]
    assert deployment(c)["spec"]["replicas"] == 0 and c.of_kind("Job", NS) == []  # nothing acted on it
    assert status(c).get("lastScheduleTime") == before


# ---- RestartAfter and None ---------------------------------------------------------------------------------------


def _restarts(c: FakeCluster) -> str | None:
    template = deployment(c)["spec"]["template"]
    return ((template.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_RESTARTED_AT)


def _restarted(c: WatchedCluster) -> Callable[[], bool]:
    return lambda: bool((status(c).get("agent") or {}).get("lastRestart"))


@pytest.mark.parametrize(
    "crash_after", [None, *range(1, _write_count(_restarted, replicas=1, coordination="RestartAfter") + 1)]
)
def test_restart_after_a_cycle_that_changed_files_exactly_once(crash_after: int | None) -> None:
    c, world = setup(replicas=1, coordination="RestartAfter")
    c.crash_after = crash_after
    generation = deployment(c)["metadata"]["generation"]
    drive(c, world, until=_restarted(c))
    assert _restarts(c) is not None
    assert deployment(c)["metadata"]["generation"] == generation + 1  # one rollout
    assert c.scales == [] and deployment(c)["spec"]["replicas"] == 1
    restart = status(c)["agent"]["lastRestart"]
    assert restart["windowSeconds"] >= 0 and restart["jobName"] == c.of_kind("Job", NS)[0]["metadata"]["name"]
    job = c.of_kind("Job", NS)[0]
    assert "affinity" in job["spec"]["template"]["spec"]  # beside the agent: pinned to its node
    if crash_after is None:  # Events follow the status write; a crash right after it loses them (best effort)
        assert "AgentRestarted" in c.reasons()
    for _ in range(5):
        body = c.get_schedule(NS, "nightly")
        assert body is not None
        reconciler(c, world).reconcile(body)
    assert deployment(c)["metadata"]["generation"] == generation + 1


def test_the_stale_window_runs_from_the_cycles_first_write_not_its_start() -> None:
    c, world = setup(replicas=1, coordination="RestartAfter")
    first_write = T0 + timedelta(seconds=4)
    world.outcome = lambda w, job: w.c.finish_job(NS, job, message=report(archived=1, first_write_at=first_write))
    drive(c, world, until=_restarted(c))
    restart = status(c)["agent"]["lastRestart"]
    restarted = datetime.fromisoformat(restart["restartedAt"].replace("Z", "+00:00"))
    assert restart["firstWriteAt"] and restart["windowSeconds"] == (restarted - first_write).total_seconds()
    assert "since its first write" in " ".join(e["message"] for e in c.events if e["reason"] == "AgentRestarted")


def test_no_restart_after_a_cycle_that_changed_nothing() -> None:
    c, world = setup(replicas=1, coordination="RestartAfter")
    world.outcome = lambda w, job: w.c.finish_job(NS, job, message=report())
    drive(c, world, until=lambda: (status(c).get("totals") or {}).get("cyclesCompleted", 0) >= 1)
    for _ in range(3):
        body = c.get_schedule(NS, "nightly")
        assert body is not None
        reconciler(c, world).reconcile(body)
    assert _restarts(c) is None and "lastRestart" not in (status(c).get("agent") or {})


def test_none_leaves_the_workload_alone() -> None:
    c, world = setup(replicas=1, coordination="None")
    drive(c, world, until=lambda: (status(c).get("totals") or {}).get("cyclesCompleted", 0) >= 1)
    assert not [call for call in c.calls if call.startswith(("scale", "patch_workload"))]
    assert _restarts(c) is None


# ---- the schedule is deleted mid-stop ------------------------------------------------------------------------


@pytest.mark.parametrize("ticks", [2, 4, 7])  # recorded / scaled down / cycle running
def test_deleting_the_schedule_mid_stop_ends_the_cycle_and_restores_the_agent(ticks: int) -> None:
    c, world = setup(replicas=2)
    world.cycle_ticks = 100  # the cycle would run long
    r = reconciler(c, world)
    _passes(c, world, r, ticks)
    assert (status(c).get("agent") or {}).get("stop") is not None
    for _ in range(20):  # the operator retries the release until it succeeds
        body = c.get_schedule(NS, "nightly")
        assert body is not None
        if reconciler(c, world).release_agent(body):
            break
        world.tick()
        _collect_garbage(c)  # the garbage collector follows the Job's deletion: its pod goes
    else:
        raise AssertionError("never released")
    assert deployment(c)["spec"]["replicas"] == 2 and c.violations == []
    assert ANNOTATION_AGENT_STOP not in (deployment(c)["metadata"].get("annotations") or {})
    assert [j for j in c.of_kind("Job", NS) if job_active(j)] == []
    assert "AgentRestored" in c.reasons()
    assert reconciler(c, world).release_agent(c.get_schedule(NS, "nightly") or {}) is True  # idempotent
    assert deployment(c)["spec"]["replicas"] == 2 and c.scales.count(2) <= 1


def test_deleting_a_schedule_that_holds_nothing_is_immediate() -> None:
    c, world = setup(replicas=1, coordination="None")
    body = c.get_schedule(NS, "nightly")
    assert body is not None and reconciler(c, world).release_agent(body) is True
    assert not [call for call in c.calls if call.startswith(("scale", "patch_workload"))]


# ---- the one finalizer: only while a Stop holds the agent (issue 17) --------------------------------------------


def _finalizers(c: FakeCluster) -> list[str]:
    body = c.get_schedule(NS, "nightly")
    assert body is not None
    return list(body["metadata"].get("finalizers") or [])


def test_the_schedule_carries_a_finalizer_only_while_its_stop_holds_the_agent() -> None:
    c, world = setup(replicas=2)
    held: list[bool] = []
    original = c.scale_workload

    def scale(namespace: str, kind: str, name: str, replicas: int) -> Obj:
        held.append(FINALIZER_AGENT_STOP in _finalizers(c))
        return original(namespace, kind, name, replicas)

    c.scale_workload = scale  # type: ignore[method-assign]
    drive(c, world, until=_done(c))
    assert held and all(held)  # there before the scale-down and still there at the restore
    assert _finalizers(c) == []  # released with the Stop: deletable at any moment again


def test_a_schedule_deleted_mid_stop_is_released_only_once_its_agent_is_back() -> None:
    c, world = setup(replicas=2)
    world.cycle_ticks = 100
    r = reconciler(c, world)
    _passes(c, world, r, 4)  # recorded and scaled down
    assert _finalizers(c) == [FINALIZER_AGENT_STOP]
    for _ in range(20):
        body = c.get_schedule(NS, "nightly")
        assert body is not None
        if r.release_deleted(body):
            break
        world.tick()
        _collect_garbage(c)
    else:
        raise AssertionError("never released")
    assert deployment(c)["spec"]["replicas"] == 2 and _finalizers(c) == []
