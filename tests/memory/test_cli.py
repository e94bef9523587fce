"""`dreamkeeper memory ...`: outputs, --json, exit codes, no tracebacks."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from dreamkeeper.consolidation.memory_cli import register as register_list_and_purge
from dreamkeeper.demo.sample import BUNDLED_SAMPLE
from dreamkeeper.memory import CycleLock, MemoryStore
from dreamkeeper.memory.cli import register
from tests.memory.conftest import tree_bytes

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    app = typer.Typer(pretty_exceptions_enable=False)
    register(app)
    register_list_and_purge(app)  # `memory list|purge` need the last-record rule (the consolidation layer)
    return app


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    shutil.copytree(BUNDLED_SAMPLE, tmp_path / "agent")
    return tmp_path / "agent"


def run(app: typer.Typer, *args: str | Path) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def run_json(app: typer.Typer, *args: str | Path) -> Any:
    result = run(app, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_stats(app: typer.Typer, agent: Path) -> None:
    stats = run_json(app, "memory", "stats", agent)
    scan = MemoryStore(agent / "memory").scan()
    assert stats["entries"] == len(scan.entries) == 300
    assert stats["live"] == len(scan.live) and stats["archived"] == len(scan.archived)
    assert len(stats["malformed"]) == 1 and stats["embeddingDimensions"] == [64]
    assert sum(c["live"] for c in stats["categories"].values()) == stats["live"]
    text = run(app, "memory", "stats", agent)
    assert text.exit_code == 0 and "malformed (left untouched)" in text.stdout and "live" in text.stdout


def test_list_scopes_category_and_limit(app: typer.Typer, agent: Path) -> None:
    live = run_json(app, "memory", "list", agent)
    archived = run_json(app, "memory", "list", agent, "--archived")
    everything = run_json(app, "memory", "list", agent, "--all")
    assert all(row["archivedAt"] is None and row["supersededBy"] is None for row in live)
    assert archived and all(row["archivedAt"] for row in archived)
    assert len(everything) == 300 > len(live) + len(archived)  # superseded entries only in --all
    people = run_json(app, "memory", "list", agent, "--category", "people")
    assert people and all(row["category"].startswith("people/") for row in people)
    assert not run_json(app, "memory", "list", agent, "--category", "peop")  # segments, not string prefixes
    assert len(run_json(app, "memory", "list", agent, "--all", "--limit", "7")) == 7
    table = run(app, "memory", "list", agent, "--category", "people/family")
    assert table.exit_code == 0 and "people/family" in table.stdout
    both = run(app, "memory", "list", agent, "--live", "--archived")
    assert both.exit_code == 2 and "at most one" in both.stderr


def test_show_prints_whole_entry_including_archived(app: typer.Typer, agent: Path) -> None:
    archived_id = run_json(app, "memory", "list", agent, "--archived")[0]["id"]
    shown = run_json(app, "memory", "show", agent, archived_id)
    stored = MemoryStore(agent / "memory").require(archived_id)
    assert shown["entry"] == json.loads(stored.path.read_text(encoding="utf-8"))
    assert shown["archived"] is True and shown["path"] == str(stored.path)
    text = run(app, "memory", "show", agent, archived_id)
    assert text.exit_code == 0 and "archived" in text.stdout and stored.entry.content[:30] in text.stdout


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["memory", "show", "{agent}", "ffffffffffff"], 1, "no memory entry with id 'ffffffffffff'"),
        (["memory", "show", "{agent}", "../etc"], 2, "invalid entry id"),
        (["memory", "stats", "{missing}"], 2, "does not exist"),
        (["memory", "list", "{missing}"], 2, "does not exist"),
        (["memory", "purge", "{missing}", "--yes"], 2, "does not exist"),
        (["memory", "stats", "{agent}", "--memory-dir", "{missing}"], 1, "no memory directory"),
        (["memory", "restore", "{agent}", "a/b"], 2, "invalid entry id"),
        (["memory", "purge", "{agent}", "--retention-days", "-1"], 2, ""),
    ],
)
def test_expected_errors_are_one_line_not_tracebacks(
    app: typer.Typer, agent: Path, tmp_path: Path, args: list[str], code: int, message: str
) -> None:
    before = tree_bytes(agent)
    result = run(app, *[a.format(agent=agent, missing=tmp_path / "nope") for a in args])
    assert result.exit_code == code, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output
    assert tree_bytes(agent) == before


def test_restore_brings_archived_entries_back(app: typer.Typer, agent: Path) -> None:
    archived = [row["id"] for row in run_json(app, "memory", "list", agent, "--archived")][:2]
    live_id = run_json(app, "memory", "list", agent, "--limit", "1")[0]["id"]
    result = run(app, "memory", "restore", agent, *archived, live_id)
    assert result.exit_code == 0, result.output
    assert f"{live_id}: not archived" in result.stdout
    store = MemoryStore(agent / "memory")
    for entry_id in archived:
        assert store.require(entry_id).entry.is_live
        assert entry_id in result.stdout


def test_restore_reports_missing_ids_and_exits_1(app: typer.Typer, agent: Path) -> None:
    archived = run_json(app, "memory", "list", agent, "--archived")[0]["id"]
    result = run(app, "memory", "restore", agent, "ffffffffffff", archived)
    assert result.exit_code == 1 and "ffffffffffff" in result.stderr and "1 of 2 not restored" in result.stderr
    assert MemoryStore(agent / "memory").require(archived).entry.is_live  # the others still went through


def test_restore_and_purge_refuse_while_a_cycle_holds_the_lock(app: typer.Typer, agent: Path) -> None:
    archived = run_json(app, "memory", "list", agent, "--archived")[0]["id"]
    before = tree_bytes(agent / "memory")
    with CycleLock(agent, "dream cycle-7"):
        for args in (["memory", "restore", agent, archived], ["memory", "purge", agent, "--yes"]):
            result = run(app, *args)
            assert result.exit_code == 1
            assert "another dreamkeeper cycle holds" in result.stderr and "dream cycle-7" in result.stderr
            assert "Traceback" not in result.output
    assert tree_bytes(agent / "memory") == before


def test_purge_is_a_dry_run_unless_yes(app: typer.Typer, agent: Path) -> None:
    before = tree_bytes(agent / "memory")
    dry = run_json(app, "memory", "purge", agent)
    assert dry["dryRun"] is True and dry["purged"]
    assert tree_bytes(agent / "memory") == before
    text = run(app, "memory", "purge", agent)
    assert "would purge" in text.stdout and "--yes" in text.stdout
    forever = run_json(app, "memory", "purge", agent, "--retention-days", "0", "--yes")
    assert forever["purged"] == [] and tree_bytes(agent / "memory") == before
    real = run_json(app, "memory", "purge", agent, "--yes")
    assert [e["id"] for e in real["purged"]] == [e["id"] for e in dry["purged"]]
    store = MemoryStore(agent / "memory")
    for entry in real["purged"]:
        assert store.get(entry["id"]) is None
    for entry_id in real["keptAboveFloor"]:
        assert store.require(entry_id).entry.is_archived
    floor = run_json(app, "memory", "purge", agent, "--floor-importance", "1.0", "--floor-reinforcement", "1000")
    # Without the floor, each of those would go unless it is the last record of a specific (then kept, and why).
    kept = {k["id"]: k["reason"] for k in floor["keptLastRecord"]}
    still_archived = set(real["keptAboveFloor"]) | {k["id"] for k in real["keptLastRecord"]}
    assert {e["id"] for e in floor["purged"]} | set(kept) == still_archived
    assert kept and all(reason.startswith("last record of ") for reason in kept.values())


def test_json_output_is_clean_when_run_as_a_process(agent: Path) -> None:
    """Logs (the malformed-file warning) go to stderr; stdout is only the JSON document."""
    code = "import typer; from dreamkeeper.memory.cli import register; app = typer.Typer(); register(app); app()"
    result = subprocess.run(
        [sys.executable, "-c", code, "memory", "stats", str(agent), "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["entries"] == 300
