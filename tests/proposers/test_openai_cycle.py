"""Whole dream cycles with the OpenAI proposer against the fake server: whatever the server does, nothing is lost
and the report says what happened."""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from dreamkeeper.consolidation.cycle import CycleOptions, CycleOutcome, run_cycle
from dreamkeeper.consolidation.report import read_report
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.memory import MemoryStore
from dreamkeeper.memory.entry import DECLINED_CLUSTER, REJECTED_CLUSTER, REVIEWED_HASH, UNUSABLE_COUNT
from dreamkeeper.proposers.config import ProposerConfig
from dreamkeeper.proposers.openai import OpenAIProposer
from dreamkeeper.proposers.prompts import OFFER_CONTRACT, REPLY_CONTRACT, default_directive
from tests.consolidation.corpus import BASE_TIME, ROCKBOT_SHAPE, Seed, entry_files, write_corpus
from tests.proposers.fake_openai import FakeOpenAIServer, RecordedRequest, Reply
from tests.proposers.scenario import ALL_IDS, ALLEN, EMPTY, GOOD, MILO, MILO_2, SEEDS, merge


@dataclass
class Run:
    outcome: CycleOutcome
    store: MemoryStore
    agent_dir: Path

    @property
    def report(self) -> Any:
        return self.outcome.report

    def live(self) -> set[str]:
        return {s.id for s in self.store.scan().live}

    def reviewed(self, entry_id: str) -> bool:
        stored = self.store.get(entry_id)
        return stored is not None and stored.entry.meta(REVIEWED_HASH) is not None


def dream(
    agent_dir: Path,
    server: FakeOpenAIServer,
    now: datetime = BASE_TIME,
    settings: dict[str, Any] | None = None,
    **config: Any,
) -> Run:
    options = dict(model="m", base_url=server.base_url, timeout=5.0, max_retries=2)
    options.update(config)
    proposer = OpenAIProposer(ProposerConfig(type="openai", **options))
    # RockBot's layout unless a test asks otherwise: these tests are about replies to it.
    cycle_settings = CycleSettings(**{"min_interval_hours": 0, **ROCKBOT_SHAPE, **(settings or {})})
    outcome = asyncio.run(run_cycle(CycleOptions(agent_dir=agent_dir, settings=cycle_settings, now=now), proposer))
    return Run(outcome, MemoryStore(agent_dir / "memory"), agent_dir)


def assert_nothing_lost(run: Run, ids: set[str] = ALL_IDS) -> None:
    """Every initial entry still has its file and resolves by id, live or archived; nothing was hard-deleted."""
    assert ids <= entry_files(run.agent_dir)
    for entry_id in ids:
        assert run.store.get(entry_id) is not None, entry_id
    assert run.report.hard_deletes == 0
    assert run.report.specifics_lost == 0
    on_disk = read_report(run.agent_dir, run.report.cycle_id)  # the written report says the same
    assert on_disk.llm_calls == run.report.llm_calls and on_disk.input_tokens == run.report.input_tokens


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    write_corpus(tmp_path, SEEDS)
    return tmp_path


def offered_ids(request: RecordedRequest) -> set[str]:
    return {i for i in ALL_IDS if f"[ID:{i}]" in request.user_text}


