"""Restores that stick, and ids compared as the filesystem stores them (issue 22, findings 6 and 7).

A restore that reports failure has either not happened or is kept: it is announced in the reversals log before its
first write. ``case01`` and ``CASE01`` are two entries on Linux: show, restore, undo and purge find the right file.
A restored merge source is not merged again by the next cycle."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import typer

from dreamkeeper import dream_command
from dreamkeeper.memory import MemoryStore
from dreamkeeper.memory import atomic as atomic_module
from tests.robustness.conftest import Killed, invoke, make_agent, run_dream, tree


def _merge_sources(agent: Path, cycle_id: str) -> list[Path]:
    """The files the cycle archived as merge sources."""
    found = []
    for path in sorted((agent / "memory").rglob("*.json")):
        obj = json.loads(path.read_text())
        if (obj.get("metadata") or {}).get("dreamkeeperArchivedByCycle") == cycle_id and str(
            obj.get("archiveReason") or ""
        ).startswith("merged into "):
            found.append(path)
    assert found, "the cycle archived no merge source"
    return found


def _merge_source(agent: Path, cycle_id: str) -> Path:
    return _merge_sources(agent, cycle_id)[0]


def _state(path: Path) -> tuple[str | None, str | None]:
    obj = json.loads(path.read_text())
    return obj.get("archivedAt"), obj.get("archiveReason")


def test_a_restore_whose_log_cannot_be_written_has_not_happened(cli_app: typer.Typer, tmp_path: Path) -> None:
    """Finding 6: restore exited 1 (reversals log unwritable) after it had restored the entry; the next cycle then
    archived it again, silently."""
    agent = make_agent(tmp_path / "agent", size=300)
    report = run_dream(agent).report  # type: ignore[attr-defined]
    source = _merge_source(agent, report.cycle_id)
    (agent / ".dreamkeeper" / "reversals.jsonl").mkdir()
    memory = tree(agent / "memory")
    result = invoke(cli_app, "memory", "restore", agent, source.stem)
    assert result.exit_code == 1
    assert "reversals.jsonl" in result.output and "nothing was changed" in result.output
    assert tree(agent / "memory") == memory  # not restored: it has not happened


def test_a_restore_killed_after_its_write_is_kept(cli_app: typer.Typer, tmp_path: Path) -> None:
    """Finding 6: a restore killed between its write and its log line was reverted by the next cycle's repair."""
    agent = make_agent(tmp_path / "agent", size=300)
    report = run_dream(agent).report  # type: ignore[attr-defined]
    source = _merge_source(agent, report.cycle_id)

    def hook(stage: str, path: Path) -> None:
        if stage == "swapped" and path == source:
            raise Killed  # the restored version is in place; nothing after it runs

    with atomic_module.write_seam(hook), pytest.raises(Killed):
        invoke(cli_app, "memory", "restore", agent, source.stem)
    assert _state(source) == (None, None)  # it happened
    after = run_dream(agent).report  # type: ignore[attr-defined]
    assert after.result == "completed", after.error
    assert _state(source) == (None, None)  # and it is kept


def test_restored_merge_sources_are_not_merged_again(cli_app: typer.Typer, tmp_path: Path) -> None:
    """Finding 7: restoring a merge source did not stick: the next cycle merged it again (its text is still in a
    live successor). On today's main 52 of these 66 are archived again by the next cycle."""
    agent = make_agent(tmp_path / "agent", size=300)
    report = run_dream(agent).report  # type: ignore[attr-defined]
    sources = _merge_sources(agent, report.cycle_id)
    assert len(sources) > 20
    assert invoke(cli_app, "memory", "restore", agent, *[p.stem for p in sources]).exit_code == 0
    for _ in range(2):
        run_dream(agent, min_interval_hours=0)
        assert [p.stem for p in sources if _state(p) != (None, None)] == []


def _twins(agent: Path) -> tuple[Path, Path, dict[str, Any]]:
    """``case01`` archived and ``CASE01`` live, side by side in one category (two entries on Linux)."""
    directory = agent / "memory" / "people"
    directory.mkdir(parents=True, exist_ok=True)
    base = json.loads(next((agent / "memory").rglob("*.json")).read_text())
    lower = {
        **base,
        "id": "case01",
        "category": "people",
        "content": "Dana Lindqvist's badge number is 4417.",
        "archivedAt": "2025-01-01T00:00:00.0000000+00:00",
        "archiveReason": "flagged ephemeral by consolidation",
        "importanceScore": 0.1,
        "reinforcementCount": 1,
        "metadata": None,
    }
    upper = {
        **lower,
        "id": "CASE01",
        "content": "Ingrid Quint prefers Teams.",
        "archivedAt": None,
        "archiveReason": None,
    }
    (directory / "case01.json").write_text(json.dumps(lower, indent=2))
    (directory / "CASE01.json").write_text(json.dumps(upper, indent=2))
    return directory / "case01.json", directory / "CASE01.json", lower


def test_show_finds_the_entry_whose_id_it_was_given(cli_app: typer.Typer, tmp_path: Path) -> None:
    """Finding 6: ``memory show … case01`` printed CASE01's text."""
    agent = make_agent(tmp_path / "agent", size=30)
    _twins(agent)
    shown = invoke(cli_app, "memory", "show", agent, "case01", "--json")
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)["entry"]["content"] == "Dana Lindqvist's badge number is 4417."
    other = invoke(cli_app, "memory", "show", agent, "CASE01", "--json")
    assert json.loads(other.output)["entry"]["content"] == "Ingrid Quint prefers Teams."


