"""Issue 21 (tenancy, second pass) against the in-memory API server and as pure functions: forged stop records,
refused Jobs and pods, the CRD's new rules as the operator re-checks them, and the policy's shape. The same
findings on the real control plane, attacked as the tenants bob and carol: test_tenancy_cluster.py."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from codegen.admission import IMAGE_BOUNDARIES, NOT_RECHECKED, RECHECKED, policy_spec, spec_fields
from pydantic import ValidationError

from dreamkeeper.kube import ANNOTATION_AGENT_STOP, ANNOTATION_STOPPED
from dreamkeeper.kube.api import ApiError
from dreamkeeper.kube.coordination import ClaimView, StopRecord, record_problem
from dreamkeeper.kube.models import DreamScheduleSpec
from dreamkeeper.kube.placement import selector_string
from dreamkeeper.kube.slots import CronSchedule
from tests.kube.fakes import Obj, stamp
from tests.kube.test_agent_coordination import (
    NS,
    T0,
    WatchedCluster,
    World,
    deployment,
    drive,
    reconciler,
    released,
    setup,
    status,
)
from tests.kube.test_reconcile import NS as NS_R
from tests.kube.test_reconcile import T0 as T0_R
from tests.kube.test_reconcile import Clock, cluster, run
from tests.kube.test_reconcile import condition as condition_r
from tests.kube.test_reconcile import reconciler as reconciler_r

UID = "schedule-uid"
CRON = CronSchedule.parse("0 3 * * *", None)


def _record(**changes: Any) -> StopRecord:
    fields: dict[str, Any] = {
        "schedule_uid": UID,
        "schedule": "agents/nightly",
        "job_name": "nightly-29000000",
        "replicas": 2,
        "stopped_at": T0,
        "trigger": "schedule",
        "slot": datetime(2026, 3, 1, 3, 0, tzinfo=UTC),
        "run_now_token": None,
    } | changes
    return StopRecord(**fields)


# ---- finding 5: stop records are the operator's ------------------------------------------------------------------


def test_a_record_naming_a_job_the_operator_never_created_is_not_adopted() -> None:
    problem = record_problem(_record(job_name="carol-forged-cycle"), ClaimView(), CRON, T0)
    assert problem is not None and "never created" in problem


def test_a_record_is_adopted_only_with_its_job_s_own_slot_and_trigger() -> None:
    slot = datetime(2026, 3, 1, 3, 0, tzinfo=UTC)
    job = ClaimView(job="active", job_uid="j", job_trigger="schedule", job_slot=slot)
    assert record_problem(_record(), job, CRON, T0) is None
    assert record_problem(_record(slot=slot - timedelta(days=1)), job, CRON, T0) is not None
    assert record_problem(_record(trigger="run-now", run_now_token="x"), job, CRON, T0) is not None


def test_a_slot_the_cron_never_produced_or_in_the_future_is_never_adopted() -> None:
    future = datetime(2999, 1, 1, 3, 0, tzinfo=UTC)  # the trial's slot: a cron slot, 973 years ahead
    job = ClaimView(job="active", job_uid="j", job_trigger="schedule", job_slot=future)
    problem = record_problem(_record(slot=future), job, CRON, T0)
    assert problem is not None and "not one the schedule's cron produced" in problem
    off_cron = datetime(2026, 3, 1, 3, 7, tzinfo=UTC)
    job = ClaimView(job="active", job_uid="j", job_trigger="schedule", job_slot=off_cron)
    assert record_problem(_record(slot=off_cron), job, CRON, T0) is not None


def _forge(c: WatchedCluster, **fields: Any) -> str:
    body = c.get_schedule(NS, "nightly")
    assert body is not None
    forged = {
        "scheduleUID": body["metadata"]["uid"],
        "schedule": f"{NS}/nightly",
        "job": "carol-forged-cycle",
        "replicas": 2,
        "stoppedAt": "2026-03-01T04:00:00Z",
        "trigger": "schedule",
        "slot": "2999-01-01T03:00:00Z",
        "runNowToken": None,
    } | fields
    value = json.dumps(forged)
    c.objects[("Deployment", NS, "rockbot")]["metadata"]["annotations"] = {ANNOTATION_AGENT_STOP: value}
    return value


def test_finding5_a_forged_stop_record_is_removed_reported_and_never_runs_or_moves_the_schedule() -> None:
    c, world = setup(replicas=2)
    spec = c.objects[("DreamSchedule", NS, "nightly")]["spec"]
    spec.pop("runNowToken")
    spec["schedule"] = "0 3 * * *"
    forged = _forge(c)
    r = reconciler(c, world)
    for _ in range(5):
        body = c.get_schedule(NS, "nightly")
        assert body is not None
        r.reconcile(body)
        world.tick()
    s = status(c)
    assert ANNOTATION_AGENT_STOP not in (deployment(c)["metadata"].get("annotations") or {})
    assert (s.get("agent") or {}).get("stop") is None
    assert c.of_kind("Job", NS) == [] and deployment(c)["spec"]["replicas"] == 2
    assert s.get("lastScheduleTime") is None
    assert s["nextScheduleTime"].startswith("2026-03-02T03:00")  # the next cron slot, not the year 3000
    (ignored,) = [e for e in c.events if e["reason"] == "StopRecordIgnored"]
    assert ignored["type"] == "Warning" and "carol-forged-cycle" in ignored["message"]
    assert forged[:100] in ignored["message"]


def test_a_forged_record_naming_another_schedule_does_not_hold_the_agent() -> None:
    """A record naming a schedule that does not hold the workload: replaced by this stop's own, with a Warning."""
    c, world = setup(replicas=1)
    _forge(c, scheduleUID="someone-else", schedule=f"{NS}/ghost", job="ghost-1")
    drive(c, world, until=lambda: released()(c) and (status(c).get("totals") or {}).get("cyclesCompleted", 0) >= 1)
    assert "StopRecordIgnored" in c.reasons() and c.violations == []
    assert deployment(c)["spec"]["replicas"] == 1


