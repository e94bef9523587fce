"""Importance decay as a stage of the cycle (issue 15 item 1): RockBot's formula (tests/parity/test_parity_decay.py
holds its vectors), written through the journal, guarded by fingerprints, counted, reversible, and never the reason
an entry is pruned in the cycle that took it below the high-value floor."""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dreamkeeper.consolidation import decay_dues, executor, journal
from dreamkeeper.consolidation.cycle import CycleOptions, recover, run_cycle
from dreamkeeper.consolidation.decay import decayed_importance, plan_decay
from dreamkeeper.consolidation.gating import is_reviewed
from dreamkeeper.consolidation.settings import CycleSettings, DecaySettings
from dreamkeeper.consolidation.undo import undo_cycle
from dreamkeeper.memory import MemoryStore, review_hash
from dreamkeeper.memory.entry import REVIEWED_AT, REVIEWED_HASH
from dreamkeeper.proposers import ScriptedProposer
from tests.consolidation.corpus import ROCKBOT_SHAPE
from tests.parity import rockbot_files

NOW = rockbot_files.datetime(2026, 9, 14, 6, 0, tzinfo=rockbot_files.UTC)
NOTHING = {"toDelete": [], "toSave": []}


def old(entry_id: str, content: str, importance: float, days: float = 100, reviewed: bool = True) -> dict[str, Any]:
    """An entry RockBot wrote ``days`` ago and reviewed then: decay's candidate."""
    when = NOW - timedelta(days=days)
    metadata = {REVIEWED_HASH: review_hash(content), REVIEWED_AT: rockbot_files.o_format(when)} if reviewed else None
    return rockbot_files.entry(
        entry_id, content, createdAt=when, updatedAt=when, importanceScore=importance, metadata=metadata
    )


def run(agent: Path, replies: Any = None, *, dry_run: bool = False, now: Any = NOW, **settings: Any) -> Any:
    proposer = ScriptedProposer(replies if replies is not None else (lambda b, r: NOTHING))
    options = CycleOptions(
        agent_dir=agent,
        settings=CycleSettings(min_interval_hours=0, **ROCKBOT_SHAPE, **settings),
        now=now,
        dry_run=dry_run,
    )
    return asyncio.run(run_cycle(options, proposer))


