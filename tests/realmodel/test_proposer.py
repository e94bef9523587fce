"""The OpenAI proposer against llama.cpp's real server (#18 findings 1, 2, 4, 8): what the fake server imitates,
checked against the real one, and whole cycles with a real model holding the invariants.

Model output is not asserted beyond what the server guarantees (grammar-constrained shape, token limits):
sampling is seeded and temperature 0, but the tests must not depend on what a 135M model says.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from dreamkeeper.consolidation.cycle import CycleOptions, run_cycle
from dreamkeeper.consolidation.proposal import Batch
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.memory import MemoryStore
from dreamkeeper.proposers.config import ProposerConfig
from dreamkeeper.proposers.openai import OpenAIProposer
from dreamkeeper.proposers.prompts import OFFER_CONTRACT, PROPOSAL_SCHEMA, user_message
from tests.consolidation.corpus import BASE_TIME, entry_files, write_corpus
from tests.proposers.fake_openai import llama_cpp_format_error
from tests.proposers.scenario import ALL_IDS, SEEDS
from tests.proposers.test_openai_proposer import batch, request, run_propose
from tests.realmodel.server import LlamaServer


@pytest.fixture
def local_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "local-no-key")  # llama.cpp's server checks none


@pytest.fixture
def client(local_key: None) -> Iterator[Any]:
    clients: list[openai.OpenAI] = []

    def make(server: LlamaServer) -> openai.OpenAI:
        clients.append(openai.OpenAI(base_url=server.base_url, max_retries=0, timeout=600))
        return clients[-1]

    yield make
    for c in clients:
        c.close()


def proposer(server: LlamaServer, **config: Any) -> OpenAIProposer:
    settings: dict[str, Any] = {
        "type": "openai",
        "model": server.model,
        "base_url": server.base_url,
        "timeout": 600,  # 2 shared cores: a request can take minutes under load
        "temperature": 0,
        "defer_below_entries": 0,
    }
    return OpenAIProposer(ProposerConfig.model_validate({**settings, **config}))


def test_finding1_the_real_server_answers_json_schema_with_the_500_the_fake_imitates(
    smollm2_server: LlamaServer, client: Any
) -> None:
    with pytest.raises(openai.InternalServerError) as info:
        client(smollm2_server).chat.completions.create(
            model=smollm2_server.model,
            messages=[{"role": "user", "content": "{}"}],
            max_tokens=1,
            response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": PROPOSAL_SCHEMA}},
        )
    real = info.value
    fake = llama_cpp_format_error("json_schema").body["error"]
    assert real.status_code == 500
    assert isinstance(real.body, dict) and real.body["type"] == fake["type"] == "internal_server_error"
    # The same validation error, word for word, up to the traceback line (which names a path on disk).
    assert str(real.body["message"]).split("\n\n")[0] == fake["message"].split("\n\n")[0]


def test_finding1_the_proposer_moves_to_json_object_at_once_against_the_real_server(
    smollm2_server: LlamaServer, local_key: None
) -> None:
    p = proposer(smollm2_server, max_retries=4, max_output_tokens=48)
    (reply,) = run_propose(p, request(batch(0, "a", "b")))
    usage = p.usage()
    # The 500, then json_object: no retry of the 500, and the refusal is the format negotiation, not a failed call.
    assert (usage.calls, usage.failed_calls, usage.format_refusals) == (2, 0, 1)
    assert p.output_mode == "json_object"
    assert not any("endpoint unavailable" in n for n in usage.notes)
    assert reply.error is None or "HTTP" not in reply.error  # whatever the model said, the request succeeded


def test_finding2_json_object_with_the_schema_gives_the_proposal_shape(llama_server: LlamaServer, client: Any) -> None:
    # llama.cpp turns the schema into a grammar: even a 135M model or a base model answers in the shape.
    offer = user_message(batch(0, "milo1", "milo2"), request(batch(0, "milo1", "milo2")))
    response = client(llama_server).chat.completions.create(
        model=llama_server.model,
        messages=[{"role": "user", "content": offer}],
        max_tokens=160,
        temperature=0,
        response_format={"type": "json_object", "schema": PROPOSAL_SCHEMA},
    )
    content = response.choices[0].message.content or ""
    assert content.lstrip().startswith("{"), content
    assert content.lstrip("{ \n\t").startswith('"toDelete"'), content  # the schema's first property, first
    if response.choices[0].finish_reason == "stop":
        assert set(json.loads(content, strict=False)) == {"toDelete", "toSave"}


def test_finding4_max_tokens_reaches_the_real_server_and_a_cut_off_reply_is_counted_once(
    smollm2_server: LlamaServer, local_key: None
) -> None:
    p = proposer(smollm2_server, output_mode="json_object", max_output_tokens=5)
    first, second = batch(0, "a", "b"), batch(0, "c", "d")
    two_clusters = Batch(0, (*first.groups, *second.groups), (*first.entries, *second.entries))
    (reply,) = run_propose(p, request(two_clusters))
    usage = p.usage()
    assert reply.proposal is None and "max_tokens=5" in (reply.error or "")
    assert "asked again in halves" in (reply.error or "")
    assert usage.calls == 2 and usage.invalid_replies == 1  # the whole, then the first half; counted once
    assert 0 < usage.output_tokens <= 10  # the server stopped at max_tokens both times


def test_finding8_gemmas_template_drops_system_messages_so_the_offer_carries_the_contract(
    gemma3_server: LlamaServer, smollm2_server: LlamaServer, client: Any
) -> None:
    def prompt_tokens(server: LlamaServer, messages: list[dict[str, str]]) -> int:
        response = client(server).chat.completions.create(model=server.model, messages=messages, max_tokens=1)
        assert response.usage is not None
        return int(response.usage.prompt_tokens)

    user = {"role": "user", "content": "Which entries are duplicates?"}
    system = {"role": "system", "content": "Reply with one JSON object with toDelete and toSave."}
    assert prompt_tokens(gemma3_server, [system, user]) == prompt_tokens(gemma3_server, [user])  # dropped
    assert prompt_tokens(smollm2_server, [system, user]) > prompt_tokens(smollm2_server, [user])  # ChatML keeps it
    offer = user_message(batch(0, "a", "b"), request(batch(0, "a", "b")))
    assert offer is not None and offer.endswith(OFFER_CONTRACT)


def test_a_real_cycle_loses_nothing(llama_server: LlamaServer, local_key: None, tmp_path: Path) -> None:
    """Defaults as a new user has them (json_schema first, sized max_tokens); whatever the model proposes, every
    entry still resolves, nothing is hard-deleted and no specific leaves the live corpus."""
    write_corpus(tmp_path, SEEDS)
    p = proposer(llama_server)
    # Subsumption off: the seeds' clusters each have a member holding everything, so with it on the model would
    # never be asked; the request shape is the default (one short request per cluster).
    settings = CycleSettings(min_interval_hours=0, subsume=False)
    outcome = asyncio.run(run_cycle(CycleOptions(agent_dir=tmp_path, settings=settings, now=BASE_TIME), p))
    report = outcome.report
    # Whatever the model says: every request reached the server and was answered (a reply may still be unusable,
    # and a cycle whose every reply was is proposer-failed, not an error).
    assert report.result in ("completed", "proposer-failed"), report.error
    assert report.batches_failed == 0 and report.batches_usable + report.batches_unusable >= 1
    assert report.llm_calls >= 2 and report.input_tokens > 0  # the 500 for json_schema, then a real answer
    assert not any("endpoint unavailable" in n for n in report.notes)
    store = MemoryStore(tmp_path / "memory")
    assert entry_files(tmp_path) >= ALL_IDS
    assert all(store.get(i) is not None for i in ALL_IDS)
    assert report.hard_deletes == 0 and report.specifics_lost == 0
