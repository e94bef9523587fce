"""The year simulation with chaos (issue 22): undos, SIGKILLs of undo/restore/cycle and clock jumps, each command
censused by the simulation's own code, which must find nothing lost or orphaned, and agree with every report."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from bench.sim.census import census
from bench.year_sim import main

from dreamkeeper.memory import ARCHIVED_BY_CYCLE, Entry, StoredEntry
from dreamkeeper.memory.atomic import Fingerprint

T = datetime(2026, 6, 1, tzinfo=UTC)


def test_year_sim_quick_with_chaos(tmp_path: Path) -> None:
    out = tmp_path / "results"
    code = main(["--quick", "--chaos", "--no-plot", "--out", str(out), "--workdir", str(tmp_path)])
    result = json.loads((out / "year-sim-quick-chaos.json").read_text())
    assert code == 0
    chaos, goals = result["chaos"], result["goals"]
    events = chaos["events"]
    # The chaos really happened: killed cycles, undos, restores, both clock jumps, a trusted clock.
    assert events.get("cycle SIGKILLed", 0) > 0 and events.get("undo", 0) > 0 and events.get("restore", 0) > 0
    assert events.get("clock ahead", 0) > 0 and events.get("clock back", 0) > 0
    assert chaos["clockRefusals"] > 0
    assert chaos["commandsCensused"]["cycle"] == 20
    assert goals["chaosSpecificsLost"] == 0 and goals["chaosOrphaned"] == 0
    assert goals["chaosReportCensusMismatches"] == 0
    assert goals["dreamkeeperLostOutsideAllowedPrunes"] == 0 and goals["met"]
    assert "## Chaos" in (out / "year-sim-quick-chaos.md").read_text()


def _entry(entry_id: str, content: str, *, reason: str | None = None) -> StoredEntry:
    entry = Entry(id=entry_id, content=content, created_at=T, updated_at=T)
    if reason is not None:
        entry = entry.evolve(archived_at=T, archive_reason=reason).with_meta(**{ARCHIVED_BY_CYCLE: "c"})
    return StoredEntry(entry, Path(f"/m/{entry_id}.json"), Fingerprint(entry_id, 1, 1))


def test_the_census_sees_an_orphan_and_what_it_took() -> None:
    """The census is not vacuous: a source "merged into" an archived successor is orphaned, and its specific that
    nothing live says is lost; an ephemeral prune's specific is not."""
    a = _entry("a", "Allen Conway works at Xebia.")
    p = _entry("p", "Trish likes Eventbrite.")
    m = _entry("m", "Allen Conway works at Xebia.", reason="undone cycle x")
    before = {"a": a, "p": p}
    after = {
        "a": _entry("a", a.entry.content, reason="stale write-back; merged into m"),
        "p": _entry("p", p.entry.content, reason="flagged ephemeral by consolidation"),
        "m": m,
    }
    found = census("cycle", before, after)
    assert found.orphaned == ["a"]
    assert found.lost == ["Allen", "Conway", "Xebia"]
