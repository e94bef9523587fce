"""RockBot's pause marker (``memory-audit/consolidation-paused.json``, written by its memory audit when live entries
vanish): while it exists no cycle runs and nothing under memory/ is written, not even a killed cycle's recovery;
the report and ``dreamkeeper dream``'s exit code say so, with the marker's content, bounded, whatever it holds."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from dreamkeeper.consolidation.cycle import CycleOptions, CycleOutcome, run_cycle
from dreamkeeper.consolidation.journal import Journal, journal_dir
from dreamkeeper.consolidation.journal_steps import write_journal
from dreamkeeper.consolidation.pause import PAUSE_MARKER, read_pause_marker
from dreamkeeper.consolidation.plan import Plan, PruneAction
from dreamkeeper.consolidation.report import CycleReport
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.dream_command import EXIT_PAUSED
from dreamkeeper.memory import MemoryStore
from dreamkeeper.proposers import ScriptedProposer
from tests.consolidation.corpus import BASE_TIME, Seed, write_corpus

ROCKBOT_MARKER = {"reason": "live entries dropped more than 20% since the previous snapshot", "snapshotId": "s-42",
                  "pausedAt": "2026-09-04T04:00:00+00:00"}  # fmt: skip


def tree(agent_dir: Path) -> dict[str, bytes]:
    """Every file under memory/, and the journals."""
    files = [*(agent_dir / "memory").rglob("*"), *journal_dir(agent_dir).glob("*")]
    return {str(p): p.read_bytes() for p in files if p.is_file()}


def pause(agent_dir: Path, content: bytes) -> Path:
    marker = agent_dir / PAUSE_MARKER
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_bytes(content)
    return marker


def dream(agent_dir: Path, *, dry_run: bool = False) -> CycleOutcome:
    options = CycleOptions(agent_dir, CycleSettings(min_interval_hours=0), now=BASE_TIME, dry_run=dry_run)
    reply = {"toSave": [{"content": "Rocky has a dog — a Sheltie named Milo.", "sourceIds": ["m1", "m2"]}]}
    return asyncio.run(run_cycle(options, ScriptedProposer([reply])))


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    directory = tmp_path / "agent"
    write_corpus(
        directory,
        [
            Seed("m1", "Rocky has a dog named Milo.", "people"),
            Seed("m2", "Rocky has a Sheltie named Milo.", "people"),
            Seed("n1", "Scratch note: lunch was fine.", "observations", 0.1),
        ],
    )
    return directory


def test_a_paused_agent_gets_no_cycle_and_not_one_write(agent: Path) -> None:
    # A cycle killed earlier left a half-applied journal: even its recovery waits for the marker to go.
    store = MemoryStore(agent / "memory")
    write_journal(agent, "20260901T000000Z-killed", Plan(prunes=[PruneAction(store.require("n1"))]), store, BASE_TIME)
    pause(agent, json.dumps(ROCKBOT_MARKER, indent=2).encode())
    before = tree(agent)
    outcome = dream(agent)
    report = outcome.report
    assert report.result == "skipped" and report.paused == 1
    assert report.pause_marker is not None and report.pause_marker.snapshot_id == "s-42"
    assert "live entries dropped more than 20%" in (report.skip_reason or "")
    assert "pausedAt" not in (report.skip_reason or "") and "2026-09-04T04:00:00+00:00" in (report.skip_reason or "")
    assert any("20260901T000000Z-killed" in note for note in report.notes)  # left unfinished, and said so
    assert tree(agent) == before
    assert not Journal.load(journal_dir(agent) / "20260901T000000Z-killed.jsonl").complete
    assert report.total == 3 and report.saved == report.archived == 0

    (agent / PAUSE_MARKER).unlink()  # RockBot's resume_memory_consolidation deletes it
    resumed = dream(agent).report
    assert resumed.result == "completed" and resumed.paused == 0 and resumed.saved == 1
    assert resumed.notes and "finished interrupted cycle 20260901T000000Z-killed" in resumed.notes[0]


def test_a_dry_run_is_paused_too(agent: Path) -> None:
    pause(agent, b"{}")
    outcome = dream(agent, dry_run=True)
    assert outcome.report.result == "skipped" and outcome.report.paused == 1


@pytest.mark.parametrize(
    ("content", "shown"),
    [
        (b"", "empty"),
        (b"   \n", "empty"),
        (b"not json {", "not JSON"),
        (b"[1, 2]", "a JSON list, not an object"),
        (b"x" * 5000, "content over 4096 bytes, not shown"),
        (b'{"REASON": "case-insensitive, as RockBot reads it"}', "case-insensitive, as RockBot reads it"),
        (json.dumps({"reason": "\x1b[31mred\x07 " + "y" * 500}).encode(), "red"),
        (b"\xff\xfe\x00garbage", "not JSON"),
    ],
)
def test_any_marker_pauses_and_its_content_is_shown_bounded(agent: Path, content: bytes, shown: str) -> None:
    pause(agent, content)
    report = dream(agent).report
    assert report.result == "skipped" and report.paused == 1
    reason = report.skip_reason or ""
    assert shown in reason and len(reason) < 600 and "\x1b" not in reason and "\x07" not in reason


def test_only_a_file_pauses(agent: Path) -> None:
    (agent / PAUSE_MARKER).mkdir(parents=True)  # File.Exists is false for a directory
    assert read_pause_marker(agent) is None
    assert dream(agent).report.result == "completed"


def test_dream_exits_with_the_paused_code_and_says_so_in_its_summary(agent: Path, tmp_path: Path) -> None:
    pause(agent, json.dumps(ROCKBOT_MARKER).encode())
    message = tmp_path / "termination-message"
    command = [sys.executable, "-m", "dreamkeeper", "-q", "dream", str(agent), "--min-interval-hours", "0"]
    result = subprocess.run([*command, "--termination-message-path", str(message)], capture_output=True, text=True)
    assert result.returncode == EXIT_PAUSED == 4, result.stderr
    assert "paused by the agent's memory audit" in " ".join(result.stderr.split())
    summary = json.loads(message.read_text())
    assert summary["result"] == "skipped" and summary["paused"] == 1
    assert "s-42" in summary["skipReason"] and len(message.read_bytes()) < 4096
    assert CycleReport.model_validate(summary | {"agentDir": ""}).skip_reason == summary["skipReason"]


def test_the_first_write_is_reported_and_a_cycle_that_writes_nothing_has_none(agent: Path) -> None:
    report = dream(agent).report
    assert report.first_write_at is not None and report.started_at <= report.first_write_at
    assert report.finished_at is not None and report.first_write_at <= report.finished_at
    quiet = asyncio.run(
        run_cycle(
            CycleOptions(agent, CycleSettings(min_interval_hours=0), now=BASE_TIME + timedelta(hours=1)),
            ScriptedProposer([]),
        )
    )
    assert quiet.report.result == "completed" and quiet.report.first_write_at is None
