"""The command line on Markdown formats: `--format` on dream, memory, undo and recover, the settings' section."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from dreamkeeper.cli import _register, app
from dreamkeeper.formats import PROFILES, units_root
from dreamkeeper.formats import records as rec
from dreamkeeper.formats.check import consistency
from dreamkeeper.memory import MemoryStore
from tests.agents.format_cycle import dream
from tests.formats.helpers import hermes_agent, openclaw_agent

_register()
# The sample's clusters are mostly settled by subsumption (issue 23): together they take ~20% of the live units out,
# over the default 10% blast-radius cap, which would hold the plan; this flow is about the CLI, not the cap.
LOW = '{"similarity_threshold": 0.5, "min_interval_hours": 0, "archive_cap": 0.5}'


def run(*args: str | Path) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def test_sample_dream_list_restore_undo_recover_on_an_openclaw_directory(tmp_path: Path) -> None:
    agent = tmp_path / "oc"
    sample = run("sample", "--format", "openclaw", agent, "--json")
    assert sample.exit_code == 0, sample.output
    assert json.loads(sample.stdout)["format"] == "openclaw" and (agent / "workspace" / "MEMORY.md").is_file()
    before = (agent / "workspace" / "MEMORY.md").read_text()
    dry = run("dream", agent, "--format", "openclaw", "--dry-run", "--force", "--settings-json", LOW)
    assert dry.exit_code == 0, dry.output
    assert (agent / "workspace" / "MEMORY.md").read_text() == before and not units_root(agent).exists()
    done = run("dream", agent, "--format", "openclaw", "--force", "--json", "--settings-json", LOW)
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert report["folded"] >= 1 and report["hardDeletes"] == 0
    archived = json.loads(run("memory", "list", agent, "--format", "openclaw", "--archived", "--json").stdout)
    assert archived and all(".dreamkeeper" in a["path"] for a in archived)  # the archive is outside the workspace
    memory = agent / "workspace" / "MEMORY.md"
    stats = json.loads(run("memory", "stats", agent, "--format", "openclaw", "--json").stdout)
    records = MemoryStore(units_root(agent)).scan()
    assert (stats["live"], stats["archived"]) == (len(records.live), len(records.archived))
    undone = run("undo", agent, report["cycleId"], "--format", "openclaw")
    assert undone.exit_code == 0, undone.output
    assert memory.read_text() == before  # every unit back where it was, byte for byte; the successors out
    again = run("dream", agent, "--format", "openclaw", "--force", "--json", "--settings-json", LOW)
    assert again.exit_code == 0, again.output
    target = next(
        s.entry
        for s in MemoryStore(units_root(agent)).scan().entries
        if s.entry.is_archived
        and s.entry.meta(rec.FILE) == "MEMORY.md"
        and rec.placement_of(s.entry) == rec.REMOVED
        and s.entry.content not in memory.read_text()
    )
    restored = run("memory", "restore", agent, target.id, "--format", "openclaw")
    assert restored.exit_code == 0, restored.output
    assert "written back into the agent's files" in restored.stdout
    assert memory.read_text().count(target.content) == 1
    shown = json.loads(run("memory", "show", agent, target.id, "--format", "openclaw", "--json").stdout)
    assert shown["live"] and shown["entry"]["metadata"]["dkFile"] == "MEMORY.md"
    recovered = run("recover", agent, "--format", "openclaw")
    assert recovered.exit_code == 0, recovered.output


def test_the_format_comes_from_the_settings_section_and_the_flags_override_it(tmp_path: Path) -> None:
    agent = hermes_agent(tmp_path)
    settings = json.dumps({"min_interval_hours": 0, "format": {"name": "hermes", "caps": {"USER.md": 2000}}})
    done = run("dream", agent, "--force", "--json", "--settings-json", settings)
    assert done.exit_code == 0, done.output
    assert units_root(agent).is_dir()  # the Hermes format was used: its unit records exist
    flag = run("dream", agent, "--force", "--settings-json", settings, "--format", "openclaw")
    assert flag.exit_code == 1 and "no openclaw memory directory" in flag.output  # the flag won: not a Hermes home
    unknown = json.dumps({"format": {"name": "hermes", "caps": {"SOUL.md": 10}}})
    refused = run("dream", agent, "--force", "--settings-json", unknown)
    assert refused.exit_code == 2 and "caps name files the hermes profile does not have: SOUL.md" in refused.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--format", "obsidian"), "unknown memory format 'obsidian'"),
        (("--format", "openclaw", "--memory-dir", "x"), "--memory-dir is RockBot's"),
        (("--format", "hermes", "--profile-json", "[1]"), "expected a JSON object"),
        (("--format", "hermes", "--profile-json", '{"capz": {}}'), "capz"),
    ],
)
def test_bad_format_arguments_are_usage_errors_that_change_nothing(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    agent = openclaw_agent(tmp_path)
    result = run("dream", agent, *args)
    assert result.exit_code == 2 and message in result.output
    assert not (agent / ".dreamkeeper").exists()


def test_a_missing_markdown_directory_is_a_clear_failure(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = run("dream", tmp_path / "empty", "--format", "hermes", "--force")
    assert result.exit_code == 1 and "no hermes memory directory" in result.output


def test_memory_purge_on_units_deletes_only_archived_records_whose_text_left_the_agents_files(tmp_path: Path) -> None:
    """`memory purge --format openclaw`: archived units past retention go (their specifics said elsewhere), but a
    consolidated daily-note line is still in its append-only note, so its record stays (purged, the next ingest would
    take it for a new unit); what the purge keeps and deletes leaves the records and files consistent."""
    agent = openclaw_agent(tmp_path)
    first = dream(agent, "openclaw", now=datetime.now(UTC) - timedelta(days=30))
    assert first.report.archived_with_replacement + first.report.folded > 0
    archived = [s.entry for s in MemoryStore(units_root(agent)).scan().archived]
    in_files = {e.id for e in archived if rec.placement_of(e) == rec.IN_FILE}
    assert in_files, "daily-note units consolidated and kept in their notes"
    shown = run("memory", "purge", agent, "--format", "openclaw", "--retention-days", "1", "--json")
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["dryRun"] is True
    done = run("memory", "purge", agent, "--format", "openclaw", "--retention-days", "1", "--yes", "--json")
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    purged = {e["id"] for e in report["purged"]}
    assert purged, "archived units whose text left the files are purged"
    assert purged.isdisjoint(in_files)
    left = {s.id for s in MemoryStore(units_root(agent)).scan().entries}
    assert in_files <= left and purged.isdisjoint(left)
    assert consistency(agent, PROFILES["openclaw"], MemoryStore(units_root(agent))).problems == []
    assert dream(agent, "openclaw").report.units_ingested == 0  # nothing came back as a new unit