def test_good_proposals_are_applied_and_accounted(agent: Path, fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script(Reply.json(GOOD, prompt_tokens=812, completion_tokens=96))
    run = dream(agent, fake_openai, offer_singletons=False)  # the frugal mode
    assert_nothing_lost(run)
    r = run.report
    assert (r.saved, r.archived, r.archived_with_replacement, r.rejected, r.invalid_replies) == (2, 4, 4, 0, 0)
    assert (r.llm_calls, r.input_tokens, r.output_tokens) == (1, 812, 96)
    assert run.live() == {"solo1", "solo2"} | {s.id for s in run.store.scan().live if s.id not in ALL_IDS}
    assert len(run.live()) == 4
    # Only the near-duplicate pairs are shown; the lone entries have nothing to merge with and are reviewed as is.
    assert offered_ids(fake_openai.completions[0]) == {"milo1", "milo2", "allen1", "allen2"}
    assert "2 new or changed entries with no near-duplicate are not shown" in fake_openai.completions[0].user_text
    assert run.reviewed("solo1") and run.reviewed("solo2")
    assert any("2 entr(ies) with no near-duplicate reviewed without asking" in n for n in r.notes)
    payload = json.loads((run.outcome.report_path or Path()).read_text())
    assert (payload["llmCalls"], payload["inputTokens"], payload["outputTokens"]) == (1, 812, 96)


def test_lossy_merge_is_repaired_once_then_rejected_and_sources_kept(
    agent: Path, fake_openai: FakeOpenAIServer
) -> None:
    lossy = {"toDelete": ["milo1", "milo2"], "toSave": [merge("Milo the Sheltie was adopted.", "milo1", "milo2")]}
    fake_openai.script(
        Reply.json(lossy),
        Reply.json({"content": "Milo the Sheltie was adopted in 2019."}),  # still drops Prairie
    )
    run = dream(agent, fake_openai)
    assert_nothing_lost(run)
    r = run.report
    assert (r.saved, r.archived, r.rejected, r.repaired, r.llm_calls) == (0, 0, 1, 0, 2)
    assert "Prairie" in r.rejections[0].missing
    assert run.live() == ALL_IDS
    repair_prompt = fake_openai.completions[1].user_text
    assert "Missing — each must appear verbatim in your revision:" in repair_prompt and "- Prairie" in repair_prompt
    assert fake_openai.completions[1].body["response_format"]["json_schema"]["name"] == "merge_repair"
    assert run.store.require("milo1").entry.meta(REJECTED_CLUSTER) is not None


def test_lossy_merge_repaired_by_the_model_is_saved(agent: Path, fake_openai: FakeOpenAIServer) -> None:
    lossy = {"toDelete": [], "toSave": [merge("Milo the Sheltie was adopted.", "milo1", "milo2")]}
    fake_openai.script(Reply.json(lossy), Reply.json({"content": MILO}))
    run = dream(agent, fake_openai)
    assert_nothing_lost(run)
    assert (run.report.repaired, run.report.saved, run.report.archived, run.report.llm_calls) == (1, 1, 2, 2)


def test_finding5_a_reply_of_invented_ids_decides_nothing(agent: Path, fake_openai: FakeOpenAIServer) -> None:
    invented = {"toDelete": ["ghost0000001", "solo9"], "toSave": [merge("Ghosts are real.", "ghost1", "ghost2")]}
    fake_openai.script(Reply.json(invented))
    run = dream(agent, fake_openai)
    assert_nothing_lost(run)
    assert run.live() == ALL_IDS
    r = run.report
    assert (r.saved, r.archived, r.invalid_replies, r.declined) == (0, 0, 0, 0)
    assert (r.invented_replies, r.batches_unusable, r.batches_usable) == (1, 1, 0)
    assert r.result == "proposer-failed"  # the only batch asked got no usable reply
    # Nothing stamped reviewed or declined: offered again, with a back-off stamp from the second time on.
    for entry_id in ALL_IDS:
        entry = run.store.require(entry_id).entry
        assert entry.meta(REVIEWED_HASH) is None and entry.meta(DECLINED_CLUSTER) is None, entry_id
        assert entry.meta(UNUSABLE_COUNT) == "1"


def test_finding5_the_contracts_placeholder_copied_back_decides_nothing(
    agent: Path, fake_openai: FakeOpenAIServer
) -> None:
    # SmolLM2's reply to the sample agent, 39 clusters stamped declined from it before #18.
    placeholder = {"toDelete": [], "toSave": [{"content": "...", "category": "...", "sourceIds": ["<id>"]}]}
    fake_openai.script(Reply.json(placeholder))
    run = dream(agent, fake_openai)
    assert (run.report.invented_replies, run.report.declined) == (1, 0)
    assert not any(run.reviewed(i) for i in ALL_IDS)


def test_a_reply_naming_one_offered_id_is_a_decision(agent: Path, fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script(Reply.json({"toDelete": ["ghost0000001"], "toSave": [merge(MILO, "milo1", "ghost")]}))
    run = dream(agent, fake_openai)
    assert (run.report.invented_replies, run.report.batches_usable, run.report.result) == (0, 1, "completed")
    # The merge of milo1 alone (its own text) is refused as useless; the reply still decided about Milo's pair and
    # the lone entries. Allen's pair, which it never named, is undecided: unstamped, offered again (issue 23).
    assert run.report.refused_restating == 1 and run.report.undecided == 1
    assert all(run.reviewed(i) for i in ALL_IDS - {"milo1", "allen1", "allen2"})
    assert not run.reviewed("allen1") and not run.reviewed("allen2")


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (Reply(content='{"toDelete": ["milo1", "toSave": [}'), "JSON does not parse"),
        (Reply(content=""), "empty reply"),
        (Reply(content='{"toDelete": "milo1"}'), "proposal schema"),
        (Reply(content=None, refusal="I can't do that."), "refused"),
    ],
)
def test_unusable_reply_changes_nothing_and_stamps_nothing(
    agent: Path, fake_openai: FakeOpenAIServer, reply: Reply, why: str
) -> None:
    fake_openai.script(reply)
    run = dream(agent, fake_openai)
    assert_nothing_lost(run)
    assert run.live() == ALL_IDS
    r = run.report
    assert (r.invalid_replies, r.llm_calls, r.saved, r.archived) == (1, 1, 0, 0)
    assert not any(run.reviewed(i) for i in ALL_IDS)  # offered again next cycle


