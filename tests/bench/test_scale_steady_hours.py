"""``bench scale-steady --hours-between``: the measured cycles run with their clock moved, as a deployment whose cycles
are hours apart sees them. Real cycles on a small synthetic corpus (frugal decay): seconds after settling, decay
has nothing due; with the clock three days on, then six (400 entries: 3, then 23, fell by ``min_step``; a
day on, none did), it writes what fell due, through the child process the
bench runs (its ``--now``), and the engine's journal is dated by the moved clock."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.scale_steady import SETTLE_MAX, _clock_line, _run_child, child
from bench.sim.world import write_synthetic_corpus

SIZE = 400
STEP = 0.01


def _settled(agent: Path) -> None:
    write_synthetic_corpus(agent / "memory", SIZE, 7)
    assert child("cycle", agent, True, STEP)["result"] == "completed"
    for _ in range(SETTLE_MAX):
        settled = child("cycle", agent, True, STEP, settle=True)
        if not settled["reviewed"] and settled["wrote"] == settled["decayed"]:
            return
    raise AssertionError("the corpus did not settle")


def _ledger_time(agent: Path) -> datetime:
    ledger = json.loads((agent / ".dreamkeeper" / "ledger.json").read_text())
    return datetime.fromisoformat(ledger["lastCompletedAt"])


def test_a_moved_clock_decays_what_fell_due(tmp_path: Path) -> None:
    agent = tmp_path / "a"
    _settled(agent)
    now = datetime.now(UTC)
    steady = child("cycle", agent, True, STEP)
    assert steady["result"] == "completed"
    assert steady["decayed"] == 0, steady  # seconds later: nothing fell by min_step

    days = child("cycle", agent, True, STEP, now=now + timedelta(days=3))
    assert days["result"] == "completed" and days["decayed"] > 0, days
    assert _ledger_time(agent) >= now + timedelta(days=3) - timedelta(seconds=1)

    # The bench's own child process, given the clock by ``--now``.
    later = _run_child("cycle", agent, True, None, STEP, now=now + timedelta(days=6))
    assert later["result"] == "completed" and later["decayed"] > 0, later
    assert _ledger_time(agent) >= now + timedelta(days=6) - timedelta(seconds=1)


def test_the_report_says_when_the_clock_was_moved() -> None:
    run = {"size": 10, "hoursBetween": 1.0, "steady": {"allWrote": [2, 1]}}
    assert "(r + 1) x 1.0 hours" in _clock_line({"runs": [run]})[0]
    assert "10: [2, 1]" in _clock_line({"runs": [run]})[0]
    assert _clock_line({"runs": [{**run, "hoursBetween": 0.0}]}) == []
