"""The cold side-by-side mode of the scale bench end to end (no timing assertions: the goal lives in the results)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench.scale import main

REPO = Path(__file__).resolve().parents[2]


def test_cold_cycles_side_by_side_on_copies_of_one_corpus(tmp_path: Path) -> None:
    out = tmp_path / "results"
    # This checkout as its own baseline: both sides must then decide exactly the same on the same corpus.
    argv = ["--sizes", "200", "--repeat", "1", "--out", str(out), "--workdir", str(tmp_path), "--baseline", str(REPO)]
    assert main([*argv, "--baseline-label", "itself"]) == 0
    result = json.loads((out / "scale-cold.json").read_text())
    (run,) = result["runs"]
    assert run["size"] == 200 and run["corpus"]["entries"] == 200
    base, this = run["baseline"], run["this"]
    for side in (base, this):
        assert side["loadCpuSeconds"] > 0 and side["cycleCpuSeconds"] > 0
        # From the unrounded seconds: equal to the rounded figures' ratio up to their rounding.
        assert side["cycleCpuOverLoadCpu"] == pytest.approx(side["cycleCpuSeconds"] / side["loadCpuSeconds"], rel=0.1)
        assert {"purge", "fold", "decay", "gating", "report"} <= set(side["stagesCpu"])
        assert side["report"]["total"] == 200 and side["report"]["hard_deletes"] == 0
    assert base["report"] == this["report"]  # the same corpus, copied with its mtimes, the same code
    text = (out / "scale-cold.md").read_text()
    assert "itself" in text and "| 200 |" in text
    assert not list(tmp_path.glob("dk-scale-*"))


def test_apply_mode_applies_the_plan_the_cap_holds_and_reports_rss_per_stage(tmp_path: Path) -> None:
    results: dict[bool, dict[str, object]] = {}
    for apply in (False, True):
        out = tmp_path / f"results-{apply}"
        argv = ["--sizes", "300", "--repeat", "1", "--out", str(out), "--workdir", str(tmp_path), "--baseline"]
        assert main([*argv, str(REPO), *(["--apply"] if apply else [])]) == 0
        (run,) = json.loads((out / "scale-cold.json").read_text())["runs"]
        assert run["this"]["peakRssByStageMiB"]["decay"] > 0 and "Peak RSS" in (out / "scale-cold.md").read_text()
        results[apply] = run["this"]["report"]
    held, applied = results[False], results[True]
    # The synthetic corpus's first plan is over the 10% cap: held by default, applied with --apply.
    assert held["saved"] == 0 and applied["saved"] > 0  # type: ignore[operator]
    assert applied["hard_deletes"] == held["hard_deletes"] == 0