def obj(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    root = tmp_path / "memory"
    rockbot_files.write(root, old("rose", "Rose is Jordan's sister in Portland.", 0.6))
    rockbot_files.write(root, old("milo", "Rocky has a Sheltie named Milo.", 0.9))
    rockbot_files.write(root, old("fresh", "Allen Conway works at Xebia.", 0.7, days=5))
    return tmp_path


def test_decay_writes_importance_and_updated_at_only_and_keeps_review_stamps(agent: Path) -> None:
    root = agent / "memory"
    before = {p.stem: obj(p) for p in root.glob("*.json")}
    outcome = run(agent)
    report = outcome.report
    assert (report.decayed, report.decay_left_floor) == (2, 1)  # milo: 0.90 → below 0.80
    for name in ("rose", "milo"):
        after = obj(root / f"{name}.json")
        changed = {k for k in after if after[k] != before[name][k]}
        assert changed == {"importanceScore", "updatedAt"}, changed
        assert after["importanceScore"] < before[name]["importanceScore"]
        assert after["updatedAt"].startswith("2026-09-14T06:00:00")
        assert is_reviewed(MemoryStore(root).require(name))  # the stamp fingerprints content only
    assert obj(root / "fresh.json") == before["fresh"]  # inside its grace period
    # RockBot's numbers: 70 days past grace at a 45-day half-life, in float32, written in float32's short form.
    written = obj(root / "rose.json")["importanceScore"]
    assert written == pytest.approx(0.6 * 0.5 ** (70 / 45), rel=1e-6) and repr(written) == str(np.float32(written))
    assert {p.name for p in journal.journal_dir(agent).glob("*-decay.jsonl")} == {f"{report.cycle_id}-decay.jsonl"}


def test_the_cycle_report_and_log_say_how_much_decayed(agent: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="dreamkeeper")
    report = run(agent).report
    messages = [r.getMessage() for r in caplog.records]
    assert "importance decay pass — 2 entries decayed (1 left the high-value floor)" in messages
    assert any("2 decayed (1 left the high-value floor)" in m for m in messages)
    saved = json.loads((agent / ".dreamkeeper" / "cycles" / f"{report.cycle_id}.json").read_text())
    assert (saved["decayed"], saved["decayLeftFloor"]) == (2, 1)
    assert json.loads(report.summary_json())["decayed"] == 2  # the Job's summary carries it to status.lastRun


def test_decay_is_calendar_time_invariant_across_cycles(tmp_path: Path) -> None:
    """A cycle every 12 hours decays as much as one cycle at the end (RockBot anchors on updatedAt). With
    ``min_step`` an entry is only rewritten once it has fallen 0.01, so what is on disk may lag by less than that;
    the importance decay computes from it is the same either way."""
    end = NOW + timedelta(days=10)
    for min_step in (0.0, 0.01):
        once, often = tmp_path / f"once-{min_step}", tmp_path / f"often-{min_step}"
        for agent in (once, often):
            rockbot_files.write(agent / "memory", old("rose", "Rose lives in Portland.", 0.6, days=40))
        decay = DecaySettings(min_step=min_step)
        run(once, now=end, decay=decay)
        for half_days in range(1, 21):
            run(often, now=NOW + timedelta(hours=12 * half_days), decay=decay)
        a, b = (MemoryStore(agent / "memory").require("rose").entry for agent in (once, often))
        assert abs(a.importance_score - b.importance_score) < max(min_step, 1e-5)
        effective = [decayed_importance(e, decay, end) or e.importance_score for e in (a, b)]
        assert effective[0] == pytest.approx(effective[1], abs=1e-5)


def test_the_frugal_mode_rewrites_an_entry_once_it_has_fallen_a_hundredth(agent: Path) -> None:
    root = agent / "memory"
    frugal = DecaySettings(min_step=0.01)
    run(agent, decay=frugal)  # the first decay of old entries writes them
    later = run(agent, now=NOW + timedelta(hours=12), decay=frugal).report  # half a day: 0.6 loses ~0.005
    assert later.decayed == 0
    assert run(agent, now=NOW + timedelta(days=3), decay=frugal).report.decayed == 1  # milo lost 0.014, rose 0.009
    assert run(agent, now=NOW + timedelta(days=5), decay=frugal).report.decayed == 1  # rose, from its own anchor
    assert obj(root / "rose.json")["updatedAt"].startswith("2026-09-19T06:00:00")


def test_by_default_every_drop_is_written_as_rockbot_does(agent: Path) -> None:
    """RockBot writes every decaying entry on every pass (DreamService.cs @05346ff0; the parity vector is in
    tests/parity/test_parity_citizen.py): half a day later both old entries are written again."""
    root = agent / "memory"
    run(agent)
    later = run(agent, now=NOW + timedelta(hours=12)).report
    assert later.decayed == 2
    assert obj(root / "rose.json")["updatedAt"].startswith("2026-09-14T18:00:00")


def test_an_entry_decay_takes_below_the_floor_is_not_pruned_in_that_cycle(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    rockbot_files.write(root, old("milo", "Milo is Rocky's Sheltie.", 0.82, reviewed=False))  # offered
    rockbot_files.write(root, old("note", "Lunch was fine.", 0.3, days=1, reviewed=False))
    prune = {"toDelete": ["milo"], "toSave": []}
    report = run(tmp_path, [prune]).report
    assert report.decay_left_floor == 1 and report.ephemeral == 0
    assert [p.reason for p in report.protections] == [
        "decayed below the high-value floor this cycle (importance=0.28, reinforced=1x)"
    ]
    assert MemoryStore(root).require("milo").entry.is_live
    # From the next cycle on it is an ordinary entry below the floor. It is offered again through a new
    # near-duplicate (removing its stamp by hand would read as an agent's stale copy, whose stamps are restored).
    rockbot_files.write(root, old("milo2", "Milo is Rocky's Sheltie dog.", 0.3, days=1, reviewed=False))
    later = run(tmp_path, [prune], now=NOW + timedelta(hours=12)).report
    assert later.decay_left_floor == 0 and later.ephemeral == 1
    assert MemoryStore(root).require("milo").entry.is_archived


def test_undo_puts_importance_and_updated_at_back_exactly(agent: Path) -> None:
    root = agent / "memory"
    before = {p.stem: obj(p) for p in root.glob("*.json")}
    report = run(agent).report
    result = undo_cycle(agent, root, report.cycle_id)
    assert sorted(result.reverted) == ["milo", "rose"] and result.conflicts == []
    assert {p.stem: obj(p) for p in root.glob("*.json")} == before  # RockBot's own values, 7-digit times included


def test_undo_refuses_a_decayed_entry_the_agent_changed_since(agent: Path) -> None:
    root = agent / "memory"
    report = run(agent).report
    store = MemoryStore(root)
    rose = store.require("rose")
    store.update(rose, rose.entry.evolve(importance_score=0.95))  # the agent re-scored it
    result = undo_cycle(agent, root, report.cycle_id)
    assert "rose" in result.conflicts and store.require("rose").entry.importance_score == 0.95


def test_a_concurrent_agent_write_wins_over_decay(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = agent / "memory"
    real = decay_dues.plan_decay

    def agent_writes_meanwhile(*args: Any, **kwargs: Any) -> Any:
        plan = real(*args, **kwargs)
        path = root / "rose.json"
        data = obj(path) | {"content": "Rose is Jordan's sister; she moved to Seattle."}
        path.write_text(json.dumps(data, indent=2), encoding="utf-8")  # the agent's write, after our snapshot
        return plan

    monkeypatch.setattr(decay_dues, "plan_decay", agent_writes_meanwhile)
    report = run(agent).report
    assert report.conflicts >= 1 and report.decayed == 1  # milo only
    rose = obj(root / "rose.json")
    assert rose["content"].endswith("Seattle.") and rose["importanceScore"] == 0.6


def test_decay_can_be_switched_off(agent: Path) -> None:
    root = agent / "memory"
    before = {p.stem: obj(p) for p in root.glob("*.json")}
    for off in (DecaySettings(enabled=False), DecaySettings(half_life_days=0)):
        report = run(agent, decay=off).report
        assert report.decayed == 0
        assert {p.stem: obj(p)["importanceScore"] for p in root.glob("*.json")} == {
            k: v["importanceScore"] for k, v in before.items()
        }


def test_a_dry_run_decays_nothing_and_shows_it(agent: Path) -> None:
    root = agent / "memory"
    before = {p.name: p.read_bytes() for p in root.glob("*.json")}
    outcome = run(agent, dry_run=True)
    assert outcome.report.decayed == 2 and outcome.plan is not None and len(outcome.plan.decays) == 2
    assert {p.name: p.read_bytes() for p in root.glob("*.json")} == before


def test_a_cycle_killed_during_decay_is_finished_by_recovery(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = agent / "memory"
    store = MemoryStore(root)
    expected = {
        s.id: decayed_importance(s.entry, DecaySettings(), NOW)
        for s in store.scan().live
        if decayed_importance(s.entry, DecaySettings(), NOW) is not None
    }
    assert set(expected) == {"milo", "rose"}
    real = executor.Executor._decay
    calls = {"n": 0}

    def die_after_one(self: executor.Executor, step: journal.Step) -> str:
        if calls["n"] == 1:
            raise SystemExit("killed")  # BaseException: nothing catches it, as with a SIGKILL the journal stays open
        calls["n"] += 1
        return real(self, step)

    monkeypatch.setattr(executor.Executor, "_decay", die_after_one)
    with pytest.raises(SystemExit):
        run(agent)
    monkeypatch.setattr(executor.Executor, "_decay", real)
    done = recover(agent, root, NOW)
    assert len(done) == 1 and done[0][1].decayed == 1  # the other was written before the kill
    assert {i: store.require(i).entry.importance_score for i in expected} == expected
    assert recover(agent, root, NOW) == []


def test_plan_decay_counts_only_entries_the_floor_stops_protecting() -> None:
    from dreamkeeper.memory import Entry, HighValueFloor, StoredEntry
    from dreamkeeper.memory.atomic import Fingerprint

    def stored(entry_id: str, importance: float, reinforcement: int) -> StoredEntry:
        when = NOW - timedelta(days=200)
        entry = Entry(
            id=entry_id,
            content="x",
            created_at=when,
            updated_at=when,
            last_seen_at=when,
            importance_score=importance,
            reinforcement_count=reinforcement,
        )
        return StoredEntry(entry, Path(f"/{entry_id}.json"), Fingerprint("0", 0, 0))

    plan = plan_decay(
        [stored("drops", 0.9, 1), stored("held", 0.9, 7), stored("below", 0.5, 1)],
        DecaySettings(),
        HighValueFloor(),
        NOW,
    )
    assert {a.target.id for a in plan.actions} == {"drops", "held", "below"}
    assert plan.left_floor == {"drops"}  # "held" is still protected by its reinforcement
