"""Requests shaped for a small model (issue 23 item 1), through the real ``openai`` client to the fake server over
HTTP: one near-duplicate component asked about on its own in a short request with no ids, lone entries reviewed for
pruning apart, a per-request token budget, and the response_format negotiation counted apart (item 4)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from dreamkeeper.consolidation.cycle import CycleOptions, CycleOutcome, run_cycle
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.memory import DECLINED_CLUSTER, REVIEWED_HASH, MemoryStore
from dreamkeeper.proposers.config import ProposerConfig
from dreamkeeper.proposers.openai import OpenAIProposer
from tests.consolidation.corpus import BASE_TIME, Seed, write_corpus
from tests.proposers.fake_openai import FakeOpenAIServer, RecordedRequest, Reply, estimate_tokens
from tests.proposers.scenario import ALLEN, MILO, SEEDS

pytestmark = pytest.mark.usefixtures("openai_env")

STATUS = "Status: waiting on the Tripit export for the Las Vegas trip."


def dream(agent: Path, server: FakeOpenAIServer, settings: dict[str, Any] | None = None, **config: Any) -> CycleOutcome:
    # Lone entries reviewed too (offer_singletons: the prune review), so every shape of request is exercised.
    options: dict[str, Any] = dict(
        model="m", base_url=server.base_url, timeout=5.0, max_retries=0, offer_singletons=True
    )
    options.update(config)
    proposer = OpenAIProposer(ProposerConfig(type="openai", **options))
    # No subsumption: every cluster is asked about, so the requests themselves are what is tested.
    cycle_settings = CycleSettings(min_interval_hours=0, subsume=False, **(settings or {}))
    return asyncio.run(run_cycle(CycleOptions(agent, cycle_settings, now=BASE_TIME), proposer))


def numbered(request: RecordedRequest) -> list[str]:
    return [m.group(1) for m in re.finditer(r"^\d+\. (.*)$", request.user_text, re.M)]


def answer(request: RecordedRequest) -> Reply:
    """A model that merges Milo's pair (keeping every detail), says Allen's differ, and retires the status note."""
    text = request.user_text
    if text.startswith("These memory entries may state one fact:"):
        if "Milo" in text:
            return Reply.json({"same": True, "merged": MILO})
        return Reply.json({"same": False, "merged": ""})
    lines = numbered(request)
    obsolete = [n for n, line in enumerate(lines, start=1) if "Status: waiting" in line]
    return Reply.json({"obsolete": obsolete})


def test_a_cluster_is_asked_on_its_own_in_a_short_request_without_ids(tmp_path: Path) -> None:
    write_corpus(tmp_path, SEEDS)
    with FakeOpenAIServer(responder=answer) as server:
        outcome = dream(tmp_path, server)
    r = outcome.report
    clusters = [q for q in server.completions if q.user_text.startswith("These memory entries may state one fact:")]
    reviews = [q for q in server.completions if "obsolete" in q.user_text]
    assert len(clusters) == 2 and len(reviews) == 1 and r.llm_calls == 3
    for request in clusters:
        assert "[ID:" not in request.prompt_text and "milo1" not in request.prompt_text  # nothing to copy back
        assert "category=" not in request.prompt_text and "Near-duplicate cluster" not in request.prompt_text
        assert "<" not in request.prompt_text  # no placeholder to copy (the 0.5B copied "<the one entry>")
        assert estimate_tokens(request.prompt_text) < 250  # ~200 tokens, where a 40-entry batch was ~5,000
        assert request.body["response_format"]["json_schema"]["name"] == "same_fact"
        assert request.body["max_tokens"] < 400
    assert sorted(len(numbered(q)) for q in clusters) == [2, 2]
    assert sorted(numbered(reviews[0])) == sorted(f"[{s.category}] {s.content}" for s in SEEDS if "solo" in s.id)
    # The engine decided: Milo merged (checked like any merge), Allen declined, the status note retired.
    assert (r.saved, r.archived_with_replacement, r.declined, r.batches_usable) == (1, 2, 1, 3)
    store = MemoryStore(tmp_path / "memory")
    assert store.require("allen1").entry.meta(DECLINED_CLUSTER) is not None
    # The prune the review proposed went through the census: the last live mention of Tripit and Las Vegas.
    assert (r.ephemeral, r.prunes_refused) == (0, 1) and store.require("solo2").entry.is_live
    assert any(s.entry.content == MILO and s.entry.is_live for s in store.scan().entries if s.id not in ("milo1",))


def test_a_same_reply_that_drops_a_detail_is_rejected_by_the_coverage_check(tmp_path: Path) -> None:
    write_corpus(tmp_path, SEEDS)

    def lossy(request: RecordedRequest) -> Reply:
        if request.user_text.startswith("These memory entries") and "Allen" in request.user_text:
            return Reply.json({"same": True, "merged": "Allen Conway works at Xebia."})
        if request.user_text.startswith("These memory entries"):
            return Reply.json({"same": False, "merged": ""})
        if "It leaves out" in request.user_text:  # the repair, in the same short shape
            return Reply.json({"content": "Allen Conway works at Xebia."})
        return Reply.json({"obsolete": []})

    with FakeOpenAIServer(responder=lossy) as server:
        r = dream(tmp_path, server).report
    assert (r.saved, r.rejected, r.archived) == (0, 1, 0)
    assert "Principal" in r.rejections[0].missing or "386-299-4605" in " ".join(r.rejections[0].missing)


def test_a_merge_asked_for_by_a_cluster_question_is_repaired_in_the_same_shape(tmp_path: Path) -> None:
    write_corpus(tmp_path, SEEDS)

    def repairing(request: RecordedRequest) -> Reply:
        text = request.user_text
        if text.startswith("These memory entries may state one fact:") and "Allen" in text:
            return Reply.json({"same": True, "merged": "Allen Conway works at Xebia, phone +1 386-299-4605."})
        if text.startswith("These memory entries may state one fact:"):
            return Reply.json({"same": False, "merged": ""})
        if "It leaves out" in text:
            return Reply.json({"content": ALLEN})
        return Reply.json({"obsolete": []})

    with FakeOpenAIServer(responder=repairing) as server:
        r = dream(tmp_path, server).report
    (repair,) = [q for q in server.completions if "It leaves out" in q.user_text]
    assert "[ID:" not in repair.prompt_text and "allen1" not in repair.prompt_text
    assert "Principal" in repair.user_text  # what it left out, named
    assert repair.body["response_format"]["json_schema"]["name"] == "merge_repair"
    assert (r.saved, r.repaired, r.rejected) == (1, 1, 0)


def test_replies_that_cannot_be_read_are_unusable(tmp_path: Path) -> None:
    write_corpus(tmp_path, SEEDS)
    replies = iter([{"same": True, "merged": ""}, {"same": "perhaps"}, {"obsolete": "3"}])
    with FakeOpenAIServer(responder=lambda request: Reply.json(next(replies))) as server:
        r = dream(tmp_path, server).report
    assert (r.batches_unusable, r.batches_usable, r.saved, r.archived) == (3, 0, 0, 0)
    assert r.result == "proposer-failed"


def test_review_numbers_that_name_no_entry_decide_nothing(tmp_path: Path) -> None:
    write_corpus(tmp_path, [Seed("solo1", STATUS, "active-plans"), Seed("solo2", ALLEN, "people")])
    with FakeOpenAIServer(responder=lambda request: Reply.json({"obsolete": [7, 9]})) as server:
        r = dream(tmp_path, server).report
    assert (r.batches_unusable, r.invented_replies, r.ephemeral) == (1, 1, 0)


def test_a_response_format_refusal_is_counted_apart_from_failed_calls(tmp_path: Path) -> None:
    # llama.cpp answers json_schema with HTTP 500; the proposer moves to json_object. Today every such cycle
    # reported one failed call.
    write_corpus(tmp_path, SEEDS)
    with FakeOpenAIServer.like_llama_cpp(responder=answer) as server:
        r = dream(tmp_path, server).report
    assert (r.format_refusals, r.failed_calls, r.batches_failed, r.batches_usable) == (1, 0, 0, 3)
    assert r.llm_calls == 4  # the refused request, then the three in json_object with the schema
    assert server.completions[1].response_format == "json_object+schema"


def test_a_prune_review_over_the_request_budget_is_asked_in_parts(tmp_path: Path) -> None:
    texts = [
        "The NAS in the closet backs up every night at 02:00 to the cloud bucket.",
        "Jordan drinks green tea in the morning and coffee after lunch.",
        "The home VPN uses WireGuard on port 51820.",
        "Rent for the studio is due on the first of each month.",
        "The dentist appointment reminder goes out two days ahead.",
        "Grafana dashboards live in the ops folder of the monorepo.",
        "The printer on the second floor needs toner every quarter.",
        "Podcast recordings happen on Tuesdays in the small studio.",
        "The cat's vaccination is due again next spring.",
        "Expense reports are filed through the finance portal.",
        "The garden hose connects to the tap behind the garage.",
        "Library books are returned at the branch on Maple Street.",
    ]
    write_corpus(tmp_path, [Seed(f"s{n:02d}", text) for n, text in enumerate(texts)])
    with FakeOpenAIServer(responder=lambda request: Reply.json({"obsolete": []})) as server:
        r = dream(tmp_path, server, request_token_budget=256)
    sizes = [len(numbered(q)) for q in server.completions]
    assert sum(sizes) == 12 and len(sizes) > 1
    assert all(estimate_tokens(q.prompt_text) <= 256 for q in server.completions)
    assert r.report.batches_usable == 1 and r.report.reviewed == 12


def test_lone_entries_are_not_asked_about_by_default_in_the_clusters_shape(tmp_path: Path) -> None:
    # Measured: asked which lone entries were obsolete, Qwen2.5-Coder 1.5B named 97 of ~100 (people, preferences,
    # past meetings) and 15 of the 47 the census let through took a last date or number out of the live corpus.
    write_corpus(tmp_path, SEEDS)
    with FakeOpenAIServer(responder=answer) as server:
        r = dream(tmp_path, server, offer_singletons=None).report
    assert all(q.user_text.startswith("These memory entries may state one fact:") for q in server.completions)
    assert (r.llm_calls, r.ephemeral) == (2, 0)
    store = MemoryStore(tmp_path / "memory")
    assert all(store.require(i).entry.meta(REVIEWED_HASH) is not None for i in ("solo1", "solo2"))  # unasked


def test_the_batches_shape_keeps_rockbots_layout(tmp_path: Path) -> None:
    write_corpus(tmp_path, SEEDS)
    with FakeOpenAIServer(responder=lambda request: Reply.json({"toDelete": [], "toSave": []})) as server:
        dream(tmp_path, server, settings={"offer_shape": "batches"})
    (request,) = server.completions
    assert "[ID:milo1]" in request.user_text and "Near-duplicate cluster:" in request.user_text
    assert request.body["response_format"]["json_schema"]["name"] == "dream_proposal"