def test_a_real_stop_of_another_schedule_still_holds_the_agent() -> None:
    c, world = setup(replicas=1)
    c.put(
        "DreamSchedule",
        {
            "metadata": {"name": "other", "namespace": NS, "uid": "other-uid"},
            "spec": {"schedule": "0 3 1 1 *", "claimName": "agent-data"},
            "status": {"agent": {"stop": {"kind": "Deployment", "name": "rockbot", "replicas": 1}}},
        },
    )
    _forge(c, scheduleUID="other-uid", schedule=f"{NS}/other", job="other-1")
    r = reconciler(c, world)
    for _ in range(3):
        body = c.get_schedule(NS, "nightly")
        assert body is not None
        r.reconcile(body)
        world.tick()
    assert "StopRecordIgnored" not in c.reasons()
    assert "RunNowDeferred" in c.reasons() and deployment(c)["spec"]["replicas"] == 1


# ---- finding 3: a refused Job never keeps the agent down -----------------------------------------------------------


class Refusing(WatchedCluster):
    """The API server refusing every cycle Job (a quota on Jobs, a template it finds invalid)."""

    status_code = 403

    def create_job(self, namespace: str, body: Obj) -> Obj:
        self.calls.append(f"refused {body['metadata']['name']}")
        raise ApiError(self.status_code, "Forbidden", 'jobs.batch "x" is forbidden: exceeded quota: no-jobs')


def _refusing_setup(**agent: Any) -> tuple[Refusing, World]:
    base, _ = setup(replicas=2, **agent)
    c = Refusing()
    c.objects, c.now = base.objects, base.now
    world = World(c)
    world.ages = {name: 9 for (kind, _, name) in c.objects if kind == "Pod"}
    return c, world


