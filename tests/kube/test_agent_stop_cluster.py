"""spec.agent with Stop on the real control plane: the caching agent runs as a Deployment's pod on a PV; cycles
run while it is scaled to 0, and it comes back with its replicas, also when the operator is SIGKILLed at any
step. Never two writers: no agent pod beside a cycle pod (ClaimWatcher), no agent write or agent process inside
a cycle's window (the ledger against the cycle reports), and every agent write preserved."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from dreamkeeper.kube import ANNOTATION_AGENT_STOP, ANNOTATION_AGENT_STOPPED, FINALIZER_AGENT_STOP
from dreamkeeper.kube.coordinator import CRASH_ENV
from tests.agents import ledger
from tests.kube.agent_support import AgentEnv
from tests.kube.cluster_support import condition_of, eventually, jobs_of, schedule_path, settled_events

pytestmark = pytest.mark.cluster


def wait_stop_done(env: AgentEnv, token: str, timeout: float = 240) -> dict[str, Any]:
    """The cycle for ``token`` counted and its Stop released (the agent restored)."""

    def done(s: dict[str, Any]) -> bool:
        agent, job = s.get("agent") or {}, (s.get("lastRun") or {}).get("jobName")
        finished = s.get("lastRunNowToken") == token and agent.get("stop") is None
        return bool(finished and job and (agent.get("lastStop") or {}).get("jobName") == job)

    return env.wait_status(f"cycle {token} done and agent restored", done, timeout)


def _report(agent_dir: Path, cycle_id: str) -> dict[str, Any]:
    return dict(json.loads((agent_dir / ".dreamkeeper" / "cycles" / f"{cycle_id}.json").read_text()))


def _never_two_writers(env: AgentEnv) -> None:
    assert env.watcher.two_writers() == [], env.watcher.two_writers()[:3]
    records = env.agent.records()
    assert ledger.overlaps(records, ledger.cycle_windows(env.agent.agent_dir)) == []


@pytest.mark.parametrize(
    ("mode", "hostile", "linger"),
    [("atomic", False, 0.0), ("inplace", True, 3.0)],
    ids=["rockbot-current", "rockbot-older-hostile-slow-to-stop"],
)
def test_stop_runs_cycles_while_the_agent_is_down_and_every_agent_write_survives(
    agent_env: AgentEnv, mode: str, hostile: bool, linger: float
) -> None:
    env = agent_env
    agent = env.agent.create(replicas=0, mode=mode, hostile=hostile, linger=linger, interval=0.05)
    # The truth: the corpus before the agent's first write; the ledger has every change it made since.
    before = ledger.Snapshot.of(agent.agent_dir / "memory")
    agent.scale(1)
    agent.wait_writing(1)
    changes = agent.replica_changes()
    env.watcher.start()
    env.operator.start()
    env.schedule()
    downtimes, jobs = [], []
    for token in ("c1", "c2", "c3"):
        restored_at = datetime.now(UTC)
        env.run_now(token)
        s = wait_stop_done(env, token)
        run, last = s["lastRun"], s["agent"]["lastStop"]
        assert run["result"] == "completed", run
        assert (last["replicas"], last["reason"]) == (1, "CycleFinished"), last
        downtimes.append(last["downtimeSeconds"])
        jobs.append(run["jobName"])
        assert agent.replicas() == 1
        agent.wait_writing(1)  # back, reloaded, writing again before the next cycle
        assert agent.writes_since(restored_at) > 0
    env.agent.stop_and_wait()  # quiesce, so the files and the ledger are final
    env.watcher.stop()

    _never_two_writers(env)
    assert env.watcher.cycles_seen() == 3
    check = ledger.check_corpus(agent.agent_dir, before, agent.records())
    assert check.ok, check.summary()
    assert check.agent_increments > 50 and check.checked_writes > 20
    assert len(ledger.cycle_archives(agent.agent_dir)) > 0  # the cycles did change the corpus

    assert agent.replica_changes() == changes + 3 * 2 + 1  # 3 stops (down, up) and the test's own scale to 0
    assert ANNOTATION_AGENT_STOP not in agent.annotations()
    for job in jobs_of(env.cluster, env.ns):
        pod_spec = job["spec"]["template"]["spec"]
        assert "affinity" not in pod_spec  # unpinned: the agent was down
        assert job["metadata"]["annotations"][ANNOTATION_AGENT_STOPPED] == "Deployment/rockbot"
        assert job["spec"]["activeDeadlineSeconds"] <= 1800
    events = settled_events(
        env.cluster, env.ns, "nightly", lambda evs: [e["reason"] for e in evs].count("AgentRestored") >= 3
    )
    reasons = [e["reason"] for e in events]
    for reason in ("AgentStopping", "AgentScaledDown", "CycleStarted", "CycleCompleted", "AgentRestored"):
        assert reasons.count(reason) == 3, (reason, reasons)
    stopped = condition_of(env.status(), "AgentStopped")
    assert stopped is not None and (stopped["status"], stopped["reason"]) == ("False", "CycleFinished")
    ident = {"dreamschedule": "nightly", "dreamschedule_namespace": env.ns}
    assert env.operator.settled_metric("dreamkeeper_agent_downtime_seconds_count", 3, **ident) == 3
    assert env.operator.settled_metric("dreamkeeper_agent_stopped", 0, **ident) == 0
    outages = env.watcher.outages()
    print(f"\nStop downtime per cycle (status, s): {downtimes}; agent not running (watcher, s): {outages}")
    assert len(outages) >= 3 and all(0 < d < 300 for d in downtimes)
    assert env.operator.tracebacks() == [], env.operator.log_text()[-3000:]


STEPS = {
    "record": "before the scale-down (replicas recorded on the workload, status not yet written)",
    "scale-down": "right after the scale-down",
    "start-cycle": "during the cycle (its Job just created)",
    "restore": "right after the restore",
}


@pytest.mark.parametrize("step", list(STEPS), ids=list(STEPS))
def test_stop_under_an_operator_sigkill_restores_the_agent_exactly_once(agent_env: AgentEnv, step: str) -> None:
    env = agent_env
    agent = env.agent.create(replicas=2, interval=0.1)
    changes = agent.replica_changes()
    env.watcher.start()
    env.operator.env = {CRASH_ENV: step}
    env.operator.start()
    env.schedule()
    env.run_now("once")
    proc = env.operator.proc
    assert proc is not None
    eventually(env.cluster, f"operator killed at {step}", lambda: not proc.alive(), timeout=180)
    assert proc.returncode() == -9, env.operator.log_text()[-2000:]
    at_crash = {"replicas": agent.replicas(), "annotated": ANNOTATION_AGENT_STOP in agent.annotations()}
    expected = {
        "record": {"replicas": 2, "annotated": True},
        "scale-down": {"replicas": 0, "annotated": True},
        "start-cycle": {"replicas": 0, "annotated": True},
        "restore": {"replicas": 2, "annotated": True},
    }[step]
    assert at_crash == expected, (step, at_crash)
    time.sleep(2)  # the world moves on without an operator (pods go, the cycle runs)

    env.operator.env = {}
    env.operator.restart()
    s = wait_stop_done(env, "once")
    agent.wait_writing(2)
    env.watcher.stop()

    assert agent.replicas() == 2 and agent.replica_changes() == changes + 2  # down once, up once
    assert ANNOTATION_AGENT_STOP not in agent.annotations()
    assert len(jobs_of(env.cluster, env.ns)) == 1
    assert s["totals"]["cyclesCompleted"] == 1 and len(s["countedJobUIDs"]) == 1
    assert s["agent"]["lastStop"]["replicas"] == 2
    _never_two_writers(env)
    assert env.watcher.cycles_seen() == 1
    assert env.operator.tracebacks() == [], env.operator.log_text()[-3000:]


def test_deleting_the_schedule_mid_stop_restores_a_stateful_set(agent_env: AgentEnv) -> None:
    """The delete handler ends the stop before the finalizer lets the schedule go: the agent is not left at 0."""
    env = agent_env
    env.agent.kind = "StatefulSet"
    agent = env.agent.create(replicas=1, interval=0.1, linger=8.0)  # slow to stop: the stop waits for it
    env.watcher.start()
    env.operator.start()
    env.schedule("Stop", kind="StatefulSet")
    env.run_now("doomed")

    def scaled_down() -> bool:
        stop = (env.status().get("agent") or {}).get("stop") or {}
        return stop.get("phase") == "Stopping" and agent.replicas() == 0

    eventually(env.cluster, "agent scaled down, its pod still stopping", scaled_down, timeout=120)
    assert agent.pods(), "the agent pod should still be terminating (it lingers 8 s after SIGTERM)"
    env.cluster.api.delete(schedule_path(env.ns, "nightly"))
    eventually(
        env.cluster, "schedule gone", lambda: env.cluster.api.get_or_none(schedule_path(env.ns, "nightly")) is None, 120
    )
    assert agent.replicas() == 1 and ANNOTATION_AGENT_STOP not in agent.annotations()
    agent.wait_writing(1)
    env.watcher.stop()
    assert jobs_of(env.cluster, env.ns) == []  # the cycle never started
    _never_two_writers(env)
    assert env.operator.tracebacks() == [], env.operator.log_text()[-3000:]


def test_the_documented_way_out_when_the_operator_is_gone_mid_stop(agent_env: AgentEnv) -> None:
    """Issue 17: the one finalizer a schedule ever carries is a Stop's (the agent is at 0 replicas). With the
    operator gone at that moment, the documented pre-delete path (docs/operator.md, "Uninstall") restores the agent
    from the workload's own record and lets the schedule go; nothing else ever waits for the operator."""
    env = agent_env
    agent = env.agent.create(replicas=2, interval=0.1)
    env.operator.start()
    env.schedule("Stop")
    env.run_now("stranded")
    eventually(env.cluster, "agent scaled down", lambda: agent.replicas() == 0, timeout=120)
    path = schedule_path(env.ns, "nightly")
    assert env.cluster.api.get(path)["metadata"]["finalizers"] == [FINALIZER_AGENT_STOP]
    env.operator.stop(kill=True)
    # The documented steps, as a cluster admin would run them.
    record = json.loads(agent.annotations()[ANNOTATION_AGENT_STOP])
    kubectl = env.cluster.kubectl
    kubectl("scale", f"deployment/{agent.name}", "-n", env.ns, f"--replicas={record['replicas']}")
    kubectl("annotate", f"deployment/{agent.name}", "-n", env.ns, f"{ANNOTATION_AGENT_STOP}-")
    kubectl("patch", "dsched", "nightly", "-n", env.ns, "--type", "merge", "-p", '{"metadata":{"finalizers":null}}')
    kubectl("delete", "dsched", "nightly", "-n", env.ns, "--timeout=60s")
    assert env.cluster.api.get_or_none(path) is None
    assert agent.replicas() == 2 and ANNOTATION_AGENT_STOP not in agent.annotations()
    agent.wait_writing(2)
