"""`dreamkeeper dream AGENT_DIR --proposer openai …` end to end, as a subprocess, against the fake server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dreamkeeper.dream_command import EXIT_PROPOSER_FAILED
from dreamkeeper.memory import MemoryStore
from tests.consolidation.corpus import entry_files, write_corpus
from tests.proposers.fake_openai import FakeOpenAIServer, Reply
from tests.proposers.scenario import ALL_IDS, GOOD, SEEDS


def dreamkeeper(agent_dir: Path, *args: str, key: str | None = "sk-test") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    if key is not None:
        env["OPENAI_API_KEY"] = key
    return subprocess.run(
        [sys.executable, "-m", "dreamkeeper", "dream", str(agent_dir), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


# RockBot's layout, every cluster asked (no subsumption): these tests are about the requests and their replies.
ROCKBOT = ("--offer-shape", "batches", "--settings-json", '{"subsume": false}')


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    write_corpus(tmp_path, SEEDS)
    return tmp_path


def test_dream_with_openai_proposer_end_to_end(agent: Path, fake_openai: FakeOpenAIServer) -> None:
    (agent / "dream.md").write_text("You are Rocky's dream pass. Merge duplicates; keep every name.\n")
    (agent / "llm-pricing.json").write_text(json.dumps({"m": {"input": 3.0, "output": 15.0}}))
    fake_openai.script(Reply.json(GOOD, prompt_tokens=1000, completion_tokens=200))
    done = dreamkeeper(
        agent, "--proposer", "openai", "--base-url", fake_openai.base_url, "--model", "m", "--json", *ROCKBOT
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["proposer"] == "openai" and report["result"] == "completed"
    assert (report["llmCalls"], report["inputTokens"], report["outputTokens"]) == (1, 1000, 200)
    assert report["estimatedCost"] == pytest.approx((1000 * 3.0 + 200 * 15.0) / 1e6)
    assert (report["saved"], report["archived"], report["hardDeletes"]) == (2, 4, 0)
    (sent,) = fake_openai.completions
    assert sent.messages[0]["content"].startswith("You are Rocky's dream pass.")  # the agent's own dream.md
    assert "[ID:milo1]" in sent.user_text
    assert entry_files(agent) >= ALL_IDS
    assert len(MemoryStore(agent / "memory").scan().live) == 4


def test_finding1_a_dead_endpoint_is_proposer_failed_exit_4_and_changes_nothing(
    agent: Path, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.responder = lambda _r: Reply.error(502, "bad gateway")
    done = dreamkeeper(
        agent,
        "--proposer",
        "openai",
        "--base-url",
        fake_openai.base_url,
        "--model",
        "m",
        "--max-retries",
        "0",
        "--json",
        *ROCKBOT,
    )
    assert done.returncode == EXIT_PROPOSER_FAILED == 5, done.stderr  # not "completed, exit 0"
    report = json.loads(done.stdout)
    assert report["result"] == "proposer-failed" and "1 request(s) failed" in report["proposerFailure"]
    assert (report["llmCalls"], report["saved"], report["archived"], report["batchesFailed"]) == (1, 0, 0, 1)
    assert any("HTTP 502" in note for note in report["notes"])
    assert "proposer failed: no usable reply" in " ".join(done.stderr.split())
    assert len(MemoryStore(agent / "memory").scan().live) == len(ALL_IDS)


def test_missing_key_is_a_usage_error_and_nothing_is_touched(agent: Path) -> None:
    before = {p: p.read_bytes() for p in (agent / "memory").rglob("*.json")}
    done = dreamkeeper(agent, "--proposer", "openai", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", key=None)
    assert done.returncode == 2
    assert "OPENAI_API_KEY is not set" in done.stderr
    assert {p: p.read_bytes() for p in (agent / "memory").rglob("*.json")} == before


def test_missing_model_is_a_usage_error(agent: Path) -> None:
    done = dreamkeeper(agent, "--proposer", "openai", "--base-url", "http://127.0.0.1:9/v1")
    assert done.returncode == 2 and "needs a model name" in done.stderr


def test_finding4_the_settings_proposer_section_and_flags_reach_the_request(
    agent: Path, fake_openai: FakeOpenAIServer
) -> None:
    settings = agent / "settings.json"
    section = {"type": "openai", "model": "from-file", "base_url": fake_openai.base_url, "temperature": 0.1}
    settings.write_text(
        json.dumps(
            {
                "retention_days": 30,
                "offer_shape": "batches",
                "subsume": False,
                "proposer": {**section, "max_output_tokens": 300},
            }
        )
    )
    fake_openai.script(Reply.json(GOOD))
    done = dreamkeeper(agent, "--settings", str(settings), "--model", "m", "--temperature", "0.3", "--json")
    assert done.returncode == 0, done.stderr
    (sent,) = fake_openai.completions
    assert (sent.body["model"], sent.body["temperature"], sent.body["max_tokens"]) == ("m", 0.3, 300)
    assert json.loads(done.stdout)["saved"] == 2


def test_finding4_the_timeout_from_the_settings_reaches_the_client(agent: Path, fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script(Reply.json(GOOD, delay=30))
    proposer = {"type": "openai", "model": "m", "base_url": fake_openai.base_url, "timeout": 0.5, "max_retries": 0}
    settings = {"offer_shape": "batches", "subsume": False, "proposer": proposer}
    done = dreamkeeper(agent, "--settings-json", json.dumps(settings), "--json")
    assert done.returncode == EXIT_PROPOSER_FAILED, done.stderr  # the one request timed out: proposer-failed
    report = json.loads(done.stdout)
    assert report["llmCalls"] == 1 and any("timed out" in n for n in report["notes"])


def test_a_bad_proposer_section_is_a_usage_error(agent: Path) -> None:
    done = dreamkeeper(agent, "--settings-json", '{"proposer": {"type": "openai", "model": "m", "temperature": 9}}')
    assert done.returncode == 2 and "temperature" in done.stderr
