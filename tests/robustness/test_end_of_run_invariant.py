"""The end-of-run invariant catches what a stage lets slip (issue 22, Build 1): measured from the corpus before and
after the run, not from any stage's bookkeeping; reported with the ids, a non-zero exit, and reversed while the run
still holds what it did."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import typer

from dreamkeeper.consolidation.undo import undo_cycle
from dreamkeeper.memory import CycleLock
from tests.robustness.census import live_texts, lost_since, orphans
from tests.robustness.conftest import invoke, make_agent, run_dream


def _forget_the_undo(agent: Path) -> None:
    """The state directory loses what it knew of an undo (an older backup of it restored, say): the write-back
    index is rebuilt from the journals, and the undone cycle's journal looks like it still stands. The repair then
    archives again what the undo brought back, "merged into" successors the undo archived: the finding-1 shape,
    reached through no bug of the stage itself."""
    (agent / ".dreamkeeper" / "reversals.jsonl").unlink()
    (agent / ".dreamkeeper" / "writeback-index.json").unlink()


def test_a_cycle_whose_repair_orphans_live_entries_brings_them_back_and_fails(
    cli_app: typer.Typer, tmp_path: Path
) -> None:
    agent = make_agent(tmp_path / "agent", size=300)
    before = live_texts(agent)
    first = run_dream(agent).report  # type: ignore[attr-defined]
    with CycleLock(agent, "undo"):
        undone = undo_cycle(agent, agent / "memory", first.cycle_id)
    assert undone.restored and undone.archived and not undone.incomplete
    _forget_the_undo(agent)
    result = invoke(cli_app, "dream", agent, "--force", "--json", "--settings-json", '{"archive_cap": 1.0}')
    assert result.exit_code == 1  # failed: a stage archived what it must not
    report, _ = json.JSONDecoder().raw_decode(result.output[result.output.index("{") :])
    assert report["result"] == "failed" and "end-of-run invariant" in report["error"]
    assert report["lossesReversed"] > 0
    assert report["specificsLost"] == 0 and report["orphaned"] == 0  # after bringing them back
    assert any("reach no live entry" in n for n in report["notes"])
    assert any(n.startswith("end-of-run invariant: brought back") for n in report["notes"])
    assert orphans(agent) == [] and lost_since(before, agent) == []
    # Brought back for good: announced as restored, the next cycle's repair leaves them live.
    again = run_dream(agent).report  # type: ignore[attr-defined]
    assert again.result == "completed" and again.losses_reversed == 0 and again.resurrected == 0
    assert orphans(agent) == [] and lost_since(before, agent) == []


def test_an_undo_that_would_archive_a_last_holder_is_caught(tmp_path: Path) -> None:
    """With the undo's own guard switched off, the invariant alone keeps the successors whose sources are gone."""
    from dreamkeeper.consolidation import undo as undo_module

    agent = make_agent(tmp_path / "agent", size=300)
    before = live_texts(agent)
    first = run_dream(agent).report  # type: ignore[attr-defined]
    for path in (agent / "memory").rglob("*.json"):  # every source the cycle archived is gone (a purge, say)
        if '"dreamkeeperArchivedByCycle"' in path.read_text():
            path.unlink()
    original = undo_module._Holders.only_here
    undo_module._Holders.only_here = lambda self, entry, replacement=None: []  # type: ignore[method-assign]
    try:
        with CycleLock(agent, "undo"):
            result = undo_cycle(agent, agent / "memory", first.cycle_id)
    finally:
        undo_module._Holders.only_here = original  # type: ignore[method-assign]
    assert result.losses_reversed and result.incomplete
    assert result.specifics_lost == [] and result.orphaned == []
    assert lost_since(before, agent) == []
    shutil.rmtree(agent)
