"""Real cycles against llama.cpp's server holding #18's adversarial invariants: no specific vanishes from the live
corpus through a prune or merge, no inventive merge is accepted, nothing is stamped declined from invented ids, and
a failed server gives the proposer-failed result.

The hostile replies come from the real model through the real server: the test's JSON schema (sent as the
``response_format`` llama.cpp turns into a grammar) constrains the model to them, so what the engine receives is
what the server sent, through the real ``openai`` client and the proposer's parsing — and the test does not depend
on what a 135M model would have said unconstrained. What survived is judged by the bench's independent judge
(bench/realmodel_judge.py), not by the engine's own checks.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from bench.realmodel_judge import Lexicon, invented, last_mentions

from dreamkeeper.consolidation.cycle import CycleOptions, CycleOutcome, run_cycle
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.dream_command import EXIT_PROPOSER_FAILED
from dreamkeeper.memory import MemoryStore
from dreamkeeper.memory.entry import DECLINED_CLUSTER, REVIEWED_HASH, UNUSABLE_COUNT
from dreamkeeper.proposers import openai_output
from tests.consolidation.corpus import BASE_TIME, Seed, write_corpus
from tests.proposers.test_openai_cli import dreamkeeper
from tests.realmodel.server import LlamaServer
from tests.realmodel.test_proposer import local_key, proposer

__all__ = ["local_key"]  # the fixture, imported for the tests here

SEEDS = [
    # Finding 6: two meeting entries about one person, both below the floor, and his e-mail.
    Seed("tom1", "Met Tomasz Whitfield on 2026-04-19 about the Tailspin renewal.", "people/tomasz", 0.39),
    Seed("tom2", "Met Tomasz Whitfield on 2026-04-19 about the Tailspin renewal!", "people/tomasz", 0.38),
    Seed("tom3", "Tomasz Whitfield's e-mail is tomasz.whitfield@tailspin.example.", "people/tomasz", 0.4),
    Seed("milo1", "Milo the Sheltie was adopted from Prairie Rescue in 2019.", "pets"),
    Seed("milo2", "Milo, the Sheltie, was adopted from Prairie Rescue in 2019!", "pets"),
    Seed("solo", "Status: waiting on the Tripit export for the Las Vegas trip.", "active-plans/travel"),
]
# Finding 7's merge: a date and a contact no source has.
INVENTIVE = "Milo the Sheltie was adopted from Prairie Rescue in 2019 (2017-03-04); contact John Smith, jsmith.example."


def const(value: Any) -> dict[str, Any]:
    return {"const": value}


def forcing(proposal: dict[str, Any], repair: str | None = None) -> Any:
    """A ``response_format`` whose schema admits one reply: the hostile proposal (and repair), as a grammar."""

    def response_format(mode: str, kind: str, object_schema: bool = True) -> dict[str, Any]:
        if kind == "proposal":
            properties = {k: const(v) for k, v in proposal.items()}
            schema = {"type": "object", "properties": properties, "required": list(proposal)}
        else:
            schema = {"type": "object", "properties": {"content": const(repair or "")}, "required": ["content"]}
        return {"type": "json_object", "schema": schema}

    return response_format


def cycle(agent: Path, server: LlamaServer, **config: Any) -> CycleOutcome:
    p = proposer(server, output_mode="json_object", offer_singletons=True, **config)
    # RockBot's batch layout, subsumption off: these replies are forced word for word and name the entries' ids,
    # which only RockBot's layout shows, and every seed cluster must reach the model for the reply to be about it.
    settings = CycleSettings(min_interval_hours=0, offer_shape="batches", subsume=False)
    options = CycleOptions(agent_dir=agent, settings=settings, now=BASE_TIME)
    return asyncio.run(run_cycle(options, p))


def live_texts(agent: Path) -> dict[str, str]:
    return {s.id: s.entry.content for s in MemoryStore(agent / "memory").scan().live}


def test_a_hostile_reply_from_the_real_server_takes_nothing_out_of_the_live_corpus(
    smollm2_server: LlamaServer, local_key: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_corpus(tmp_path, SEEDS)
    hostile = {
        "toDelete": ["tom1", "tom2", "tom3", "solo"],  # every mention of Tomasz, and the only one of Tripit
        "toSave": [{"content": INVENTIVE, "sourceIds": ["milo1", "milo2"], "category": "pets"}],
    }
    monkeypatch.setattr(openai_output, "response_format", forcing(hostile, repair=INVENTIVE))
    before = live_texts(tmp_path)
    lexicon = Lexicon.of(before.values())
    outcome = cycle(tmp_path, smollm2_server)
    report = outcome.report
    assert report.result == "completed", report.proposer_failure
    # The server really sent the hostile reply (the engine saw four prunes and a merge) ...
    assert report.batches_usable == 1 and report.invented == 1 and report.rejected == 1
    assert report.prunes_refused >= 2 and report.ephemeral <= 2
    # ... and nothing a live entry said before is unsaid now (independent judge), nothing inventive was saved.
    after = live_texts(tmp_path)
    for entry_id, text in before.items():
        assert last_mentions(text, after.values(), lexicon) == [], entry_id
    assert outcome.plan is not None
    for merge in outcome.plan.merges:
        assert invented([s.entry.content for s in merge.sources], merge.successor.content, lexicon) == []
    assert report.specifics_lost == 0 and report.hard_deletes == 0
    assert report.rejections[0].invented and "after repair" in report.rejections[0].reason


def test_a_reply_of_invented_ids_from_the_real_server_stamps_nothing(
    smollm2_server: LlamaServer, local_key: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SmolLM2's own reply to the sample agent (finding 5), which stamped all 39 clusters declined.
    placeholder = {"toDelete": ["<id>"], "toSave": [{"content": "...", "category": "...", "sourceIds": ["<id>"]}]}
    write_corpus(tmp_path, SEEDS)
    monkeypatch.setattr(openai_output, "response_format", forcing(placeholder))
    report = cycle(tmp_path, smollm2_server).report
    assert (report.result, report.invented_replies, report.declined) == ("proposer-failed", 1, 0)
    for stored in MemoryStore(tmp_path / "memory").scan().live:
        entry = stored.entry
        assert entry.meta(DECLINED_CLUSTER) is None and entry.meta(REVIEWED_HASH) is None, stored.id
        assert entry.meta(UNUSABLE_COUNT) == "1"  # the back-off counts it


@pytest.mark.realmodel
def test_a_failed_server_is_proposer_failed_exit_5(tmp_path: Path) -> None:
    server = LlamaServer("smollm2", state_dir=tmp_path / "server").start()
    base_url = server.base_url
    server.stop()  # the server is gone: every request of the cycle fails
    write_corpus(tmp_path / "agent", SEEDS)
    done = dreamkeeper(
        tmp_path / "agent", "--proposer", "openai", "--model", "smollm2", "--base-url", base_url,
        "--max-retries", "1", "--timeout", "10", "--offer-singletons", "--defer-below-entries", "0",
        "--min-interval-hours", "0", "--settings-json", '{"subsume": false}', "--json",
    )  # fmt: skip
    # (subsumption off: it settles the seeds' clusters with no model, and this test is about the model's absence)
    assert done.returncode == EXIT_PROPOSER_FAILED, done.stderr
    report = json.loads(done.stdout)
    assert report["result"] == "proposer-failed" and report["batchesFailed"] >= 1 and report["batchesUsable"] == 0
    assert live_texts(tmp_path / "agent").keys() == {s.id for s in SEEDS}
