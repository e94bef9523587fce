"""spec.agent RestartAfter and None on the real control plane: the cycle runs beside the caching agent.

What the operator itself guarantees is tested here: RestartAfter restarts the workload (a rollout: a new
ReplicaSet) exactly once per cycle that changed files, reports the stale window, never scales; None never
touches the workload. The agent's stale writes meanwhile are repaired by the engine (the stale write-back repair,
consolidation/writeback): a stale copy is repaired by the cycle after it was written, so once the agent is
stopped one more cycle runs (``settle``), and then the corpus passes the same checks as the Stop tests: no archived
entry live again, every reinforcement counted once, every write of the agent preserved.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from dreamkeeper.kube import ANNOTATION_RESTARTED_AT
from dreamkeeper.kube.coordination import restart_value
from dreamkeeper.kube.objects import parse_time
from tests.agents import ledger
from tests.cluster.kubeapi import namespaced
from tests.kube.agent_support import APPS, AgentEnv
from tests.kube.cluster_support import events_of, settled_events

pytestmark = pytest.mark.cluster


def cycle(env: AgentEnv, token: str, *, restart: bool) -> dict[str, Any]:
    """Run one cycle beside the agent; with ``restart``, until the restart it caused is done too."""
    env.run_now(token)

    def done(s: dict[str, Any]) -> bool:
        run = s.get("lastRun") or {}
        if s.get("lastRunNowToken") != token or not run or s.get("activeJob"):
            return False
        return not restart or ((s.get("agent") or {}).get("lastRestart") or {}).get("jobName") == run["jobName"]

    return env.wait_status(f"cycle {token}", done)


def replica_sets(env: AgentEnv) -> list[dict[str, Any]]:
    path = namespaced(env.ns, "replicasets", **APPS)
    return list(env.cluster.api.get(path, labelSelector=f"app={env.agent.name}")["items"])


@dataclass(frozen=True)
class Beside:
    """What several cycles beside a running caching agent left: the corpus check and the runs."""

    check: ledger.CorpusCheck  # after the settling cycle
    pending: ledger.CorpusCheck  # before it: the stale copies written since the last cycle, not repaired yet
    statuses: list[dict[str, Any]]  # of the cycles beside the agent
    settled: dict[str, Any]  # the settling cycle's status
    stale_writes: int  # agent writes that replaced a file it had not cached (someone else's change)
    replicas: int  # the workload's replicas after the cycles (before the test stopped the agent)
    two_writers: int  # watcher samples with an agent and a cycle pod: expected here, the cycle runs beside
    rollouts: int  # ReplicaSets of the workload after the cycles beside the agent
    reasons: list[str]  # the schedule's Event reasons then


def cycles_beside(env: AgentEnv, coordination: str, *, cycles: int = 3) -> Beside:
    agent = env.agent.create(replicas=0, interval=0.05)
    before = ledger.Snapshot.of(agent.agent_dir / "memory")
    agent.scale(1)
    agent.wait_writing(1)
    env.watcher.start()
    env.operator.start()
    env.schedule(coordination)
    statuses = []
    for n in range(1, cycles + 1):
        since = datetime.now(UTC)
        statuses.append(cycle(env, f"c{n}", restart=coordination == "RestartAfter"))
        agent.wait_writing(1)
        assert agent.writes_since(since) > 0
    replicas, rollouts = agent.replicas(), len(replica_sets(env))
    settled = {"CycleCompleted"} | ({"AgentRestarted"} if coordination == "RestartAfter" else set())
    events = settled_events(
        env.cluster, env.ns, "nightly", lambda evs: all([e["reason"] for e in evs].count(r) >= cycles for r in settled)
    )
    reasons = [e["reason"] for e in events]
    agent.stop_and_wait()  # quiesce, so the files and the ledger are final
    env.watcher.stop()
    records = agent.records()
    stale = sum(1 for w in ledger.writes(records) if w.get("stale"))
    pending = ledger.check_corpus(agent.agent_dir, before, records)
    settled = cycle(env, "settle", restart=False)  # repairs what the agent wrote back after the last cycle
    check = ledger.check_corpus(agent.agent_dir, before, records)
    return Beside(check, pending, statuses, settled, stale, replicas, len(env.watcher.two_writers()), rollouts, reasons)


def repairs(beside: Beside) -> str:
    """What the repair did, in numbers (for the docs: docs/live-agent.md)."""
    runs = [*(s["lastRun"] for s in beside.statuses), beside.settled["lastRun"]]
    keys = ("staleWriteBacks", "resurrected", "reinforcementsCarried")
    per_cycle = [tuple(r.get(k, 0) for k in keys) for r in runs]
    return (
        f"agent's stale writes: {beside.stale_writes}; increments: {beside.check.agent_increments}; repaired per "
        f"cycle (stale, resurrected, carried): {per_cycle}; before the settling cycle: {beside.pending.summary()}; "
        f"after: {beside.check.summary()}"
    )


def test_restart_after_restarts_the_agent_once_per_changing_cycle_and_reports_the_window(agent_env: AgentEnv) -> None:
    env = agent_env
    beside = cycles_beside(env, "RestartAfter")
    restarts = [s["agent"]["lastRestart"] for s in beside.statuses]
    assert [r["jobName"] for r in restarts] == [s["lastRun"]["jobName"] for s in beside.statuses]
    assert all(r["windowSeconds"] is not None and 0 <= r["windowSeconds"] < 120 for r in restarts), restarts
    # One rollout per changing cycle: the template's restartedAt changed 3 times, so 1 + 3 ReplicaSets.
    assert beside.rollouts == 4, beside.rollouts
    template = env.agent.get()["spec"]["template"]
    requested = parse_time(restarts[-1]["requestedAt"])
    assert requested is not None
    assert template["metadata"]["annotations"][ANNOTATION_RESTARTED_AT] == restart_value(requested)
    assert beside.replicas == 1 and beside.two_writers > 0  # never scaled: the cycles ran beside the agent
    reasons = beside.reasons
    assert reasons.count("AgentRestarted") == 3 and "AgentStopping" not in reasons
    ident = {"dreamschedule": "nightly", "dreamschedule_namespace": env.ns}
    assert (
        env.operator.settled_metric("dreamkeeper_agent_stale_window_seconds_count", lambda v: (v or 0) >= 3, **ident)
        or 0
    ) >= 3
    assert env.operator.settled_metric("dreamkeeper_agent_stopped", None, **ident) is None
    windows = [r["windowSeconds"] for r in restarts]
    print(f"\nRestartAfter stale windows (s): {windows}; {repairs(beside)}")
    assert env.operator.tracebacks() == [], env.operator.log_text()[-3000:]
    # The engine repairs the agent's stale write-backs (no archive live again with stale content, every increment
    # counted once, every write preserved).
    assert beside.check.ok, beside.check.summary()


def test_none_runs_beside_the_agent_and_never_touches_its_workload(agent_env: AgentEnv) -> None:
    env = agent_env
    beside = cycles_beside(env, "None")
    assert len(replica_sets(env)) == 1 and beside.replicas == 1 and beside.two_writers > 0
    assert sum(s["lastRun"].get("staleWriteBacks", 0) for s in beside.statuses[1:]) > 0  # the repair did work
    template = env.agent.get()["spec"]["template"]
    assert ANNOTATION_RESTARTED_AT not in ((template.get("metadata") or {}).get("annotations") or {})
    reasons = [e["reason"] for e in events_of(env.cluster, env.ns, "nightly")]
    assert not {"AgentRestarted", "AgentStopping", "AgentRestored"} & set(reasons) and "StaleWriteBacks" in reasons
    assert "agent" not in beside.statuses[-1] or not beside.statuses[-1]["agent"]
    print(f"\nNone: {repairs(beside)}")
    assert env.operator.tracebacks() == [], env.operator.log_text()[-3000:]
    assert beside.check.ok, beside.check.summary()
