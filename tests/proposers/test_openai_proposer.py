"""The OpenAI proposer on its own: the real ``openai`` client against the fake server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
import threading
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from dreamkeeper.consolidation.proposal import (
    Batch,
    BatchReply,
    MergeProposal,
    OfferedEntry,
    OfferGroup,
    Proposal,
    ProposalRequest,
    RepairRequest,
)
from dreamkeeper.memory import Entry
from dreamkeeper.proposers.config import MissingAPIKeyError, ProposerConfig
from dreamkeeper.proposers.factory import make_proposer
from dreamkeeper.proposers.openai import OpenAIProposer
from dreamkeeper.proposers.openai_output import reply_tokens
from dreamkeeper.proposers.prompts import PROPOSAL_SCHEMA
from tests.proposers.fake_openai import FakeOpenAIServer, Reply

T0 = datetime(2026, 3, 1, tzinfo=UTC)
EMPTY: dict[str, list[Any]] = {"toDelete": [], "toSave": []}


def batch(index: int, *ids: str) -> Batch:
    entries = tuple(OfferedEntry(Entry(id=i, content=f"Fact {i} about Milo.", created_at=T0)) for i in ids)
    return Batch(index, (OfferGroup(ids, len(ids) > 1),), entries)


def request(*batches: Batch) -> ProposalRequest:
    return ProposalRequest(
        batches=batches, total_entries=50, withheld=50 - sum(len(b.entries) for b in batches), now=T0
    )


def proposer(server: FakeOpenAIServer, **config: Any) -> OpenAIProposer:
    settings: dict[str, Any] = {
        "model": "m",
        "base_url": server.base_url,
        "timeout": 5.0,
        "max_retries": 2,
        "defer_below_entries": 0,  # these entries are brand new; deferral has its own tests
    }
    settings.update(config)
    return OpenAIProposer(ProposerConfig(type="openai", **settings))


def run_propose(p: OpenAIProposer, req: ProposalRequest) -> list[BatchReply]:
    async def go() -> list[BatchReply]:
        try:
            return await p.propose(req)
        finally:
            await p.aclose()

    return asyncio.run(go())


def test_one_request_per_batch_with_strict_schema_and_exact_token_accounting(fake_openai: FakeOpenAIServer) -> None:
    merge = {"content": "Milo is a Sheltie.", "category": None, "tags": [], "sourceIds": ["a", "b"], "importance": None}
    fake_openai.script(
        Reply.json({"toDelete": [], "toSave": [merge]}, prompt_tokens=321, completion_tokens=45),
        Reply.json(EMPTY, prompt_tokens=100, completion_tokens=7),
    )
    p = proposer(fake_openai, offer_singletons=False)  # the frugal mode: a batch of lone entries is not sent
    replies = run_propose(p, request(batch(0, "a", "b"), batch(1, "c", "d"), batch(2, "e")))
    assert [r.batch_index for r in replies] == [0, 1, 2]
    assert replies[0].proposal is not None and replies[0].proposal.to_save[0].source_ids == ["a", "b"]
    assert replies[1].proposal is not None and replies[1].proposal.to_save == []
    sent = fake_openai.completions
    assert len(sent) == 2
    assert sent[0].body["model"] == "m"
    assert sent[0].headers["authorization"] == "Bearer sk-test-not-a-real-key"
    fmt = sent[0].body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    assert [m["role"] for m in sent[0].messages] == ["system", "user"]
    assert "[ID:a]" in sent[0].user_text and "[ID:b]" in sent[0].user_text and "[ID:c]" not in sent[0].user_text
    assert "[ID:c]" in sent[1].user_text
    # A batch of lone entries is not sent: nothing to merge; "no change" is answered for it.
    assert replies[2].proposal is not None and replies[2].proposal == Proposal()
    assert all("[ID:e]" not in r.user_text for r in sent)
    usage = p.usage()
    assert (usage.calls, usage.input_tokens, usage.output_tokens) == (2, 421, 52)
    assert usage.invalid_replies == usage.failed_calls == 0


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (Reply(content=""), "empty reply"),
        (Reply(content=None), "empty reply"),
        (Reply(content="I would rather not."), "no JSON object"),
        (Reply(content='{"toDelete": ["a"'), "JSON is cut off"),
        (Reply(content=None, refusal="I can't help with that."), "model refused"),
        (Reply(content='{"toDelete": [], "toSave": [{"content": "Milo is', finish_reason="length"), "cut off"),
        (Reply(no_choices=True), "no choices"),
    ],
)
def test_unusable_replies_change_nothing_and_are_counted(
    fake_openai: FakeOpenAIServer, reply: Reply, why: str, caplog: pytest.LogCaptureFixture
) -> None:
    fake_openai.script(reply)
    p = proposer(fake_openai)
    with caplog.at_level(logging.DEBUG, logger="dreamkeeper.proposers.openai"):
        (out,) = run_propose(p, request(batch(0, "a", "b")))
    assert out.proposal is None and out.error is not None and why in out.error
    assert len(out.error) < 600  # previews are truncated
    assert p.usage().invalid_replies == 1 and p.usage().calls == 1
    # The engine logs the batch's error (once, at WARNING); the proposer only at DEBUG.
    unusable = [r for r in caplog.records if "unusable reply" in r.getMessage()]
    assert len(unusable) == 1 and unusable[0].levelno == logging.DEBUG


def gaps(server: FakeOpenAIServer) -> list[float]:
    times = [r.received_at for r in server.completions]
    return [later - earlier for earlier, later in pairwise(times)]


def test_429_with_retry_after_is_honoured_then_succeeds(fake_openai: FakeOpenAIServer) -> None:
    # Both waits are longer than the client's own backoff for that retry (at most 0.5 s, then 1 s), so a gap this
    # long is the server's number being honoured, not backoff.
    fake_openai.script(
        Reply.error(429, "Rate limit reached", {"Retry-After": "1"}),
        Reply.error(429, "Rate limit reached", {"retry-after-ms": "1200"}),
        Reply.json(EMPTY),
    )
    p = proposer(fake_openai, max_retries=3)
    (out,) = run_propose(p, request(batch(0, "a", "b")))
    assert out.proposal is not None
    first, second = gaps(fake_openai)
    assert first >= 1.0 and second >= 1.2
    assert (p.usage().calls, p.usage().failed_calls) == (3, 2)


def test_5xx_retried_until_the_client_gives_up_then_stops_asking(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.responder = lambda _req: Reply.error(503, "overloaded", {"retry-after-ms": "1"})
    p = proposer(fake_openai, max_retries=3)
    replies = run_propose(p, request(batch(0, "a", "b"), batch(1, "c", "d"), batch(2, "e", "f")))
    assert all(r.proposal is None for r in replies)
    assert len(fake_openai.completions) == 4  # 1 + 3 retries for the first batch, then no more requests
    usage = p.usage()
    assert (usage.calls, usage.failed_calls, usage.invalid_replies) == (4, 4, 0)
    assert any("endpoint unavailable" in n and "gave up after 3 retries" in n for n in usage.notes)
    assert any("2 of 3 batch(es) not sent" in n for n in usage.notes)
    assert "HTTP 503" in (replies[0].error or "")


@pytest.mark.parametrize("asked", ["90", "retry-after-ms:90000", "http-date"])
def test_retry_after_longer_than_our_patience_is_not_waited_for(fake_openai: FakeOpenAIServer, asked: str) -> None:
    # 90 s is within the client's own two-minute ceiling: only our limit stops it from waiting.
    if asked == "http-date":
        headers = {"Retry-After": format_datetime(datetime.now(UTC) + timedelta(hours=1), usegmt=True)}
    elif asked.startswith("retry-after-ms:"):
        headers = {"retry-after-ms": asked.split(":")[1]}
    else:
        headers = {"Retry-After": asked}
    fake_openai.script(Reply.error(429, "quota", headers), Reply.json(EMPTY))
    p = proposer(fake_openai, retry_after_max=60)
    (out,) = run_propose(p, request(batch(0, "a", "b")))
    assert out.proposal is None and "over the 60s limit" in (out.error or "")
    assert len(fake_openai.completions) == 1


def test_server_saying_do_not_retry_is_obeyed(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script(Reply.error(503, "maintenance", {"x-should-retry": "false"}), Reply.json(EMPTY))
    p = proposer(fake_openai, max_retries=3)
    (out,) = run_propose(p, request(batch(0, "a", "b")))
    assert out.proposal is None and "gave up after 0 retries" in (out.error or "")
    assert len(fake_openai.completions) == 1


def test_client_errors_are_not_retried(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script(Reply.error(400, "This model's maximum context length is 8192 tokens"), Reply.json(EMPTY))
    p = proposer(fake_openai)
    first, second = run_propose(p, request(batch(0, "a", "b"), batch(1, "c", "d")))
    assert first.proposal is None and "HTTP 400" in (first.error or "")
    assert second.proposal is not None  # a bad request for one batch does not stop the others
    assert len(fake_openai.completions) == 2


def test_slow_reply_past_the_timeout_is_not_retried(fake_openai: FakeOpenAIServer) -> None:
    """A server that cannot cancel a request (llama.cpp) is still generating it: a retry would queue behind it."""
    fake_openai.script(Reply.json(EMPTY, delay=30), Reply.json(EMPTY, delay=30))
    p = proposer(fake_openai, timeout=0.3, max_retries=3)
    (out,) = run_propose(p, request(batch(0, "a", "b")))
    assert out.proposal is None and "timed out" in (out.error or "")
    assert len(fake_openai.completions) == 1 and p.usage().failed_calls == 1
    assert p.usage().input_tokens == 0  # nothing was answered, nothing is accounted


def test_json_schema_rejected_falls_back_to_json_object_and_remembers(openai_env: None) -> None:
    with FakeOpenAIServer(reject_formats={"json_schema"}) as server:
        server.script(Reply.json(EMPTY), Reply.json(EMPTY))
        p = proposer(server)
        replies = run_propose(p, request(batch(0, "a", "b"), batch(1, "c", "d")))
        assert all(r.proposal is not None for r in replies)
        formats = [r.response_format for r in server.completions]
        assert formats == ["json_schema", "json_object+schema", "json_object+schema"]
        assert p.output_mode == "json_object"
        assert any("rejected response_format json_schema" in n for n in p.usage().notes)


def test_no_response_format_at_all_falls_back_to_plain_and_tolerant_parsing(openai_env: None) -> None:
    with FakeOpenAIServer(reject_formats={"json_schema", "json_object"}) as server:
        server.script(Reply(content="<think>let me see</think>\n```json\n" + json.dumps(EMPTY) + "\n```"))
        p = proposer(server)
        (out,) = run_propose(p, request(batch(0, "a", "b")))
        assert out.proposal is not None
        formats = [r.response_format for r in server.completions]
        assert formats == ["json_schema", "json_object+schema", "json_object", None]
        assert "response_format" not in server.completions[-1].body
        assert p.output_mode == "none"


# ---- #18 finding 1: a server's answer naming response_format, whatever its status ------------------------------


def test_finding1_llama_cpp_500_naming_response_format_moves_on_at_once(openai_env: None) -> None:
    # llama-cpp-python answers json_schema with HTTP 500 (a validation error naming response_format). Before, the
    # fallback knew only 400/422: the 500 was retried 4 times and the endpoint declared unavailable.
    with FakeOpenAIServer.like_llama_cpp() as server:
        server.script(Reply.json(EMPTY), Reply.json(EMPTY))
        p = proposer(server, max_retries=4)
        replies = run_propose(p, request(batch(0, "a", "b"), batch(1, "c", "d")))
        assert all(r.proposal is not None and r.error is None for r in replies)
        formats = [r.response_format for r in server.completions]
        assert formats == ["json_schema", "json_object+schema", "json_object+schema"]  # no retry, remembered
        assert server.completions[0].status == 500
        usage = p.usage()
        # The refusal is the negotiation, counted apart, not a failed request (issue 23 item 4).
        assert (usage.calls, usage.failed_calls, usage.format_refusals) == (3, 0, 1)
        assert not any("endpoint unavailable" in n for n in usage.notes)
        assert any("rejected response_format json_schema (HTTP 500" in n for n in usage.notes)


@pytest.mark.parametrize("status", [400, 422, 500])
def test_a_rejection_naming_response_format_is_never_retried(openai_env: None, status: int) -> None:
    def rejecting(fmt: str) -> Reply:
        return Reply.error(status, f"response_format {fmt!r} is not supported", {"retry-after-ms": "1"})

    with FakeOpenAIServer(reject_formats={"json_schema"}, rejection=rejecting) as server:
        server.script(Reply.json(EMPTY))
        p = proposer(server, max_retries=3)
        (out,) = run_propose(p, request(batch(0, "a", "b")))
        assert out.proposal is not None
        assert [r.status for r in server.completions] == [status, 200]


@pytest.mark.parametrize("status", [400, 404, 413, 422])
def test_other_client_errors_are_never_retried(fake_openai: FakeOpenAIServer, status: int) -> None:
    fake_openai.script(Reply.error(status, "something else is wrong", {"retry-after-ms": "1"}), Reply.json(EMPTY))
    p = proposer(fake_openai, max_retries=3)
    first, _second = run_propose(p, request(batch(0, "a", "b"), batch(1, "c", "d")))
    assert first.proposal is None and f"HTTP {status}" in (first.error or "") and "not retryable" in (first.error or "")
    assert fake_openai.completions[0].response_format == "json_schema"  # no mode change either
    assert [r.status for r in fake_openai.completions][:1] == [status]
    assert sum(1 for r in fake_openai.completions if r.status == status) == 1


# ---- #18 finding 2: the schema travels in json_object mode --------------------------------------------------------


def test_finding2_json_object_mode_carries_the_schema(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script(Reply.json(EMPTY))
    p = proposer(fake_openai, output_mode="json_object")
    run_propose(p, request(batch(0, "a", "b")))
    (sent,) = fake_openai.completions
    assert sent.body["response_format"] == {"type": "json_object", "schema": PROPOSAL_SCHEMA}


def test_a_server_refusing_the_schema_key_gets_plain_json_object(openai_env: None) -> None:
    with FakeOpenAIServer(reject_formats={"json_schema", "json_object+schema"}) as server:
        server.script(Reply.json(EMPTY), Reply.json(EMPTY))
        p = proposer(server)
        run_propose(p, request(batch(0, "a", "b"), batch(1, "c", "d")))
        formats = [r.response_format for r in server.completions]
        assert formats == ["json_schema", "json_object+schema", "json_object", "json_object"]
        assert any("json_object with schema" in n for n in p.usage().notes)


# ---- #18 finding 3: raw control characters, and errors that say what the reply was ----------------------------------


def test_finding3_raw_newlines_inside_strings_are_read(fake_openai: FakeOpenAIServer) -> None:
    # What llama.cpp's JSON grammar lets a model write: a literal newline inside a string.
    raw = '{"toDelete": [], "toSave": [{"content": "Milo is a Sheltie.\nAdopted 2019.", "sourceIds": ["a", "b"]}]}'
    fake_openai.script(Reply(content=raw))
    p = proposer(fake_openai)
    (out,) = run_propose(p, request(batch(0, "a", "b")))
    assert out.proposal is not None and out.proposal.to_save[0].content == "Milo is a Sheltie.\nAdopted 2019."
    assert p.usage().invalid_replies == 0


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ('{"id": 1, "category_name": "pets"}', "JSON without toDelete/toSave (its keys: category_name, id)"),
        ("Sure! I merged them.", "no JSON object (prose only"),
        ('{"toDelete": [], "toSave": [{"content": "Milo', "JSON is cut off"),
    ],
)
def test_finding3_the_error_says_what_the_reply_was(fake_openai: FakeOpenAIServer, content: str, said: str) -> None:
    fake_openai.script(Reply(content=content))
    (out,) = run_propose(proposer(fake_openai), request(batch(0, "a", "b")))
    assert out.proposal is None and said in (out.error or "")
    assert content[:20].replace("\n", "\\n") in (out.error or "")  # and a preview of it


# ---- #18 finding 4: budgets that reach the request ------------------------------------------------------------------


def test_finding4_max_tokens_is_sized_from_the_batch_and_temperature_is_sent(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.responder = lambda _r: Reply.json(EMPTY)
    p = proposer(fake_openai, temperature=0.2)
    run_propose(p, request(batch(0, "a", "b"), batch(1, *(f"x{i}" for i in range(6)))))
    small, large = fake_openai.completions
    assert small.body["temperature"] == 0.2
    chars = len("Fact a about Milo.") * 2
    assert small.body["max_tokens"] == reply_tokens(math.ceil(chars / 4), 2, None)
    assert large.body["max_tokens"] > small.body["max_tokens"]


def test_max_output_tokens_sets_every_requests_max_tokens(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.responder = lambda _r: Reply.json(EMPTY)
    run_propose(proposer(fake_openai, max_output_tokens=333), request(batch(0, "a", "b"), batch(1, "c", "d")))
    assert [r.body["max_tokens"] for r in fake_openai.completions] == [333, 333]
    assert all("temperature" not in r.body for r in fake_openai.completions)  # unset: the server's default


def test_token_budget_counts_the_output_a_request_may_generate(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.responder = lambda _req: Reply.json(EMPTY, completion_tokens=10)
    p = proposer(fake_openai, token_budget=2000, max_output_tokens=800)
    replies = run_propose(p, request(batch(0, "a", "b"), batch(1, "c", "d")))
    # ~800 prompt tokens each: the first may use 800 + 800; after it, the second's 800 + 800 would not fit, even
    # though the prompts alone would.
    assert replies[0].proposal is not None and "token budget" in (replies[1].error or "")
    assert len(fake_openai.completions) == 1


def test_token_budget_stops_asking_and_says_so(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.responder = lambda _req: Reply.json(EMPTY, prompt_tokens=900, completion_tokens=50)
    p = proposer(fake_openai, token_budget=2500)
    replies = run_propose(p, request(*(batch(i, f"x{i}", f"y{i}") for i in range(5))))
    answered = [r for r in replies if r.proposal is not None]
    assert len(answered) == 2  # 950 + 950 used; a third ~900-token prompt would pass 2500
    assert all("token budget" in (r.error or "") for r in replies[2:])
    usage = p.usage()
    assert usage.budget_exhausted and usage.calls == 2
    assert usage.input_tokens + usage.output_tokens <= 2500
    assert any("token budget of 2500 reached" in n for n in usage.notes)


def test_server_without_usage_is_estimated_and_noted(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script(Reply.json(EMPTY, include_usage=False))
    p = proposer(fake_openai)
    run_propose(p, request(batch(0, "a", "b")))
    assert p.usage().input_tokens > 0 and p.usage().output_tokens > 0
    assert any("estimated" in n for n in p.usage().notes)


def test_price_table_gives_an_estimated_cost(fake_openai: FakeOpenAIServer, tmp_path: Path) -> None:
    prices = tmp_path / "llm-pricing.json"
    prices.write_text(json.dumps({"models": {"m": {"inputPerMillion": 2.0, "outputPerMillion": 8.0}}}))
    fake_openai.script(Reply.json(EMPTY, prompt_tokens=1_000_000, completion_tokens=500_000))
    p = proposer(fake_openai, price_file=prices)
    run_propose(p, request(batch(0, "a", "b")))
    assert p.usage().estimated_cost == pytest.approx(6.0)


def test_bad_price_file_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "llm-pricing.json"
    bad.write_text('{"m": {"input": -1, "output": 2}}')
    with pytest.raises(ValidationError, match="bad price for model 'm'"):
        ProposerConfig(type="openai", model="m", price_file=bad)


def test_repair_sends_rockbot_sections_and_returns_revised_text(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script(Reply.json({"content": "Rockford Duane Lhotka uses America/Chicago."}), Reply(content="nope"))
    p = proposer(fake_openai)
    src = [Entry(id="s1", content="Rockford Duane Lhotka uses timezone America/Chicago.", created_at=T0)]
    req = RepairRequest(MergeProposal(content="A user has a timezone.", source_ids=["s1"]), src, ["America/Chicago"])

    async def go() -> tuple[str | None, str | None]:
        first, second = await p.repair(req), await p.repair(req)
        await p.aclose()
        return first, second

    first, second = asyncio.run(go())
    assert first == "Rockford Duane Lhotka uses America/Chicago."
    assert second is None and p.usage().invalid_replies == 1
    sent = fake_openai.completions[0]
    assert sent.body["response_format"]["json_schema"]["schema"]["required"] == ["content"]
    assert "Missing — each must appear verbatim in your revision:\n- America/Chicago" in sent.user_text


def test_key_only_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(MissingAPIKeyError, match="OPENAI_API_KEY is not set"):
        make_proposer(ProposerConfig(type="openai", model="m"))
    assert "api_key" not in ProposerConfig.model_fields


def test_base_url_from_environment_like_the_openai_package(fake_openai: FakeOpenAIServer, monkeypatch: Any) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    fake_openai.script(Reply.json(EMPTY))
    p = make_proposer(ProposerConfig(type="openai", model="m", timeout=5.0, defer_below_entries=0))
    assert isinstance(p, OpenAIProposer)
    (out,) = run_propose(p, request(batch(0, "a", "b")))
    assert out.proposal is not None and len(fake_openai.completions) == 1


def test_missing_model_is_explained(openai_env: None) -> None:
    with pytest.raises(ValidationError, match="needs a model name"):
        make_proposer(ProposerConfig.model_validate({"type": "openai", "base_url": "http://127.0.0.1:9/v1"}))


def test_by_default_a_batch_of_lone_entries_is_sent_too(fake_openai: FakeOpenAIServer) -> None:
    """RockBot's gating (and the seed's): every new or changed entry reaches the model, lone ones included."""
    fake_openai.responder = lambda _r: Reply.json(EMPTY, prompt_tokens=100, completion_tokens=7)
    p = proposer(fake_openai)
    replies = run_propose(p, request(batch(0, "a", "b"), batch(2, "e")))
    assert [r.proposal for r in replies] == [Proposal(), Proposal()]
    sent = fake_openai.completions
    assert len(sent) == 2 and "[ID:e]" in sent[1].user_text and "Other entries:" in sent[1].user_text
    assert all("not shown" not in r.user_text for r in sent)


def test_concurrent_requests_share_one_budget_and_keep_batch_order(fake_openai: FakeOpenAIServer) -> None:
    # The responder only answers once three requests are in flight together: sequential sending would time out.
    arrived = threading.Barrier(3, timeout=20)

    def answer(req: Any) -> Reply:
        arrived.wait()
        ids = sorted(set(re.findall(r"\[ID:([^\]]+)\]", req.user_text)))
        return Reply.json({"toDelete": [], "toSave": [{"content": "x", "sourceIds": ids}]}, prompt_tokens=300)

    fake_openai.responder = answer
    p = proposer(fake_openai, concurrency=3, token_budget=100_000)
    replies = run_propose(p, request(*(batch(i, f"x{i}", f"y{i}") for i in range(3))))
    assert [r.batch_index for r in replies] == [0, 1, 2]
    assert [r.proposal.to_save[0].source_ids if r.proposal else None for r in replies] == [
        ["x0", "y0"],
        ["x1", "y1"],
        ["x2", "y2"],
    ]
    assert p.usage().input_tokens == 900 and p.usage().calls == 3


def test_small_fresh_offer_is_deferred_without_a_request(fake_openai: FakeOpenAIServer) -> None:
    p = proposer(fake_openai, defer_below_entries=8, defer_max_hours=24, offer_singletons=False)
    replies = run_propose(p, request(batch(0, "a", "b"), batch(1, "c", "d"), batch(2, "e")))
    assert fake_openai.completions == []
    # Batches with something to show get neither a proposal nor an error (unstamped, offered again, no warning);
    # the batch of a lone entry gets "no change".
    assert [(r.proposal, r.error) for r in replies[:2]] == [(None, None), (None, None)]
    assert replies[2].proposal == Proposal()
    assert any("4 entr(ies) to show, fewer than 8: deferred" in n for n in p.usage().notes)
    assert p.usage().calls == 0


def test_deferral_ends_when_the_offer_is_big_enough_or_old_enough(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.responder = lambda _r: Reply.json(EMPTY)
    big = request(*(batch(i, f"x{i}", f"y{i}") for i in range(4)))
    assert all(r.proposal is not None for r in run_propose(proposer(fake_openai, defer_below_entries=8), big))
    old = Entry(id="o1", content="Old fact.", created_at=T0 - timedelta(hours=25))
    aged = Batch(0, (OfferGroup(("o1", "n1"), True),), (OfferedEntry(old), OfferedEntry(Entry(id="n1", content="x"))))
    replies = run_propose(proposer(fake_openai, defer_below_entries=8, defer_max_hours=24), request(aged))
    assert replies[0].proposal is not None
    assert len(fake_openai.completions) == 5
