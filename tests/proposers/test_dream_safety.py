"""`dreamkeeper dream` in a Job that can be deleted and whose logs leave the cluster (issue 17, findings 4 and 5):
SIGTERM stops the cycle at its next safe point with the report written and counted; --redact-logs keeps every
piece of memory content out of the log while the cycle still does everything (archives, rejections, repairs).
Both run the real CLI on the bundled sample, with the openai proposer against the fake server on loopback.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from dreamkeeper.cli import _register, app
from dreamkeeper.consolidation.journal import incomplete_journals
from dreamkeeper.consolidation.report import cycles_dir
from dreamkeeper.demo.sample import copy_bundled
from dreamkeeper.dream_command import EXIT_TERMINATED, CycleStopped, GracefulStop
from tests.leaks import content_probes
from tests.proposers.fake_openai import FakeOpenAIServer, RecordedRequest, Reply

ID = re.compile(r"\[ID:([0-9a-f]{12})\]")


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    copy_bundled(tmp_path / "agent")
    return tmp_path / "agent"


def dream(agent: Path, server: FakeOpenAIServer, *extra: str, message: Path | None = None) -> Any:
    _register()
    # RockBot's layout: the model is shown ids (and can echo them, and entry text, back).
    args = ["dream", str(agent), "--proposer", "openai", "--model", "m", "--base-url", server.base_url, "--force"]
    args += ["--offer-shape", "batches"]
    if message is not None:
        args += ["--termination-message-path", str(message)]
    return CliRunner().invoke(app, [*args, *extra], catch_exceptions=False)


# ---- SIGTERM ---------------------------------------------------------------------------------------------------


def test_sigterm_mid_cycle_stops_at_the_next_stage_with_the_report_written(
    agent: Path, tmp_path: Path, openai_env: None
) -> None:
    """The pod is deleted (its schedule was) while the model is thinking: the fold already archived duplicates;
    the cycle stops before validating the reply, says so in its report and its termination message, and the next
    cycle runs normally."""

    def slow_model(request: RecordedRequest) -> Reply:
        os.kill(os.getpid(), signal.SIGTERM)  # the kubelet, while the request is in flight
        return Reply.json({"toSave": [], "toDelete": []}, delay=0.2)

    message = tmp_path / "termination-log"
    with FakeOpenAIServer(slow_model) as server:
        result = dream(agent, server, message=message)
        assert result.exit_code == EXIT_TERMINATED, result.output
        summary = json.loads(message.read_text())
        assert summary["result"] == "failed" and "stopped by SIGTERM before validation" in summary["error"]
        assert summary["folded"] > 0  # what the stages before did is counted, not lost
        (report_file,) = cycles_dir(agent).glob("*.json")
        report = json.loads(report_file.read_text())
        assert report["result"] == "failed" and report["folded"] == summary["folded"]
        assert list(incomplete_journals(agent)) == []  # nothing half-applied for a recovery to finish
        server.responder = lambda request: Reply.json({"toSave": [], "toDelete": []})
        again = dream(agent, server)  # the lock was released
        assert again.exit_code == 0, again.output


def test_sigterm_while_a_slow_model_answers_batch_after_batch_cancels_the_proposal(
    agent: Path, tmp_path: Path, openai_env: None
) -> None:
    """A model slower than the pod's grace period allows, over many batches: the stop does not wait for every
    batch (issue 17 finding 4 under load: the pod was killed before the report was written); the requests in flight
    are cancelled, no later batch is sent, and the cycle stops before validation with its report written."""
    asked: list[str] = []

    def slow_model(request: RecordedRequest) -> Reply:
        asked.append(request.path)
        if len(asked) == 1:
            os.kill(os.getpid(), signal.SIGTERM)
        return Reply.json({"toSave": [], "toDelete": []}, delay=60)

    message = tmp_path / "termination-log"
    with FakeOpenAIServer(slow_model) as server:
        result = dream(agent, server, "--timeout", "600", message=message)
    assert result.exit_code == EXIT_TERMINATED, result.output
    summary = json.loads(message.read_text())
    assert "stopped by SIGTERM before validation" in summary["error"], summary
    assert len(asked) == 1  # one request in flight when the signal came; it was cancelled, no other was sent
    (report_file,) = cycles_dir(agent).glob("*.json")
    assert json.loads(report_file.read_text())["result"] == "failed"


def test_once_apply_has_begun_sigterm_lets_the_cycle_finish() -> None:
    stop = GracefulStop()
    for stage in ("recover", "vocabulary", "purge", "snapshot", "fold", "gating", "proposal", "validation", "apply"):
        stop.enter(stage)
    stop.on_signal(signal.SIGTERM, None)
    stop.enter("report")  # no stop: what follows apply only measures and writes the report
    before = GracefulStop()
    before.enter("fold")
    before.on_signal(signal.SIGTERM, None)  # the fold runs to its end; the next stage does not begin
    with pytest.raises(CycleStopped, match="before gating"):
        before.enter("gating")


# ---- redacted logs -----------------------------------------------------------------------------------------------


def hostile_model(request: RecordedRequest) -> Reply:
    """Everything that makes the cycle log content: a merge dropping specifics (rejected after a repair that
    fails too), a prune of protected entries, ids it was never shown (echoing entry text), prose instead of JSON."""
    ids = ID.findall(request.user_text)
    if "missing" in request.user_text.lower() and "restore" in request.user_text.lower():
        return Reply(content="I could not keep those names, sorry.")  # the repair request
    if len(ids) < 2:
        return Reply(content="Here are my thoughts about your memories: " + request.user_text[-200:])
    return Reply.json(
        {
            "toSave": [{"content": "Some merged memory without the names.", "category": "x", "sourceIds": ids[:2]},
                       {"content": request.user_text[-120:], "sourceIds": ["not-an-id " + request.user_text[:60]]}],
            "toDelete": [*ids[2:], request.user_text[100:160]],
        }
    )  # fmt: skip


def test_redacted_logs_hold_ids_and_counts_but_no_memory_content(
    agent: Path, fake_openai: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    probes = content_probes(agent)
    fake_openai.responder = hostile_model
    caplog.set_level(logging.DEBUG, logger="dreamkeeper")
    result = dream(agent, fake_openai, "--redact-logs")
    assert result.exit_code == 0, result.output
    text = "\n".join(record.getMessage() for record in caplog.records)
    report = json.loads(next(iter(cycles_dir(agent).glob("*.json"))).read_text())
    # The cycle really went through the paths that log content: purge, fold, archive, rejection, protection.
    assert report["purged"] and report["folded"] and report["rejected"] and report["protected"], report
    assert "[redacted:" in text and "Archived memory entry" in text
    leaked = sorted(p for p in probes if p in text)
    assert leaked == [], leaked[:10]
    # Without the setting the same cycle logs the content (the check above can see it).
    copy = agent.parent / "again"
    copy_bundled(copy)
    caplog.clear()
    assert dream(copy, fake_openai).exit_code == 0
    plain = "\n".join(record.getMessage() for record in caplog.records)
    assert "[redacted:" not in plain and any(p in plain for p in probes)
