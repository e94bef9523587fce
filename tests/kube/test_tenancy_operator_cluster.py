"""Issue 21's findings with the operator running, on the real control plane: what each attack would have done.

* Finding 1: bob points an admin's schedule at his own server (a real loopback HTTP server playing it) and sets a
  token: refused at the API server, and his server receives nothing, while a cycle bob may run does run (and the
  same server, when an admin who may points a schedule at it, does receive the memory: the probe can see it).
* Finding 3: a Job the API server refuses (a ResourceQuota on Jobs), and a pod it refuses (a quota that requires
  limits), under spec.agent Stop: Ready=False with the server's words, the agent restored at once with the true
  reason, the token handled, a Warning Event, no traceback.
* Finding 5: carol, who may patch the Deployment and nothing of dreamkeeper's, forges the stop record: ignored,
  removed, reported; no Job of her naming, the schedule's slots untouched.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from dreamkeeper.kube import ANNOTATION_AGENT_STOP, GROUP, VERSION
from tests.cluster.kubeapi import ApiError, Obj, namespaced
from tests.kube.agent_support import AgentEnv
from tests.kube.cluster_support import (
    Env,
    condition_of,
    eventually,
    has_reasons,
    jobs_of,
    make_agent,
    remove_volume,
    schedule_path,
    settled_events,
)
from tests.kube.tenancy_support import APPLY_PATCH, JSON_PATCH, User, tenants
from tests.leaks import content_probes
from tests.proposers.fake_openai import FakeOpenAIServer, Reply

pytestmark = pytest.mark.cluster

# "Nothing to do" in both request shapes: the default one-cluster question reads `same` (false: distinct, a
# decision), RockBot's batch layout reads toDelete/toSave. {"toDelete": [], "toSave": []} alone is no answer to the
# cluster question, and a cycle whose every reply is no answer is proposer-failed.
NOTHING_TO_DO = {"same": False, "merged": "", "toDelete": [], "toSave": []}


@pytest.fixture
def bobs_server() -> Iterator[FakeOpenAIServer]:
    """bob's model server: answers like one ("nothing to merge") and records every request it receives."""
    with FakeOpenAIServer(responder=lambda _request: Reply.json(NOTHING_TO_DO)) as server:
        yield server


def _ready(status: Obj) -> tuple[str, str] | None:
    ready = condition_of(status, "Ready")
    return None if ready is None else (ready["status"], ready["reason"])


def _no_tracebacks(operator: Any) -> None:
    assert operator.tracebacks() == [], operator.log_text()[-3000:]
    assert operator.metric("dreamkeeper_handler_errors_total", handler="schedule") in (None, 0.0)


def _leaked(server: FakeOpenAIServer, probes: set[str]) -> list[str]:
    bodies = [json.dumps(r.body) for r in server.requests]
    return sorted({p for p in probes for body in bodies if p in body})


