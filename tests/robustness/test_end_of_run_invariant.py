"""The end-of-run invariant catches what a stage lets slip (issue 22, Build 1): measured from the corpus before and
after the run, not from any stage's bookkeeping; reported with the ids, a non-zero exit, and reversed while the run
still holds what it did."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import typer

from dreamkeeper.consolidation.cycle import Writes
from dreamkeeper.consolidation.undo import undo_cycle
from dreamkeeper.memory import CycleLock
from tests.robustness.census import live_texts, lost_since, orphans
from tests.robustness.conftest import invoke, make_agent, run_dream

# Run with the corpus index cold, warm, stale and corrupt: the same decisions each time (tests/corpus_index_modes.py).
pytestmark = pytest.mark.usefixtures("corpus_index_mode")


def _forget_the_undo(agent: Path) -> None:
    """The state directory loses what it knew of an undo (an older backup of it restored, say): the write-back
    index is rebuilt from the journals, and the undone cycle's journal looks like it still stands: what the undo
    brought back looks like stale copies of what that cycle archived, "merged into" successors the undo archived."""
    (agent / ".dreamkeeper" / "reversals.jsonl").unlink()
    (agent / ".dreamkeeper" / "writeback-index.json").unlink()


def test_a_repair_never_archives_what_would_reach_no_live_entry(tmp_path: Path) -> None:
    """Finding 1's shape reached through a lost reversals log: the repair keeps those copies live itself (their
    successor chain ends in nothing live), so nothing is orphaned and the invariant has nothing to reverse. The
    shape needs the model's merges (new successors that undo archives): subsumption (issue 23), which folds into a
    member live before the cycle, is off."""
    agent = make_agent(tmp_path / "agent", size=300)
    before = live_texts(agent)
    first = run_dream(agent, subsume=False).report  # type: ignore[attr-defined]
    with CycleLock(agent, "undo"):
        undone = undo_cycle(agent, agent / "memory", first.cycle_id)
    assert undone.restored and undone.archived and not undone.incomplete
    _forget_the_undo(agent)
    report = run_dream(agent, subsume=False).report  # type: ignore[attr-defined]
    assert any("successor chain ends in no live entry kept live" in n for n in report.notes), report.notes
    assert report.result == "completed" and report.losses_reversed == 0
    assert orphans(agent) == [] and lost_since(before, agent) == []


def test_a_stage_that_archives_a_live_entry_into_nothing_is_caught_reversed_and_fails_the_cycle(
    cli_app: typer.Typer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stage slips (stands for any bug): after apply, one more live entry is archived "merged into" an id that
    does not exist, with the cycle's own tag. No stage counts it; the invariant sees it, brings it back, and the
    cycle fails with the id named."""
    agent = make_agent(tmp_path / "agent", size=120)
    before = live_texts(agent)
    victim: list[str] = []
    real_apply = Writes.apply

    def slipping(self: Writes, folded: Any, validated: Any) -> Any:
        applied = real_apply(self, folded, validated)
        stored = next(s for s in self.store.scan().live if s.entry.content in {t for t, _ in before.values()})
        self.store.archive(stored, "merged into 000000000000", cycle_id=self.context.cycle_id)
        victim.append(stored.id)
        return applied

    monkeypatch.setattr(Writes, "apply", slipping)
    result = invoke(cli_app, "dream", agent, "--force", "--json", "--settings-json", '{"archive_cap": 1.0}')
    assert result.exit_code == 1  # failed: a stage archived what it must not
    report, _ = json.JSONDecoder().raw_decode(result.output[result.output.index("{") :])
    assert report["result"] == "failed" and "end-of-run invariant" in report["error"]
    # The victim, and whatever was merged into it (a fold's copies reach nothing live through it either).
    assert report["lossesReversed"] >= 1 and report["specificsLost"] == 0 and report["orphaned"] == 0
    assert any("reach no live entry" in n and victim[0] in n for n in report["notes"])
    (brought,) = [n for n in report["notes"] if n.startswith("end-of-run invariant: brought back")]
    assert victim[0] in brought
    assert lost_since(before, agent) == [] and orphans(agent) == []
    # Brought back for good: announced as restored, the next cycle leaves it live.
    monkeypatch.setattr(Writes, "apply", real_apply)
    again = run_dream(agent).report  # type: ignore[attr-defined]
    assert again.result == "completed" and again.losses_reversed == 0 and again.resurrected == 0
    assert lost_since(before, agent) == []


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


def test_a_loss_made_by_recovery_fails_even_a_cycle_that_is_then_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recovery writes before the minimum interval can skip the cycle: its own invariant still runs, and a loss
    it made (a slipped recovery, standing for any bug) is brought back and fails the cycle instead of a quiet skip."""
    from dreamkeeper.consolidation import writes as writes_module
    from dreamkeeper.memory import MemoryStore
    from tests.robustness.conftest import dream_killed_at

    agent = make_agent(tmp_path / "agent", size=120)
    before = live_texts(agent)
    dream_killed_at(agent, 3)  # killed: its journal is left for the next run's recovery
    # A cycle completed an hour ago, as far as the ledger knows: the next one is too soon, after its recovery.
    ledger = {"lastCompletedAt": (datetime.now(UTC) - timedelta(hours=1)).isoformat()}
    (agent / ".dreamkeeper" / "ledger.json").write_text(json.dumps(ledger))
    real = writes_module.recover_journals
    victim: list[str] = []

    def slipping(agent_dir: Path, root: Path, now: Any = None) -> Any:
        done = real(agent_dir, root, now)
        store = MemoryStore(root)
        stored = next(s for s in store.scan().live if s.entry.content in {t for t, _ in before.values()})
        store.archive(stored, "merged into 000000000000", cycle_id=done[0][0])
        victim.append(stored.id)
        return done

    monkeypatch.setattr(writes_module, "recover_journals", slipping)
    report = run_dream(agent, min_interval_hours=6).report  # type: ignore[attr-defined]
    assert report.skip_reason is not None and "minimum interval" in report.skip_reason
    assert report.result == "failed" and report.losses_reversed >= 1
    assert any(victim[0] in n for n in report.notes if n.startswith("end-of-run invariant: brought back"))
    assert lost_since(before, agent) == []
