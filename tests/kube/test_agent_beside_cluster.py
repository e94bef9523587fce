"""spec.agent RestartAfter and None on the real control plane: the cycle runs beside the caching agent.

What the operator itself guarantees is tested here: RestartAfter restarts the workload (a rollout: a new
ReplicaSet) exactly once per cycle that changed files, reports the stale window, never scales; None never
touches the workload. What happens to the agent's stale writes meanwhile is the engine's business (issue 14
part B, the stale write-back repair): ``corpus_after`` gathers the same corpus checks as the Stop tests, for
those tests to assert.
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
from tests.kube.cluster_support import events_of

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

    check: ledger.CorpusCheck
    statuses: list[dict[str, Any]]
    stale_writes: int  # agent writes that replaced a file it had not cached (someone else's change)
    replicas: int  # the workload's replicas after the cycles (before the test stopped the agent)
    two_writers: int  # watcher samples with an agent and a cycle pod: expected here, the cycle runs beside


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
    replicas = agent.replicas()
    agent.stop_and_wait()  # quiesce, so the files and the ledger are final
    env.watcher.stop()
    records = agent.records()
    stale = sum(1 for w in ledger.writes(records) if w.get("stale"))
    check = ledger.check_corpus(agent.agent_dir, before, records)
    return Beside(check, statuses, stale, replicas, len(env.watcher.two_writers()))


def test_restart_after_restarts_the_agent_once_per_changing_cycle_and_reports_the_window(agent_env: AgentEnv) -> None:
    env = agent_env
    beside = cycles_beside(env, "RestartAfter")
    restarts = [s["agent"]["lastRestart"] for s in beside.statuses]
    assert [r["jobName"] for r in restarts] == [s["lastRun"]["jobName"] for s in beside.statuses]
    assert all(r["windowSeconds"] is not None and 0 <= r["windowSeconds"] < 120 for r in restarts), restarts
    # One rollout per changing cycle: the template's restartedAt changed 3 times, so 1 + 3 ReplicaSets.
    rollouts = replica_sets(env)
    assert len(rollouts) == 4, [rs["metadata"]["name"] for rs in rollouts]
    template = env.agent.get()["spec"]["template"]
    requested = parse_time(restarts[-1]["requestedAt"])
    assert requested is not None
    assert template["metadata"]["annotations"][ANNOTATION_RESTARTED_AT] == restart_value(requested)
    assert beside.replicas == 1 and beside.two_writers > 0  # never scaled: the cycles ran beside the agent
    reasons = [e["reason"] for e in events_of(env.cluster, env.ns, "nightly")]
    assert reasons.count("AgentRestarted") == 3 and "AgentStopping" not in reasons
    ident = {"dreamschedule": "nightly", "dreamschedule_namespace": env.ns}
    assert env.operator.metric("dreamkeeper_agent_stale_window_seconds_count", **ident) == 3
    assert env.operator.metric("dreamkeeper_agent_stopped", **ident) is None
    windows = [r["windowSeconds"] for r in restarts]
    print(f"\nRestartAfter stale windows (s): {windows}; agent's stale writes: {beside.stale_writes}; "
          f"corpus: {beside.check.summary()}")  # fmt: skip
    assert env.operator.tracebacks() == [], env.operator.log_text()[-3000:]


def test_none_runs_beside_the_agent_and_never_touches_its_workload(agent_env: AgentEnv) -> None:
    env = agent_env
    beside = cycles_beside(env, "None")
    assert len(replica_sets(env)) == 1 and beside.replicas == 1 and beside.two_writers > 0
    template = env.agent.get()["spec"]["template"]
    assert ANNOTATION_RESTARTED_AT not in ((template.get("metadata") or {}).get("annotations") or {})
    reasons = [e["reason"] for e in events_of(env.cluster, env.ns, "nightly")]
    assert not {"AgentRestarted", "AgentStopping", "AgentRestored"} & set(reasons)
    assert "agent" not in beside.statuses[-1] or not beside.statuses[-1]["agent"]
    print(f"\nNone: agent's stale writes: {beside.stale_writes}; corpus: {beside.check.summary()}")
    assert env.operator.tracebacks() == [], env.operator.log_text()[-3000:]