def test_finding1_bobs_server_receives_no_memory_text(env: Env, bobs_server: FakeOpenAIServer) -> None:
    agent_dir = make_agent(env.cluster, env.ns, env.host)
    probes = content_probes(agent_dir)
    users = tenants(env.cluster, env.ns)
    bob: User = users["bob"]
    env.operator.start()
    env.schedule("admins", safeguards={"minIntervalHours": 0})  # the admin's: offline, on the agent's claim
    path = schedule_path(env.ns, "admins")
    stolen = {"type": "openai", "model": "m", "baseURL": bobs_server.base_url, "allowPlainHTTP": True}
    attempts: list[tuple[str, Any, str, dict[str, Any]]] = [
        ("merge patch", {"spec": {"proposer": stolen, "runNowToken": "bob-1"}}, "application/merge-patch+json", {}),
        ("JSON patch", [{"op": "add", "path": "/spec/proposer", "value": stolen},
                        {"op": "add", "path": "/spec/runNowToken", "value": "bob-2"}], JSON_PATCH, {}),
        ("server-side apply", {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DreamSchedule",
                               "metadata": {"name": "admins"}, "spec": {"proposer": stolen, "runNowToken": "bob-3"}},
         APPLY_PATCH, {"fieldManager": "bob", "force": "true"}),
    ]  # fmt: skip
    for how, body, content_type, params in attempts:
        with pytest.raises(ApiError) as refused:
            bob.api.request("PATCH", path, body, params=params, content_type=content_type)
        assert refused.value.status == 403, (how, refused.value)
        assert "use PersistentVolumeClaim agent-data" in refused.value.message, (how, refused.value.message)
    # What bob may do: run the admin's schedule now (it stops no agent). The cycle runs, offline.
    bob.api.patch(path, {"spec": {"runNowToken": "bob-allowed"}})
    status = env.wait_status(
        "admins",
        "bob's run-now cycle counted",
        lambda s: s.get("lastRunNowToken") == "bob-allowed" and (s.get("lastRun") or {}).get("trigger") == "run-now",
        timeout=240,
    )
    assert status["lastRun"]["result"] == "completed", status["lastRun"]
    assert env.cluster.api.get(path)["spec"].get("proposer", {}).get("type", "offline") == "offline"
    assert bobs_server.requests == [] and _leaked(bobs_server, probes) == []

    # The probe can see memory: the admin, who may, points a schedule on a fresh copy of the agent (the first claim's
    # cycle holds a plan for approval) at the same server, and it receives entries word for word.
    control_dir = make_agent(env.cluster, env.ns, env.host, claim="control-data", with_pod=False)
    try:
        control = {**stolen, "timeoutSeconds": 60}
        env.cluster.api.create(
            schedule_path(env.ns),
            {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DreamSchedule", "metadata": {"name": "control"},
             "spec": {"schedule": "0 3 1 1 *", "claimName": "control-data", "proposer": control,
                      "runNowToken": "admin-1", "safeguards": {"minIntervalHours": 0}}},
        )  # fmt: skip
        env.wait_status("control", "the admin's cycle counted", lambda s: s.get("lastRun"), timeout=300)
        assert bobs_server.completions and _leaked(bobs_server, content_probes(control_dir)), "a leak would be seen"
    finally:
        remove_volume(env.cluster, env.ns, "control-data")
    _no_tracebacks(env.operator)


def _quota(agent_env: AgentEnv, name: str, hard: dict[str, str], scopes: list[str] | None = None) -> None:
    spec: dict[str, Any] = {"hard": hard}
    if scopes:
        spec["scopes"] = scopes
    agent_env.cluster.api.create(namespaced(agent_env.ns, "resourcequotas"), {"metadata": {"name": name}, "spec": spec})

    def enforced() -> bool:
        quota = agent_env.cluster.api.get(namespaced(agent_env.ns, "resourcequotas", name))
        return bool((quota.get("status") or {}).get("hard"))

    eventually(agent_env.cluster, f"quota {name} in force", enforced, timeout=60)


def _stop_ended(env: AgentEnv, token: str) -> Obj:
    def done(s: Obj) -> bool:
        agent = s.get("agent") or {}
        return s.get("lastRunNowToken") == token and agent.get("stop") is None and bool(agent.get("lastStop"))

    return env.wait_status(f"the stop for {token} ended", done, timeout=300)


def test_finding3_a_job_the_api_server_refuses_restores_the_agent_at_once(agent_env: AgentEnv) -> None:
    """A quota that allows no Job (an admin's honest setting, or bob's refused resources before the CRD caught
    them): the operator scaled the agent to 0 and then got 403 creating the cycle's Job. Before issue 21 the pass
    raised, wrote no status, kept the agent down until scaleDownTimeoutSeconds and said ScaleDownTimedOut."""
    env = agent_env
    agent = env.agent.create(replicas=2, interval=0.1)
    _quota(env, "no-jobs", {"count/jobs.batch": "0"})
    env.operator.start()
    env.schedule("Stop", scaleDownTimeoutSeconds=120)
    env.run_now("refused")
    s = _stop_ended(env, "refused")
    last = s["agent"]["lastStop"]
    print(f"\nJob refused: the agent was down {last['downtimeSeconds']} s (scaleDownTimeoutSeconds 120)")
    assert last["reason"] == "JobRefused", last
    assert agent.replicas() == 2 and ANNOTATION_AGENT_STOP not in agent.annotations()
    ready = condition_of(s, "Ready")
    assert ready is not None and (ready["status"], ready["reason"]) == ("False", "JobRefused"), ready
    assert "exceeded quota" in ready["message"] and "HTTP 403" in ready["message"], ready["message"]
    stopped = condition_of(s, "AgentStopped")
    assert stopped is not None and (stopped["status"], stopped["reason"]) == ("False", "JobRefused")
    settled = settled_events(env.cluster, env.ns, "nightly", has_reasons("JobRefused"))
    events = [e for e in settled if e["reason"] == "JobRefused"]
    assert len(events) == 1 and events[0]["type"] == "Warning" and "exceeded quota" in events[0]["message"]
    assert jobs_of(env.cluster, env.ns) == []
    agent.wait_writing(2)
    _no_tracebacks(env.operator)


