"""The year simulation's quick mode end to end: both arms run, results are written, and the outcome is the claim
(dreamkeeper loses no protected specific and nothing outside allowed prunes; the naive applier loses some)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench.year_sim import main


def test_year_sim_quick_pipeline(tmp_path: Path) -> None:
    out = tmp_path / "results"
    code = main(["--quick", "--out", str(out), "--workdir", str(tmp_path)])
    result = json.loads((out / "year-sim-quick.json").read_text())
    assert code == 0
    assert len(result["cycles"]) == 20
    goals = result["goals"]
    assert goals["dreamkeeperProtectedLost"] == 0
    assert goals["dreamkeeperLostOutsideAllowedPrunes"] == 0
    assert goals["naiveLost"] > 0
    naive, dk = result["arms"]["naive"], result["arms"]["dreamkeeper"]
    assert dk["protectedSurvivingFraction"] == 1.0
    assert naive["protectedSurvivingFraction"] < 1.0
    # The adversary was really hostile to dreamkeeper, and the engine really ran.
    assert dk["destructiveProposed"] > 0
    assert dk["cycleReportTotals"]["hardDeletes"] == 0
    assert dk["cycleReportTotals"]["llmCalls"] > 0
    # The purge ran (quick mode retains archives 3 days) and its last-record rule kept every specific in the store.
    totals = dk["cycleReportTotals"]
    assert totals["purged"] + totals["purgeKeptLastRecord"] > 0
    assert goals["dreamkeeperSpecificsLeftTheStore"] == 0 == dk["store"]["specificsLeftTheStore"]
    assert (out / "year-sim-quick.md").read_text().startswith("# Year simulation")
    assert (out / "year-sim-quick-survival.png").stat().st_size > 10_000
    assert not list(tmp_path.glob("dk-year-sim-*")), "the simulation's work directory is removed"


@pytest.mark.parametrize("memory_format", ["openclaw", "hermes", "claude"])
def test_year_sim_quick_on_each_markdown_format(tmp_path: Path, memory_format: str) -> None:
    """The year simulation through the format seam (issue 25's "Must show"): the agent writes its Markdown as it
    does, the engine consolidates the units against the adversary, render writes them back; nothing leaves the
    store, nothing is hard-deleted, and units really are merged (archived with a successor).

    Subsumption is off here: it settles a cluster one member already covers before any model is asked, and the quick
    world's clusters are mostly such, so with it on the hostile model is barely met (Hermes: never) and no new unit
    text is written. The product default (on) is covered by ``test_year_sim_quick_subsumption_on_markdown``."""
    out = tmp_path / "results"
    argv = ["--quick", "--format", memory_format, "--no-subsume", "--out", str(out), "--workdir", str(tmp_path)]
    code = main([*argv, "--no-plot"])
    result = json.loads((out / f"year-sim-quick-{memory_format}.json").read_text())
    assert code == 0
    assert result["config"]["format"] == memory_format
    goals, dk = result["goals"], result["arms"]["dreamkeeper"]
    assert goals["met"]
    assert goals["dreamkeeperSpecificsLeftTheStore"] == 0 == dk["store"]["specificsLeftTheStore"]
    assert goals["dreamkeeperHardDeletes"] == 0 == dk["cycleReportTotals"]["hardDeletes"]
    assert goals["naiveLost"] > 0 and dk["destructiveProposed"] > 0  # the adversary was hostile to both arms
    totals = dk["cycleReportTotals"]
    assert totals["unitsIngested"] > 0
    # The adversary's "good" merges in this small world are mostly one unit reworded (its other source already
    # folded): issue 23 refuses those as useless, so they are counted, never written.
    assert totals["refusedRestating"] > 0
    if memory_format != "hermes":  # Hermes' caps leave the quick world few entries: nothing to fold there
        assert totals["archivedWithReplacement"] > 0 and totals["unitsTakenOut"] > 0


@pytest.mark.parametrize("memory_format", ["openclaw", "claude"])
def test_year_sim_quick_subsumption_on_markdown(tmp_path: Path, memory_format: str) -> None:
    """With the product's default (subsumption on), a Markdown year still loses nothing and hard-deletes nothing,
    and clusters are settled: units are archived with a successor that already held their text."""
    out = tmp_path / "results"
    code = main(["--quick", "--format", memory_format, "--out", str(out), "--workdir", str(tmp_path), "--no-plot"])
    result = json.loads((out / f"year-sim-quick-{memory_format}.json").read_text())
    assert code == 0
    goals, dk = result["goals"], result["arms"]["dreamkeeper"]
    assert result["config"]["settings"]["subsume"] is True
    assert goals["dreamkeeperSpecificsLeftTheStore"] == 0 == dk["store"]["specificsLeftTheStore"]
    assert goals["dreamkeeperHardDeletes"] == 0 == dk["cycleReportTotals"]["hardDeletes"]
    assert dk["cycleReportTotals"]["archivedWithReplacement"] > 0