@pytest.mark.parametrize(
    "wrap",
    [
        lambda body: f"<think>The user wants {{merges}}. Let me check ids.</think>\n{body}",
        lambda body: f"Sure! Here is the consolidation:\n```json\n{body}\n```\nLet me know.",
        lambda body: f"<think>hmm</think>```\n{body}\n```",
    ],
    ids=["think", "fence", "think+fence"],
)
def test_wrapped_replies_are_read(agent: Path, fake_openai: FakeOpenAIServer, wrap: Any) -> None:
    fake_openai.script(Reply(content=wrap(json.dumps(GOOD, indent=2))))
    run = dream(agent, fake_openai)
    assert_nothing_lost(run)
    assert (run.report.saved, run.report.archived, run.report.invalid_replies) == (2, 4, 0)


def test_429_then_success(agent: Path, fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script(Reply.error(429, "Rate limit", {"Retry-After": "0.6"}), Reply.json(GOOD))
    run = dream(agent, fake_openai)
    assert_nothing_lost(run)
    first, second = (r.received_at for r in fake_openai.completions)
    assert second - first >= 0.6  # the server's wait (the client's first backoff is at most 0.5 s)
    assert (run.report.llm_calls, run.report.saved, run.report.archived) == (2, 2, 4)


def test_500s_until_retries_end(agent: Path, fake_openai: FakeOpenAIServer) -> None:
    fake_openai.responder = lambda _r: Reply.error(500, "internal error", {"retry-after-ms": "1"})
    run = dream(agent, fake_openai, max_retries=3)
    assert_nothing_lost(run)
    assert run.live() == ALL_IDS and not any(run.reviewed(i) for i in ALL_IDS)
    r = run.report
    assert (r.llm_calls, r.input_tokens, r.saved, r.archived) == (4, 0, 0, 0)
    assert len(fake_openai.completions) == 4
    assert any("endpoint unavailable" in n and "HTTP 500" in n for n in r.notes)


def test_slow_reply_past_the_timeout(agent: Path, fake_openai: FakeOpenAIServer) -> None:
    fake_openai.responder = lambda _r: Reply.json(GOOD, delay=30)
    run = dream(agent, fake_openai, timeout=0.3, max_retries=3)
    assert_nothing_lost(run)
    assert run.live() == ALL_IDS and not any(run.reviewed(i) for i in ALL_IDS)
    # Not retried (the server may still be generating it), and no more requests this cycle.
    assert run.report.llm_calls == 1 and any("timed out" in n for n in run.report.notes)


def test_server_rejecting_json_schema(agent: Path, openai_env: None) -> None:
    with FakeOpenAIServer(reject_formats={"json_schema"}) as server:
        server.script(Reply.json(GOOD))
        run = dream(agent, server)
        assert_nothing_lost(run)
        assert [r.response_format for r in server.completions] == ["json_schema", "json_object+schema"]
        assert (run.report.saved, run.report.llm_calls) == (2, 2)
        assert any("using json_object with schema now" in n for n in run.report.notes)


def test_finding1_a_llama_cpp_server_is_asked_in_json_object_and_the_cycle_uses_its_reply(
    agent: Path, openai_env: None
) -> None:
    with FakeOpenAIServer.like_llama_cpp() as server:
        server.script(Reply.json(GOOD))
        run = dream(agent, server, max_retries=4)
        assert_nothing_lost(run)
        assert [r.status for r in server.completions] == [500, 200]
        assert (run.report.saved, run.report.archived, run.report.llm_calls) == (2, 4, 2)
        assert not any("endpoint unavailable" in n for n in run.report.notes)


# ---- #18 finding 4: a reply cut off at max_tokens ------------------------------------------------------------------


def test_finding4_a_cut_off_reply_is_asked_again_in_halves_and_used(agent: Path, fake_openai: FakeOpenAIServer) -> None:
    milo, allen = GOOD["toSave"]
    fake_openai.script(
        Reply(content=json.dumps(GOOD)[:60], finish_reason="length"),
        Reply.json({"toDelete": [], "toSave": [milo]}),
        Reply.json({"toDelete": [], "toSave": [allen]}),
    )
    run = dream(agent, fake_openai)
    assert_nothing_lost(run)
    whole, first, second = fake_openai.completions
    assert "[ID:milo1]" in whole.user_text and "[ID:allen1]" in whole.user_text
    # Each half shows one cluster and may answer at the whole batch's length.
    assert ("[ID:milo1]" in first.user_text) != ("[ID:milo1]" in second.user_text)
    assert ("[ID:allen1]" in first.user_text) != ("[ID:allen1]" in second.user_text)
    assert first.body["max_tokens"] == second.body["max_tokens"] == whole.body["max_tokens"]
    r = run.report
    assert (r.llm_calls, r.invalid_replies, r.saved, r.archived) == (3, 0, 2, 4)


def test_finding4_cut_off_again_when_halved_is_counted_once_and_stamps_nothing(
    agent: Path, fake_openai: FakeOpenAIServer
) -> None:
    cut = Reply(content=json.dumps(GOOD)[:60], finish_reason="length")
    fake_openai.script(cut, Reply(content=json.dumps(GOOD)[:30], finish_reason="length"))
    run = dream(agent, fake_openai)
    assert_nothing_lost(run)
    assert len(fake_openai.completions) == 2  # the second half is not worth asking once the first is unusable
    r = run.report
    assert (r.llm_calls, r.invalid_replies, r.saved, r.archived) == (2, 1, 0, 0)
    assert not any(run.reviewed(i) for i in ALL_IDS)


# ---- #18 finding 8: logged once; the contract where every chat template shows it -----------------------------------


def test_finding8_each_unusable_reply_is_logged_once(
    agent: Path, fake_openai: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    fake_openai.script(Reply(content="Here you go: nothing to merge, marker-7f3a."))
    with caplog.at_level(logging.DEBUG):
        run = dream(agent, fake_openai)
    assert run.report.invalid_replies == 1
    warned = [r for r in caplog.records if "marker-7f3a" in r.getMessage() and r.levelno >= logging.WARNING]
    assert len(warned) == 1, [r.getMessage() for r in warned]
    assert "no JSON object (prose only" in warned[0].getMessage()


def test_finding8_a_failed_request_is_logged_once(
    agent: Path, fake_openai: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    fake_openai.script(Reply.error(400, "bad request marker-91c2"))
    with caplog.at_level(logging.DEBUG):
        dream(agent, fake_openai)
    warned = [r for r in caplog.records if "marker-91c2" in r.getMessage() and r.levelno >= logging.WARNING]
    assert len(warned) == 1, [r.getMessage() for r in warned]


def test_finding8_the_reply_contract_ends_the_user_message(agent: Path, fake_openai: FakeOpenAIServer) -> None:
    # A custom dream.md gets the contract appended to the system message; a chat template that drops system
    # messages (llama-cpp-python's "gemma") would hide it, so the offer carries it too.
    (agent / "dream.md").write_text("You are Rocky's dream pass. Merge duplicates.\n")
    fake_openai.script(Reply.json(EMPTY))
    dream(agent, fake_openai)
    (sent,) = fake_openai.completions
    assert sent.user_text.endswith(OFFER_CONTRACT)
    assert "toDelete" in OFFER_CONTRACT and "sourceIds" in OFFER_CONTRACT


def test_the_contract_has_no_placeholder_id_to_copy() -> None:
    # SmolLM2 and Gemma copied the old contract's "<id>" into every reply (#18, bench/results/real-model.md).
    for text in (OFFER_CONTRACT, REPLY_CONTRACT, default_directive()):
        assert "<id>" not in text and '"..."' not in text


def test_an_id_written_in_the_offers_notation_is_refused(agent: Path, fake_openai: FakeOpenAIServer) -> None:
    # Gemma 3 answered "id:78053206c63b"; Qwen2.5-Coder 1.5B gave "ID:083200b7a724" as the source of a merge whose
    # text was the offer's header line (issue 23): an id in the offer's notation is the layout copied, refused.
    fake_openai.script(Reply.json({"toDelete": [], "toSave": [merge(MILO, "ID:milo1", "[ID:milo2]")]}))
    run = dream(agent, fake_openai)
    assert (run.report.saved, run.report.refused_notation, run.report.invented_replies) == (0, 1, 0)
    assert {"milo1", "milo2"} <= run.live()


def pair_merger(request: RecordedRequest) -> Reply:
    """A scripted model: merges whichever known pair it is shown (lossless), 700 prompt tokens per request."""
    saves = []
    if "[ID:milo1]" in request.user_text:
        saves.append(merge(MILO, "milo1", "milo2"))
    if "[ID:allen1]" in request.user_text:
        saves.append(merge(ALLEN, "allen1", "allen2"))
    return Reply.json({"toDelete": [], "toSave": saves}, prompt_tokens=700, completion_tokens=50)


def test_token_budget_keeps_what_was_validated(agent: Path, fake_openai: FakeOpenAIServer) -> None:
    # Batches of at most 2 entries: one pair, the other pair, then the two singles. Only the first fits the budget
    # (the singles are shown too: the default offers lone entries).
    fake_openai.responder = pair_merger
    run = dream(agent, fake_openai, settings={"batch_max_entries": 2}, token_budget=1600)
    assert_nothing_lost(run)
    r = run.report
    assert r.budget_exhausted and r.llm_calls == 1 and len(fake_openai.completions) == 1
    first = offered_ids(fake_openai.completions[0])
    assert first in ({"milo1", "milo2"}, {"allen1", "allen2"})
    assert (r.saved, r.archived) == (1, 2)
    assert not (first & run.live())
    other_pair = {"milo1", "milo2", "allen1", "allen2"} - first
    assert other_pair | {"solo1", "solo2"} <= run.live()
    assert not any(run.reviewed(i) for i in other_pair)  # not sent: still unreviewed, offered next cycle
    assert any("token budget of 1600 reached" in n for n in r.notes)
    assert any("2 of 3 batch(es) not sent" in n for n in r.notes)


def test_offer_singletons_shows_every_eligible_entry(agent: Path, fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script(Reply.json({"toDelete": ["solo2"], "toSave": []}))
    run = dream(agent, fake_openai)  # the default
    assert_nothing_lost(run)
    sent = fake_openai.completions[0].user_text
    assert offered_ids(fake_openai.completions[0]) == ALL_IDS and "Other entries:" in sent
    assert "not shown" not in sent
    # The prune reached the engine's safeguards: the census keeps the only live mention of Tripit and Las Vegas.
    assert "solo2" in run.live() and run.report.prunes_refused == 1
    assert run.report.protections[0].census == ["Tripit", "Las", "Vegas"]
    assert run.report.ephemeral == 0 and run.reviewed("solo2")


# ---- the rejection memo (RockBot #550's treadmill) ---------------------------------------------------------------


def test_rejected_cluster_is_not_resent_until_changed_or_due(agent: Path, fake_openai: FakeOpenAIServer) -> None:
    lossy = {"toDelete": [], "toSave": [merge("Milo the Sheltie was adopted.", "milo1", "milo2")]}
    fake_openai.script(Reply.json(lossy), Reply(content="no"))  # the repair reply is unusable too
    first = dream(agent, fake_openai)
    assert first.report.rejected == 1
    assert first.store.require("milo1").entry.meta(DECLINED_CLUSTER) is not None

    # Next day: two fresh near-duplicates arrive; the rejected Milo pair must not be in any request.
    store = first.store
    for seed in (Seed("new1", "Trish Roberts lives in Las Vegas."), Seed("new2", "Trish Roberts lives in Las Vegas!")):
        write_corpus(agent, [seed])
    fake_openai.requests.clear()
    fake_openai.script(Reply.json(EMPTY))
    second = dream(agent, fake_openai, now=BASE_TIME + timedelta(days=1))
    assert len(fake_openai.completions) == 1
    sent = fake_openai.completions[0].user_text
    assert "[ID:new1]" in sent and "[ID:milo1]" not in sent and "[ID:milo2]" not in sent
    assert second.report.llm_calls == 1

    # A member's content changes: the cluster is offered again.
    milo2 = store.require("milo2")
    store.update(milo2, milo2.entry.evolve(content=MILO_2 + " He is 8."))  # still a near-duplicate
    fake_openai.requests.clear()
    fake_openai.script(Reply.json(EMPTY))
    dream(agent, fake_openai, now=BASE_TIME + timedelta(days=2))
    sent = fake_openai.completions[0].user_text
    assert "[ID:milo1]" in sent and "[ID:milo2]" in sent


def test_declined_cluster_waits_for_its_reopen_time(agent: Path, fake_openai: FakeOpenAIServer) -> None:
    # Each cluster asked about on its own: "they differ" declines Milo's pair; Allen's is merged.
    def distinct_milo(request: RecordedRequest) -> Reply:
        if request.user_text.startswith("These memory entries") and "Milo" in request.user_text:
            return Reply.json({"same": False, "merged": ""})
        if request.user_text.startswith("These memory entries"):
            return Reply.json({"same": True, "merged": ALLEN})
        return Reply.json({"obsolete": []})

    shaped = {"offer_shape": "clusters"}
    fake_openai.responder = distinct_milo
    first = dream(agent, fake_openai, settings=shaped)
    assert (first.report.declined, first.report.saved) == (1, 1)

    fake_openai.requests.clear()
    for seed in (Seed("new1", "Trish Roberts lives in Las Vegas."), Seed("new2", "Trish Roberts lives in Las Vegas!")):
        write_corpus(agent, [seed])
    dream(agent, fake_openai, now=BASE_TIME + timedelta(days=3), settings=shaped)
    assert not any("Milo" in q.user_text for q in fake_openai.completions)

    # After the reopen interval (7 days) the pair is asked about again.
    fake_openai.requests.clear()
    late = dream(agent, fake_openai, now=BASE_TIME + timedelta(days=8), settings=shaped)
    assert any("Milo" in q.user_text for q in fake_openai.completions) and late.report.reopened == 1
    assert {"milo1", "milo2"} <= late.live()


def test_a_reopened_cluster_in_rockbots_layout_is_merge_only(agent: Path, fake_openai: FakeOpenAIServer) -> None:
    lossy = merge("Milo was adopted.", "milo1", "milo2")
    fake_openai.script(
        Reply.json({"toDelete": [], "toSave": [lossy, merge(ALLEN, "allen1", "allen2")]}),
        Reply.json({"content": "Milo was adopted."}),  # the repair drops the same specifics again
    )
    first = dream(agent, fake_openai)  # Milo's merge rejected: a rejection declines the cluster (RockBot #571)
    assert (first.report.rejected, first.report.declined) == (1, 1)
    fake_openai.requests.clear()
    fake_openai.script(Reply.json({"toDelete": ["milo1"], "toSave": []}))
    late = dream(agent, fake_openai, now=BASE_TIME + timedelta(days=8))
    sent = fake_openai.completions[0].user_text
    assert "[ID:milo1]" in sent and "[merge-only]" in sent and "offered again" in sent
    assert late.report.merge_only_ignored == 1
    assert "milo1" in late.live()


def test_small_fresh_offer_waits_for_a_later_cycle(tmp_path: Path, fake_openai: FakeOpenAIServer) -> None:
    fresh = [Seed(s.id, s.content, s.category, age_days=0) for s in SEEDS]
    write_corpus(tmp_path, fresh)
    first = dream(tmp_path, fake_openai)
    assert fake_openai.completions == [] and first.report.llm_calls == 0
    assert any("deferred to a later cycle" in n for n in first.report.notes)
    assert not any(first.reviewed(i) for i in ("milo1", "milo2", "allen1", "allen2"))
    assert first.live() == ALL_IDS

    fake_openai.script(Reply.json(GOOD))
    later = dream(tmp_path, fake_openai, now=BASE_TIME + timedelta(hours=25))
    assert_nothing_lost(later)
    assert (later.report.llm_calls, later.report.saved, later.report.archived) == (1, 2, 4)