def test_restore_finds_the_entry_whose_id_it_was_given(cli_app: typer.Typer, tmp_path: Path) -> None:
    """Finding 6: ``memory restore … case01`` said "not archived", exit 0, while case01.json was archived: that
    memory could not be restored through the CLI."""
    agent = make_agent(tmp_path / "agent", size=30)
    lower, upper, _ = _twins(agent)
    untouched = upper.read_bytes()
    result = invoke(cli_app, "memory", "restore", agent, "case01")
    assert result.exit_code == 0, result.output
    assert _state(lower) == (None, None)
    assert upper.read_bytes() == untouched


def test_an_id_matching_several_entries_only_ignoring_case_is_refused(cli_app: typer.Typer, tmp_path: Path) -> None:
    agent = make_agent(tmp_path / "agent", size=30)
    _twins(agent)
    result = invoke(cli_app, "memory", "show", agent, "Case01")
    assert result.exit_code == 1 and "several files" in result.output


def test_purge_deletes_only_the_file_it_names(cli_app: typer.Typer, tmp_path: Path) -> None:
    agent = make_agent(tmp_path / "agent", size=30)
    _, upper, _ = _twins(agent)
    untouched = upper.read_bytes()
    invoke(cli_app, "memory", "purge", agent, "--retention-days", "1", "--yes")
    assert upper.read_bytes() == untouched  # the live twin is never the one deleted
    assert MemoryStore(agent / "memory").get("CASE01") is not None


@pytest.mark.parametrize("where", ["file-as-state-dir", "ledger-dir"])
def test_smaller_messages_say_what_was_found(cli_app: typer.Typer, tmp_path: Path, where: str) -> None:
    """Finding 7: a regular file where a directory belongs said "it is not a regular file, not a directory";
    ledger.json as a directory gave a raw errno."""
    agent = make_agent(tmp_path / "agent", size=30)
    if where == "file-as-state-dir":
        (agent / ".dreamkeeper").write_text("not a directory")
        expected = "it is a regular file, not a directory"
    else:
        (agent / ".dreamkeeper" / "ledger.json").mkdir(parents=True)
        expected = "it is a directory, not a regular file"
    result = invoke(cli_app, "dream", agent)
    assert result.exit_code == 1
    assert expected in result.output and "Errno" not in result.output


def test_undo_restores_the_twin_its_cycle_archived(cli_app: typer.Typer, tmp_path: Path) -> None:
    """A cycle folds CASE01 (an exact duplicate of an older entry) while case01, a different entry, sits beside it:
    undo brings back CASE01's file, and never touches case01's."""
    agent = make_agent(tmp_path / "agent", size=30)
    lower, upper, obj = _twins(agent)
    older = {**obj, "id": "dup000000001", "content": "Ingrid Quint prefers Teams.", "archivedAt": None}
    older["archiveReason"], older["createdAt"] = None, "2024-01-01T00:00:00.0000000+00:00"
    (lower.parent / "dup000000001.json").write_text(json.dumps(older, indent=2))
    lower.write_text(
        lower.read_text().replace('"archivedAt": "2025-01-01T00:00:00.0000000+00:00"', '"archivedAt": null')
    )
    untouched = lower.read_bytes()
    report = run_dream(agent).report  # type: ignore[attr-defined]
    assert _state(upper)[1] == "merged into dup000000001"
    result = invoke(cli_app, "undo", agent, report.cycle_id)
    assert result.exit_code == 0, result.output
    assert _state(upper) == (None, None) and lower.read_bytes() == untouched


README = Path(__file__).resolve().parents[2] / "README.md"


def _readme_exit_codes() -> dict[int, str]:
    """The README's "Exit codes of `dreamkeeper dream`" paragraph, as {code: the words that follow it}."""
    text = README.read_text(encoding="utf-8")
    start = text.index("Exit codes of `dreamkeeper dream`:")
    paragraph = " ".join(text[start : text.index("\n\n", start)].split())
    found = re.finditer(r"(?:: |, |; )(\d{1,3}) \**([A-Za-z][A-Za-z' ]*)", paragraph)
    return {int(match.group(1)): match.group(2).strip() for match in found}


def test_the_readme_exit_codes_are_the_ones_dream_returns(cli_app: typer.Typer, tmp_path: Path) -> None:
    """Finding 7: the README said exit 4 was proposer-failed; the code returns 4 for paused, 5 for proposer-failed."""
    described = _readme_exit_codes()
    meant = {
        0: "completed",
        dream_command.EXIT_FAILED: "failed",
        dream_command.EXIT_USAGE: "invalid settings",
        dream_command.EXIT_LOCKED: "another cycle holds",
        dream_command.EXIT_PAUSED: "paused",
        dream_command.EXIT_PROPOSER_FAILED: "proposer failed",
        dream_command.EXIT_TERMINATED: "stopped by SIGTERM",
    }
    assert sorted(described) == sorted(meant), described
    for code, words in meant.items():
        assert described[code].startswith(words), (code, described[code])
    # And what the README calls paused is what a paused agent gets.
    agent = make_agent(tmp_path / "agent", size=20)
    (agent / "memory-audit").mkdir()
    (agent / "memory-audit" / "consolidation-paused.json").write_text('{"reason": "audit"}')
    result = invoke(cli_app, "dream", agent, "--force")
    assert described[result.exit_code].startswith("paused"), result.output
