"""A DreamSchedule with ``format: openclaw`` on an OpenClaw-shaped PersistentVolume, against the real control plane.

The volume is laid out as OpenClaw's official manifests mount it (the PVC's root is OpenClaw's state directory,
``/home/node/.openclaw``: ``workspace/MEMORY.md``, ``USER.md``, months of ``workspace/memory/YYYY-MM-DD.md``), so the
schedule's ``agentPath`` is the volume's root. The cycle Job ingests the workspace, consolidates, and renders into
the agent's files; its counts reach the schedule's status.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dreamkeeper.demo.markdown_sample import generate_markdown_sample
from dreamkeeper.formats import PROFILES, units_root
from dreamkeeper.formats import records as rec
from dreamkeeper.formats.check import consistency
from dreamkeeper.memory import MemoryStore
from tests.cluster.kubeapi import ApiError
from tests.kube.cluster_support import Env, jobs_of, make_agent, read_cycle_report

pytestmark = pytest.mark.cluster


def _openclaw_volume(volume_dir: Path) -> Path:
    generate_markdown_sample("openclaw", volume_dir)
    return volume_dir


def test_a_dreamschedule_with_format_openclaw_runs_a_cycle_job_on_an_openclaw_volume(env: Env) -> None:
    agent_dir = make_agent(env.cluster, env.ns, env.host, populate=_openclaw_volume)
    memory = agent_dir / "workspace" / "MEMORY.md"
    days = {p.name: p.read_bytes() for p in (agent_dir / "workspace" / "memory").glob("*.md")}
    env.operator.start()
    env.schedule(
        "openclaw-memory",
        agentPath="",
        format="openclaw",
        formatProfile={"appendOnlyLogs": True},
        runNowToken="first",
        safeguards={"minIntervalHours": 0, "archiveCap": 1.0, "similarityThreshold": 0.5},
        activeDeadlineSeconds=600,
    )
    status = env.wait_status("openclaw-memory", "the cycle counted", lambda s: s.get("lastRun"))
    run = status["lastRun"]
    assert run["result"] == "completed", run
    (job,) = jobs_of(env.cluster, env.ns)
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert '"format":{"appendOnlyLogs":true,"name":"openclaw"}' in args[args.index("--settings-json") + 1]
    report = read_cycle_report(agent_dir, run["cycleId"])
    assert report["folded"] > 0 and report["hardDeletes"] == 0
    assert report["unitsTakenOut"] > 0 and run["unitsTakenOut"] == report["unitsTakenOut"]
    assert run["unitsWritten"] == report["unitsWritten"]
    # The agent's files: MEMORY.md rewritten, every daily note byte for byte (append-only), nothing of ours inside.
    assert memory.read_text(encoding="utf-8").startswith("# Long-term memory")
    for name, data in days.items():
        assert (agent_dir / "workspace" / "memory" / name).read_bytes() == data
    assert not list((agent_dir / "workspace").rglob("*.json")) or all(
        ".dreams" in str(p) for p in (agent_dir / "workspace").rglob("*.json")
    )
    store = MemoryStore(units_root(agent_dir))
    archived = [s.entry for s in store.scan().entries if s.entry.is_archived]
    assert archived and all(e.meta(rec.FILE) for e in archived)
    assert consistency(agent_dir, PROFILES["openclaw"], store).problems == []
    assert env.operator.tracebacks() == [], env.operator.log_text()[-3000:]


def test_a_profile_for_rockbot_is_refused_by_the_api_server(env: Env) -> None:
    with pytest.raises(ApiError) as refused:
        env.schedule("wrong", format="rockbot", formatProfile={"appendOnlyLogs": False})
    assert refused.value.status == 422 and "formatProfile is for a Markdown format" in str(refused.value)
    with pytest.raises(ApiError) as unknown:
        env.schedule("unknown", format="obsidian")
    assert unknown.value.status == 422
