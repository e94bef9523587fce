"""Finding 4 of issue 17 on the real control plane: a hostile model's prune storm is held, not applied.

The trial's cycle archived a quarter of a corpus (46 ephemeral prunes) and reported a Normal CycleCompleted. Here
the same kind of model (the fake OpenAI server on loopback, asking to prune most of what it is shown) meets the
blast-radius cap: the cycle archives nothing of its plan, says so (run reason Held, ArchivesHeld Warning), keeps
the plan on the agent's volume, and applies it only when the schedule approves that plan (spec.approveHold).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.kube.cluster_support import Env, events_of, eventually, jobs_of, make_agent
from tests.proposers.fake_openai import FakeOpenAIServer, RecordedRequest, Reply

pytestmark = pytest.mark.cluster

ID = re.compile(r"\[ID:([0-9a-f]{12})\]")


def storm(request: RecordedRequest) -> Reply:
    """Prune two thirds of whatever it is shown; merge nothing."""
    ids = ID.findall(request.user_text)
    return Reply.json({"toSave": [], "toDelete": ids[: (2 * len(ids)) // 3]})


def test_a_prune_storm_is_held_then_applied_on_approval(env: Env) -> None:
    agent_dir = make_agent(env.cluster, env.ns, env.host)
    with FakeOpenAIServer(storm) as server:
        env.operator.start()
        # RockBot's batch layout shows every entry with its id (the default cluster shape shows neither lone entries
        # nor ids), and subsumption is off, so the held plan is exactly the storm's prunes.
        proposer = {
            "type": "openai",
            "model": "m",
            "baseURL": server.base_url,
            "allowPlainHTTP": True,
            "offerShape": "batches",
        }
        safeguards = {"minIntervalHours": 0, "subsume": False}
        env.schedule("stormy", proposer=proposer, runNowToken="storm", safeguards=safeguards)
        status = env.wait_status("stormy", "the storm counted", lambda s: s.get("lastRun"), timeout=180)
        run = status["lastRun"]
        assert (run["result"], run["reason"]) == ("completed", "Held"), run
        held_file = agent_dir / ".dreamkeeper" / "holds" / "pending.json"
        held: dict[str, Any] = json.loads(held_file.read_text())
        assert held["cycle_id"] == run["cycleId"] and held["outcome"] is None
        assert run["held"] == held["drop"] == len(held["prunes"]) > held["live"] // 10
        assert run["archived"] == run["folded"] and run["ephemeral"] == 0  # only the exact-duplicate fold ran
        assert f"spec.approveHold: {run['cycleId']}" in run["skipReason"]

        # Events and metrics follow the status patch (a pass reports only what it persisted): poll, do not race it.
        def held_events() -> dict[str, Any] | None:
            reasons = {e["reason"]: e for e in events_of(env.cluster, env.ns, "stormy")}
            return reasons if {"ArchivesHeld", "ManyArchived"} <= reasons.keys() else None

        reasons = eventually(env.cluster, "the Held Events", held_events, timeout=60)
        assert reasons["ArchivesHeld"]["type"] == "Warning"
        assert reasons["ManyArchived"]["type"] == "Warning"  # the fold alone took over 3% out
        ident = {"dreamschedule": "stormy", "dreamschedule_namespace": env.ns}
        eventually(
            env.cluster,
            "the held archives counted",
            lambda: env.operator.metric("dreamkeeper_archives_held_total", **ident) == run["held"],
            timeout=60,
        )

        # A human looked at the plan on the volume and approves it: the next cycle applies exactly it.
        requests = len(server.requests)
        env.patch_spec("stormy", approveHold=run["cycleId"], runNowToken="approve")
        status = env.wait_status(
            "stormy", "the approved plan applied", lambda s: s.get("lastRunNowToken") == "approve" and
            (s.get("lastRun") or {}).get("jobName") != run["jobName"], timeout=180,
        )  # fmt: skip
        applied = status["lastRun"]
        assert (applied["result"], applied["reason"]) == ("completed", "Completed"), applied
        assert applied["ephemeral"] == len(held["prunes"]) and applied["hardDeletes"] == 0
        assert len(server.requests) == requests  # the model was not asked again
    approving_job = next(j for j in jobs_of(env.cluster, env.ns) if j["metadata"]["name"] == applied["jobName"])
    args = approving_job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--approve-hold") + 1] == run["cycleId"]
    assert json.loads(held_file.read_text())["outcome"] == "applied"
    assert env.operator.tracebacks() == [], env.operator.log_text()[-3000:]
