"""`undo CYCLE` reverses everything the cycle did (issue 16 finding 5): what its fold archived (tagged
``<cycle>-fold``) and what its plan archived come back, fold survivors get their counters and fields back, review
stamps come off, successors are archived; the corpus reads as before the cycle, and undo exits 0."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer

from dreamkeeper.memory import CREATED_BY_CYCLE, MemoryStore
from tests.robustness.conftest import invoke, make_agent, run_dream

# Run with the corpus index cold, warm, stale and corrupt: the same decisions each time (tests/corpus_index_modes.py).
pytestmark = pytest.mark.usefixtures("corpus_index_mode")


def _corpus(agent: Path) -> dict[str, dict[str, Any]]:
    """Every entry as its file says, metadata {} and null read alike (RockBot's reading)."""
    out = {}
    for stored in MemoryStore(agent / "memory").scan().entries:
        obj = json.loads(stored.path.read_text(encoding="utf-8"))
        obj["metadata"] = obj.get("metadata") or {}
        out[stored.id] = obj
    return out


def _undo_everything(cli_app: typer.Typer, tmp_path: Path, size: int, **settings: object) -> None:
    agent = make_agent(tmp_path / "agent", size=size)
    before = _corpus(agent)
    report = run_dream(agent, **settings).report  # type: ignore[attr-defined]
    assert report.result == "completed"
    assert report.folded > 0 and report.saved > 0 and report.archived > report.folded  # fold, merges, stamps
    result = invoke(cli_app, "undo", agent, report.cycle_id, "--json")
    assert result.exit_code == 0, result.output
    undone = json.loads(result.output)
    assert undone["conflicts"] == []
    assert len(undone["restored"]) == report.archived
    # A merge folded into a live entry (a subsumption, or a text restating one) created no successor: undo gives
    # that entry its fields back instead of archiving it.
    created = report.saved - report.merged_into_existing
    assert created > 0 or report.subsumed > 0
    assert len(undone["archived"]) == created
    after = _corpus(agent)
    successors = {i for i, obj in after.items() if obj["metadata"].get(CREATED_BY_CYCLE) == report.cycle_id}
    assert len(successors) == created
    assert all(after[i]["archivedAt"] is not None for i in successors)  # kept, archived: undo deletes nothing
    differing = {i for i in before if after.get(i) != before[i]}
    assert differing == set(), {i: (before[i], after.get(i)) for i in sorted(differing)[:3]}
    assert set(after) - set(before) == successors


def test_undo_restores_the_corpus(cli_app: typer.Typer, tmp_path: Path) -> None:
    _undo_everything(cli_app, tmp_path, 300)


def test_undo_restores_the_corpus_where_merges_created_successors(cli_app: typer.Typer, tmp_path: Path) -> None:
    # Without subsumption the offline proposer's merges create successors (with it, most are folded into the entry
    # that holds everything): undo archives them.
    _undo_everything(cli_app, tmp_path, 300, subsume=False)


@pytest.mark.slow
def test_undo_restores_the_corpus_at_3000_entries(cli_app: typer.Typer, tmp_path: Path) -> None:
    """The size of the finding: 432 restored, 371 left archived, 140 counters not reverted."""
    _undo_everything(cli_app, tmp_path, 3000)


def test_undo_keeps_what_the_agent_changed_since(cli_app: typer.Typer, tmp_path: Path) -> None:
    """A fold survivor the agent reinforced after the cycle keeps the agent's count (reported as a conflict, exit
    1); everything else is still reversed."""
    agent = make_agent(tmp_path / "agent", size=300)
    report = run_dream(agent).report  # type: ignore[attr-defined]
    survivor = next(
        s for s in MemoryStore(agent / "memory").scan().entries if (s.entry.metadata or {}).get("foldedFrom")
    )
    obj = json.loads(survivor.path.read_text())
    obj["reinforcementCount"] = 999
    survivor.path.write_text(json.dumps(obj, indent=2))
    result = invoke(cli_app, "undo", agent, report.cycle_id, "--json")
    assert result.exit_code == 1
    undone = json.loads(result.output)
    assert undone["conflicts"] == [survivor.id] and "reinforcementCount" in undone["details"][0]
    reverted = json.loads(survivor.path.read_text())
    assert reverted["reinforcementCount"] == 999 and "foldedFrom" not in (reverted.get("metadata") or {})
