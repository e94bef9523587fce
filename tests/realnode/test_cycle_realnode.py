"""Cycles on the real node, run by the operator the chart installed: a DreamSchedule with `agent: Stop` on a real
Deployment (the caching agent's own image, uid 1000, fsGroup 1000) stops it, runs the cycle Job on its `local`
PersistentVolume (the vocabulary init container first, never clobbering), as the agent's user with the fsGroup the
kubelet applied, and restores it; a cycle over its memory limit is OOM-killed by the kernel and reported as such;
`kubectl logs` of a failed cycle says why. Every pod runs under Pod Security `restricted`."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from dreamkeeper.coverage import VOCABULARY_FILE
from tests.agents import ledger
from tests.cluster.realnode import RealNodeCluster
from tests.cluster.realnode_host import NODE_NAME
from tests.kube.agent_support import ClaimWatcher
from tests.realnode.support import (
    AGENT_UID,
    Agent,
    Release,
    condition,
    create_schedule,
    create_vocabulary,
    events_for,
    job_pod,
    local_volume,
    run_now,
    wait_run,
)

pytestmark = pytest.mark.realnode


def _report(agent_dir: Path, cycle_id: str) -> dict[str, Any]:
    return dict(json.loads((agent_dir / ".dreamkeeper" / "cycles" / f"{cycle_id}.json").read_text()))


def _terminated(pod: dict[str, Any], init: bool) -> dict[str, Any]:
    (entry,) = pod["status"]["initContainerStatuses" if init else "containerStatuses"]
    return dict(entry["state"]["terminated"])


def _agent(cluster: RealNodeCluster, ns: str, tmp_path: Path) -> Agent:
    assert cluster.images is not None
    agent_dir = local_volume(cluster, ns, tmp_path / "volume")
    return Agent(cluster, ns, agent_dir, cluster.images.agent)


def test_stop_runs_the_cycle_job_on_the_pvc_as_the_agent_with_fsgroup_and_the_vocabulary_never_clobbered(
    real_cluster: RealNodeCluster, release: Release, restricted_namespace: str, tmp_path: Path
) -> None:
    ns = restricted_namespace
    agent = _agent(real_cluster, ns, tmp_path)
    volume = agent.agent_dir.parent
    before = os.stat(volume)
    assert (before.st_uid, before.st_gid) == (0, 0)  # made by the test as root: only the kubelet can hand it over
    agent.create(replicas=0)
    truth = ledger.Snapshot.of(agent.agent_dir / "memory")  # before the agent's first write
    agent.scale(1)
    agent.wait_writing(1)
    # fsGroup applied by the kubelet to the local volume: group-owned by 1000, setgid, group-writable.
    after = os.stat(volume)
    mode = after.st_mode
    assert after.st_gid == AGENT_UID and mode & stat.S_ISGID and mode & stat.S_IWGRP, (after.st_gid, oct(mode))
    assert all(r["pod"].startswith("rockbot-") for r in ledger.writes(agent.records()))

    # The sample ships a vocabulary file: removed, so the first cycle's init container creates it.
    vocabulary = agent.agent_dir / VOCABULARY_FILE
    vocabulary.unlink()
    create_vocabulary(real_cluster, ns)
    watcher = ClaimWatcher(real_cluster, ns, "agent-data")
    watcher.start()
    agent_spec = {"workloadRef": {"kind": "Deployment", "name": "rockbot"}, "coordination": "Stop"}
    # The sample's backlog is 10% of its corpus: over the default blast-radius cap, which would hold the plan for a
    # human; a higher cap lets the cycle write (archives, merged entries) into the agent's files.
    guards = {"minIntervalHours": 0, "archiveCap": 0.5}
    create_schedule(
        real_cluster,
        ns,
        "nightly",
        agentPath="agent",
        vocabularyRef={"name": "words"},
        agent=agent_spec,
        safeguards=guards,
    )
    run_now(real_cluster, ns, "nightly", "first")
    s = wait_run(real_cluster, ns, "nightly", "first", stop=True)
    run = s["lastRun"]
    assert (run["result"], run["reason"]) == ("completed", "Completed"), run
    assert s["agent"]["lastStop"]["reason"] == "CycleFinished", s["agent"]
    agent.wait_writing(1)  # restored: a new agent pod, reloaded, writing again
    assert agent.replicas() == 1

    pod = job_pod(real_cluster, ns, run["jobName"])
    assert pod["spec"]["nodeName"] == NODE_NAME
    security = pod["spec"]["securityContext"]
    assert (security["runAsUser"], security["runAsGroup"], security["fsGroup"]) == (AGENT_UID, AGENT_UID, AGENT_UID)
    seed, dream = _terminated(pod, init=True), _terminated(pod, init=False)
    assert seed["exitCode"] == 0 and dream["exitCode"] == 0, (seed, dream)
    assert seed["finishedAt"] <= dream["startedAt"], (seed, dream)  # the init container ran first, to its end
    assert json.loads(seed["message"])["result"] == "created"  # the termination message, as the kubelet read it

    # The report, written as the agent's user into the fsGroup's setgid tree.
    report_path = agent.agent_dir / ".dreamkeeper" / "cycles" / f"{run['cycleId']}.json"
    owner = os.stat(report_path)
    assert (owner.st_uid, owner.st_gid) == (AGENT_UID, AGENT_UID), (owner.st_uid, owner.st_gid)
    report = _report(agent.agent_dir, run["cycleId"])
    assert report["result"] == "completed" and report["archived"] == run["archived"] > 0
    # The archive it wrote, as the agent's user (the agent reads and writes it back later).
    archives = ledger.cycle_archives(agent.agent_dir)
    assert archives, "the cycle archived nothing"
    assert os.stat(vocabulary).st_uid == AGENT_UID  # created by the init container, as the agent's user
    in_sync = condition(s, "VocabularyInSync")
    assert in_sync is not None and in_sync["status"] == "True", s["conditions"]

    # No-clobber: the agent's owner edits the file; the next cycle's init container leaves it byte-identical.
    edited = json.dumps({"alwaysSpecificWords": ["Rose", "Orion"]}).encode()
    vocabulary.write_bytes(edited)
    run_now(real_cluster, ns, "nightly", "second")
    s = wait_run(real_cluster, ns, "nightly", "second", stop=True)
    assert s["lastRun"]["result"] == "completed", s["lastRun"]
    assert vocabulary.read_bytes() == edited
    pod = job_pod(real_cluster, ns, s["lastRun"]["jobName"])
    assert json.loads(_terminated(pod, init=True)["message"])["result"] == "already-present"
    differs = condition(s, "VocabularyInSync")
    assert differs is not None and (differs["status"], differs["reason"]) == ("False", "Differs"), differs

    agent.wait_writing(1)
    agent.stop()
    watcher.stop()
    assert watcher.two_writers() == [], watcher.two_writers()[:3]  # never an agent pod beside a cycle pod
    assert watcher.cycles_seen() == 2
    assert ledger.overlaps(agent.records(), ledger.cycle_windows(agent.agent_dir)) == []
    check = ledger.check_corpus(agent.agent_dir, truth, agent.records())  # every agent write survived the cycles
    assert check.ok, check.summary()
    assert check.agent_increments > 10, check.agent_increments
    reasons = [e["reason"] for e in events_for(real_cluster, ns, "nightly")]
    for reason in ("AgentScaledDown", "CycleCompleted", "AgentRestored"):
        assert reasons.count(reason) == 2, (reason, reasons)


def test_a_cycle_over_its_memory_limit_is_oom_killed_reported_as_such_and_the_agent_restored(
    real_cluster: RealNodeCluster, release: Release, restricted_namespace: str, tmp_path: Path
) -> None:
    ns = restricted_namespace
    agent = _agent(real_cluster, ns, tmp_path).create()
    agent_spec = {"workloadRef": {"kind": "Deployment", "name": "rockbot"}, "coordination": "Stop"}
    # 40 MiB: the Python interpreter and the operator's imports need more, so the kernel kills the cycle.
    limits = {"requests": {"memory": "40Mi"}, "limits": {"memory": "40Mi"}}
    create_schedule(real_cluster, ns, "tight", agentPath="agent", agent=agent_spec, resources=limits)
    run_now(real_cluster, ns, "tight", "oom")
    s = wait_run(real_cluster, ns, "tight", "oom", stop=True)
    run = s["lastRun"]
    assert (run["result"], run["reason"]) == ("failed", "OOMKilled"), run
    assert "OOM killer at its memory limit 40Mi" in run["error"], run
    # What the kubelet reported, and what the operator made of it: condition, Event, lastRun.
    dream = _terminated(job_pod(real_cluster, ns, run["jobName"]), init=False)
    assert (dream["reason"], dream["exitCode"]) == ("OOMKilled", 137), dream
    last = condition(s, "LastRunSucceeded")
    assert last is not None and (last["status"], last["reason"]) == ("False", "OOMKilled"), last
    assert "raise spec.resources.limits.memory" in last["message"]
    failed = [e for e in events_for(real_cluster, ns, "tight") if e["reason"] == "CycleFailed"]
    assert len(failed) == 1 and "(OOMKilled)" in failed[0]["message"], failed
    # The agent is back after the failed cycle.
    assert s["agent"]["lastStop"]["reason"] == "CycleFinished", s["agent"]
    agent.wait_writing(1)
    assert agent.replicas() == 1


def test_kubectl_logs_of_a_failed_cycle_show_why_it_failed(
    real_cluster: RealNodeCluster, release: Release, restricted_namespace: str, tmp_path: Path
) -> None:
    ns = restricted_namespace
    local_volume(real_cluster, ns, tmp_path / "volume")
    create_schedule(real_cluster, ns, "misplaced", agentPath="missing")  # no agent directory there
    run_now(real_cluster, ns, "misplaced", "why")
    run = wait_run(real_cluster, ns, "misplaced", "why", stop=False)["lastRun"]
    assert (run["result"], run["reason"]) == ("failed", "CycleFailed"), run
    # The container's log, through the apiserver and the kubelet (`kubectl logs job/<name>` as a user would).
    logs = real_cluster.kubectl("logs", "-n", ns, f"job/{run['jobName']}", "-c", "dream").stdout
    assert "error: no memory directory at /data/missing/memory; nothing was changed" in logs, logs
    assert "no memory directory at /data/missing/memory" in run["error"]