def test_finding3_a_pod_the_api_server_refuses_stops_the_job_and_restores_the_agent(agent_env: AgentEnv) -> None:
    """A quota on CPU limits: the Job is created, but the Job controller's pod is refused ("must specify
    limits.cpu"), and it retries for the Job's whole deadline. The operator reads the controller's FailedCreate
    Event, stops the Job (PodRefused) and the agent comes back."""
    env = agent_env
    agent = env.agent.create(replicas=1, interval=0.1)
    # Scoped to pods with resources (the cycle's; the agent's pods have none): the agent itself still starts.
    _quota(env, "limits-required", {"limits.cpu": "8"}, scopes=["NotBestEffort"])
    env.operator.start()
    env.schedule("Stop")
    env.run_now("pod-refused")
    s = _stop_ended(env, "pod-refused")
    assert s["agent"]["lastStop"]["reason"] == "PodRefused", s["agent"]
    run = s["lastRun"]
    assert (run["result"], run["reason"]) == ("failed", "PodRefused"), run
    assert "must specify limits.cpu" in run["error"], run["error"]
    assert _ready(s) == ("False", "PodRefused")
    assert agent.replicas() == 1
    events = settled_events(env.cluster, env.ns, "nightly", has_reasons("PodRefused", "CycleFailed"))
    reasons = [e["reason"] for e in events]
    assert "PodRefused" in reasons and "CycleFailed" in reasons
    agent.wait_writing(1)
    _no_tracebacks(env.operator)


def test_finding5_carols_forged_stop_record_is_ignored_and_the_schedule_keeps_its_slots(
    agent_env: AgentEnv,
) -> None:
    env = agent_env
    agent = env.agent.create(replicas=1, interval=0.1)
    users = tenants(env.cluster, env.ns)
    carol = users["carol"]
    env.operator.start()
    env.cluster.api.create(
        schedule_path(env.ns),
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DreamSchedule", "metadata": {"name": "nightly"},
         "spec": {"schedule": "0 3 * * *", "claimName": env.agent.claim, "safeguards": {"minIntervalHours": 0},
                  "agent": {"workloadRef": {"kind": "Deployment", "name": env.agent.name}}}},
    )  # fmt: skip
    s = env.wait_status("served", lambda s: _ready(s) == ("True", "Scheduled") and s.get("nextScheduleTime"), 120)
    uid = env.cluster.api.get(schedule_path(env.ns, "nightly"))["metadata"]["uid"]
    forged = {"scheduleUID": uid, "schedule": f"{env.ns}/nightly", "job": "carol-forged-cycle", "replicas": 1,
              "stoppedAt": "2026-01-01T00:00:00Z", "trigger": "schedule", "slot": "2999-01-01T03:00:00Z",
              "runNowToken": None}  # fmt: skip
    carol.api.patch(env.agent.path, {"metadata": {"annotations": {ANNOTATION_AGENT_STOP: json.dumps(forged)}}})
    next_before = s["nextScheduleTime"]
    env.run_now("after-the-forgery")  # the admin's ordinary request: the next full pass reads the workload
    s = env.wait_status(
        "the token's stop done",
        lambda s: (
            s.get("lastRunNowToken") == "after-the-forgery"
            and (s.get("agent") or {}).get("lastStop")
            and not (s.get("agent") or {}).get("stop")
        ),
        timeout=300,
    )
    assert s["agent"]["lastStop"]["reason"] == "CycleFinished", s["agent"]
    names = [j["metadata"]["name"] for j in jobs_of(env.cluster, env.ns)]
    assert "carol-forged-cycle" not in names and len(names) == 1, names
    assert s.get("lastScheduleTime", "") < "2999" and s["nextScheduleTime"] == next_before  # no slot moved
    settled = settled_events(env.cluster, env.ns, "nightly", has_reasons("StopRecordIgnored"))
    ignored = [e for e in settled if e["reason"] == "StopRecordIgnored"]
    assert ignored and ignored[0]["type"] == "Warning" and "carol-forged-cycle" in ignored[0]["message"]
    assert agent.replicas() == 1 and ANNOTATION_AGENT_STOP not in agent.annotations()
    agent.wait_writing(1)
    _no_tracebacks(env.operator)