def test_finding3_a_refused_job_restores_the_agent_at_once_with_a_true_reason() -> None:
    c, world = _refusing_setup(scaleDownTimeoutSeconds=30)
    r = reconciler(c, world)
    delays = []
    for _ in range(12):
        body = c.get_schedule(NS, "nightly")
        assert body is not None
        delays.append(r.reconcile(body))
        world.tick()
        if released()(c):
            break
    s = status(c)
    assert released()(c), s.get("agent")
    last = s["agent"]["lastStop"]
    assert last["reason"] == "JobRefused" and deployment(c)["spec"]["replicas"] == 2
    assert last["downtimeSeconds"] < 30  # restored at once, not after scaleDownTimeoutSeconds
    assert 0.0 in delays  # the restoring pass followed the refusal without waiting for the next poll
    assert s["lastRunNowToken"] == "a"  # handled: the same request would be refused again
    ready = next(x for x in s["conditions"] if x["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "JobRefused")
    assert "exceeded quota: no-jobs" in ready["message"] and "HTTP 403" in ready["message"]
    assert "JobRefused" in c.reasons() and c.violations == []
    stopped = next(x for x in s["conditions"] if x["type"] == "AgentStopped")
    assert (stopped["status"], stopped["reason"]) == ("False", "JobRefused")


@pytest.mark.parametrize("code", [400, 403, 404, 422])
def test_any_4xx_on_a_job_without_spec_agent_is_ready_false_and_the_token_handled(code: int) -> None:
    c, world = _refusing_setup()
    c.status_code = code
    c.objects[("DreamSchedule", NS, "nightly")]["spec"].pop("agent")
    r = reconciler(c, world)
    for _ in range(3):
        body = c.get_schedule(NS, "nightly")
        assert body is not None
        r.reconcile(body)  # never raises
    s = status(c)
    ready = next(x for x in s["conditions"] if x["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "JobRefused")
    assert s["lastRunNowToken"] == "a" and c.reasons().count("JobRefused") == 1
    assert sum(1 for call in c.calls if call.startswith("refused")) == 1  # tried once per token, not per pass


def test_a_selector_the_api_server_refuses_is_a_condition_not_a_loop_of_exceptions() -> None:
    """Finding 6, stored before the CRD refused it: the pod list answers 400; the pass says so and goes on."""
    c, world = setup(replicas=1, coordination="None")

    def refuse(namespace: str, label_selector: str | None = None) -> list[Obj]:
        if label_selector and "!" in label_selector:
            raise ApiError(400, "BadRequest", "unable to parse requirement: invalid label key")
        return WatchedCluster.list_pods(c, namespace, label_selector)

    c.list_pods = refuse  # type: ignore[method-assign]
    c.objects[("DreamSchedule", NS, "nightly")]["spec"]["agentSelector"] = {
        "matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]
    }
    r = reconciler(c, world)
    body = c.get_schedule(NS, "nightly")
    assert body is not None
    r.reconcile(body)
    ready = next(x for x in status(c)["conditions"] if x["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "JobRefused") and "unable to parse" in ready["message"]


def test_a_pod_the_api_server_refuses_stops_the_job_and_restores_the_agent() -> None:
    """The Job is created but the Job controller cannot create its pod (a quota requiring limits): its FailedCreate
    Event is the only trace. After the grace the Job is stopped as PodRefused and the agent comes back."""
    c, world = setup(replicas=1)
    refused_jobs: set[str] = set()

    def no_pods(self: World) -> None:  # the Job controller, refused by the API server on every pod
        for job in self.c.of_kind("Job", NS):
            name, uid = job["metadata"]["name"], job["metadata"]["uid"]
            if job["spec"].get("activeDeadlineSeconds") == 1 and ("Job", NS, name) in self.c.objects:
                self.c.finish_job(NS, name, succeeded=False, reason="DeadlineExceeded")
                self.c.objects.pop(("Pod", NS, f"{name}-pod"), None)
                continue
            if name not in refused_jobs:
                refused_jobs.add(name)
                self.c.controller_events.append(
                    {
                        "metadata": {"name": f"{name}.1", "namespace": NS},
                        "involvedObject": {"kind": "Job", "name": name, "uid": uid},
                        "reason": "FailedCreate",
                        "type": "Warning",
                        "message": f'Error creating: pods "{name}-x" is forbidden: failed quota: q: must specify '
                        "limits.cpu for: dream",
                        "lastTimestamp": stamp(self.now),
                    }
                )

    world._jobs = no_pods.__get__(world)  # type: ignore[method-assign]
    drive(c, world, until=lambda: released()(c) and bool(status(c).get("lastRun")), ticks=200)
    s = status(c)
    assert s["agent"]["lastStop"]["reason"] == "PodRefused", s["agent"]
    assert (s["lastRun"]["result"], s["lastRun"]["reason"]) == ("failed", "PodRefused")
    assert "must specify limits.cpu" in s["lastRun"]["error"]
    (job,) = c.of_kind("Job", NS)
    assert job["metadata"]["annotations"][ANNOTATION_STOPPED].startswith("PodRefused: ")
    ready = next(x for x in s["conditions"] if x["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "PodRefused")
    assert deployment(c)["spec"]["replicas"] == 1 and c.violations == []


# ---- findings 6 and 7: the spec refuses what the API server would ------------------------------------------------


def _spec(**changes: Any) -> DreamScheduleSpec:
    return DreamScheduleSpec.model_validate({"schedule": "@daily", "claimName": "c", **changes})


@pytest.mark.parametrize(
    "selector",
    [
        {"matchLabels": {"bad key!": "x"}},
        {"matchLabels": {"app": "a b"}},
        {"matchLabels": {"a" * 254 + "/x": "y"}},
        {"matchLabels": {"x/" + "n" * 64: "y"}},
        {"matchExpressions": [{"key": "app=1", "operator": "Exists"}]},
        {"matchExpressions": [{"key": "app", "operator": "In", "values": ["a,b"]}]},
        {"matchExpressions": [{"key": "app", "operator": "In"}]},
        {"matchExpressions": [{"key": "app", "operator": "Exists", "values": ["x"]}]},
    ],
)
def test_finding6_a_selector_the_api_server_would_refuse_is_invalid(selector: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        _spec(agentSelector=selector)


def test_valid_selectors_pass_and_join_unambiguously() -> None:
    spec = _spec(
        agentSelector={
            "matchLabels": {"app.kubernetes.io/name": "rockbot", "tier": ""},
            "matchExpressions": [{"key": "example.com/x", "operator": "NotIn", "values": ["a", "b_c"]}],
        }
    )
    assert spec.agent_selector is not None
    query = selector_string(spec.agent_selector.wire())
    assert query == "app.kubernetes.io/name=rockbot,tier=,example.com/x notin (a,b_c)"


@pytest.mark.parametrize(
    ("resources", "said"),
    [
        ({"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}, "exceeds limits.cpu"),
        ({"requests": {"memory": "2Gi"}, "limits": {"memory": "1024Mi"}}, "exceeds limits.memory"),
        ({"requests": {"cpu": -1}}, "negative"),
        ({"requests": {"nvidia.com/gpu": 1}}, "not one of cpu"),
    ],
)
def test_finding3_resources_the_api_server_would_refuse_are_invalid(resources: dict[str, Any], said: str) -> None:
    with pytest.raises(ValidationError) as invalid:
        _spec(resources=resources)
    assert said in str(invalid.value)


def test_requests_up_to_their_limits_are_valid() -> None:
    _spec(resources={"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": 1, "memory": "1Gi"}})


@pytest.mark.parametrize("field", ["runAsGroup", "fsGroup"])
def test_finding7_group_zero_needs_allow_root_group(field: str) -> None:
    with pytest.raises(ValidationError):
        _spec(securityContext={"runAsUser": 1000, field: 0})
    _spec(securityContext={"runAsUser": 1000, field: 0, "allowRootGroup": True})


# ---- the policy's shape ------------------------------------------------------------------------------------------


def test_every_spec_field_but_suspend_and_run_now_token_is_rechecked_on_update() -> None:
    """Derived from the model: a field added tomorrow is re-checked the day it is added."""
    assert set(RECHECKED) == set(spec_fields()) - set(NOT_RECHECKED)
    assert {"proposer", "safeguards", "approveHold", "resources", "securityContext", "image", "schedule",
            "agentSelector", "agentPath", "vocabularyRef", "agent", "claimName"} <= set(RECHECKED)  # fmt: skip
    recheck = next(v["expression"] for v in policy_spec()["variables"] if v["name"] == "recheck")
    for field in RECHECKED:
        assert f"object.spec.{field} != oldObject.spec.{field}" in recheck
    for field in NOT_RECHECKED:
        assert f"object.spec.{field} " not in recheck


def test_an_allowed_image_prefix_must_end_at_a_boundary() -> None:
    rules = [v["expression"] for v in policy_spec()["validations"]]
    image_rule = next(rule for rule in rules if "allowedImages.exists" in rule)
    assert "startsWith(p)" in image_rule
    for boundary in IMAGE_BOUNDARIES:
        assert f"p.endsWith('{boundary}')" in image_rule
    assert "object.spec.image == p" in image_rule


def test_the_security_model_table_names_every_spec_field() -> None:
    """docs/operator.md's table: every field of the spec, who may set it, what an update re-checks."""
    docs = (Path(__file__).resolve().parents[2] / "docs" / "operator.md").read_text()
    table = docs[docs.index("What every field of the spec does") :]
    table = table[: table.index("\n\n", table.index("| field |"))]
    rows = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    named = {name for row in rows for name in re.findall(r"`([A-Za-z]+)`", row)}
    assert set(spec_fields()) <= named, set(spec_fields()) - named


def test_a_claim_being_deleted_starts_no_cycle() -> None:
    """Build 6, the claim deleted mid-cycle: kept by its protection finalizer while the cycle's pod uses it, it is
    not usable for the next one (the scheduler never places a pod naming a claim being deleted)."""
    c = cluster(runNowToken="go")
    c.objects[("PersistentVolumeClaim", NS_R, "agent-data")]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    run(reconciler_r(c, Clock(T0_R)), c)
    ready = condition_r(c, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "ClaimTerminating")
    assert c.of_kind("Job", NS_R) == [] and "RunNowDeferred" in c.reasons()
