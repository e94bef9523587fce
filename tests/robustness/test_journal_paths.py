"""Journal paths (issue 16 finding 3): relative to the memory root, resolved against the directory being recovered,
refused when they would leave it; `recover` of a copy recovers the copy; nothing is ever written outside."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import typer

from dreamkeeper.consolidation.journal import Journal, incomplete_journals
from dreamkeeper.memory import MemoryStore
from tests.robustness.conftest import dream_killed_at, invoke, make_agent, tree


def _incomplete(agent: Path) -> Journal:
    (path,) = list(incomplete_journals(agent))
    return Journal.load(path)


@pytest.fixture
def interrupted(tmp_path: Path) -> Path:
    """An agent directory whose cycle was killed in the middle of applying its plan."""
    agent = make_agent(tmp_path / "agent")
    dream_killed_at(agent, 12, exact_fold=False)
    return agent


def test_journal_paths_are_relative_to_the_memory_root(interrupted: Path) -> None:
    journal = _incomplete(interrupted)
    assert journal.header.path_base == "memory-root"
    assert journal.header.steps and all(not os.path.isabs(step.path) for step in journal.header.steps)
    assert all(".." not in Path(step.path).parts for step in journal.header.steps)


def test_a_relative_agent_dir_recovers_from_any_working_directory(
    cli_app: typer.Typer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The finding: a cycle on a relative agent dir, recovered from another working directory, wrote 26
    successors under that directory."""
    make_agent(tmp_path / "agent")
    monkeypatch.chdir(tmp_path)
    dream_killed_at(Path("agent"), 12, exact_fold=False)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    result = invoke(cli_app, "recover", tmp_path / "agent")
    assert result.exit_code == 0, result.output
    assert "recovered" in result.output
    assert list(elsewhere.iterdir()) == []
    assert list(incomplete_journals(tmp_path / "agent")) == []


def test_recover_of_a_copy_writes_into_the_copy(cli_app: typer.Typer, interrupted: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(interrupted, copy, symlinks=True)
    original = tree(interrupted)
    result = invoke(cli_app, "recover", copy)
    assert result.exit_code == 0, result.output
    assert tree(interrupted) == original  # the original, journal included, is untouched
    assert list(incomplete_journals(copy)) == [] and list(incomplete_journals(interrupted)) != []


def test_an_old_journal_with_absolute_paths_recovers_into_the_copy(
    cli_app: typer.Typer, interrupted: Path, tmp_path: Path
) -> None:
    """Journals written before this change hold the paths the cycle saw; they are read relative to the memory root
    their header names, so a copied agent directory still recovers into itself."""
    journal = _incomplete(interrupted)
    header = journal.header.model_copy(
        update={
            "path_base": "as-written",
            "memory_root": str(interrupted / "memory"),
            "steps": [
                s.model_copy(update={"path": str(interrupted / "memory" / s.path)}) for s in journal.header.steps
            ],
        }
    )
    lines = journal.path.read_text().splitlines()
    journal.path.write_text("\n".join([header.model_dump_json(), *lines[1:]]) + "\n")
    copy = tmp_path / "copy"
    shutil.copytree(interrupted, copy, symlinks=True)
    original = tree(interrupted)
    assert invoke(cli_app, "recover", copy).exit_code == 0
    assert tree(interrupted) == original
    assert list(incomplete_journals(copy)) == []


@pytest.mark.parametrize(
    "escape", ["../../outside/x.json", "/tmp/x.json", "people/../../../x.json", "people/other-id.json"]
)
def test_a_step_whose_path_leaves_the_root_is_refused(
    cli_app: typer.Typer, interrupted: Path, tmp_path: Path, escape: str
) -> None:
    """A hand-edited (or hostile) journal: the step is refused, recorded and skipped; the rest completes."""
    journal = _incomplete(interrupted)
    index = next(i for i, s in enumerate(journal.header.steps) if i not in journal.outcomes)
    steps = list(journal.header.steps)
    steps[index] = steps[index].model_copy(update={"path": escape})
    lines = journal.path.read_text().splitlines()
    journal.path.write_text(
        "\n".join([journal.header.model_copy(update={"steps": steps}).model_dump_json(), *lines[1:]]) + "\n"
    )
    outside = tmp_path / "outside"
    outside.mkdir()
    result = invoke(cli_app, "recover", interrupted)
    assert result.exit_code == 1, result.output  # something was skipped: said, not hidden
    assert "skipped" in result.output
    assert list(outside.iterdir()) == [] and not Path("/tmp/x.json").exists()
    assert list(incomplete_journals(interrupted)) == []  # complete: the agent is not wedged
    record = [json.loads(line) for line in journal.path.read_text().splitlines()[1:]]
    assert {"step": index, "outcome": "failed"}.items() <= next(r for r in record if r.get("step") == index).items()
    assert invoke(cli_app, "recover", interrupted).output.strip() == "nothing to recover"


def test_a_journal_that_is_not_one_is_set_aside(cli_app: typer.Typer, interrupted: Path) -> None:
    journal = _incomplete(interrupted)
    journal.path.write_text("garbage\n")
    result = invoke(cli_app, "recover", interrupted)
    assert result.exit_code == 0, result.output
    assert journal.path.with_name(journal.path.name + ".unreadable").read_text() == "garbage\n"
    assert list(incomplete_journals(interrupted)) == []


def test_a_symlinked_journal_dir_is_refused(cli_app: typer.Typer, interrupted: Path, tmp_path: Path) -> None:
    journals = interrupted / ".dreamkeeper" / "journal"
    moved = tmp_path / "journals-elsewhere"
    journals.rename(moved)
    journals.symlink_to(moved, target_is_directory=True)
    result = invoke(cli_app, "recover", interrupted)
    assert result.exit_code == 1 and "symbolic link" in result.output
    assert MemoryStore(interrupted / "memory").scan().entries  # nothing lost either way
