"""The peak probe end to end on a small corpus (no memory thresholds: the figures live in bench/results)."""

from __future__ import annotations

import json
from pathlib import Path

from bench.peak_probe import DEFAULT_TRACE, main

REPO = Path(__file__).resolve().parents[2]


def test_traced_peaks_and_stage_rss_side_by_side(tmp_path: Path) -> None:
    out = tmp_path / "results"
    argv = ["--size", "300", "--reps", "1", "--out", str(out), "--workdir", str(tmp_path), "--baseline", str(REPO)]
    assert main([*argv, "--baseline-label", "itself"]) == 0
    result = json.loads((out / "peak-probe.json").read_text())
    sides = result["run"]["sides"]
    assert set(sides) == {"baseline", "this"}
    for side in sides.values():
        assert side["report"]["result"] == "completed" and side["report"]["saved"] > 0  # the plan applied
        assert len(side["peakRssMiBAll"]) == 1 and side["peakRssMiBAll"][0] > 0
        assert {"purge", "gating", "apply", "report"} <= set(side["rssAtStageStartMiB"])
        assert set(side["traced"]) == set(DEFAULT_TRACE)
        update = side["traced"]["dreamkeeper.consolidation.writes:Writes._update_index"]
        assert update["calls"] == 1 and update["peakMiB"] > 0  # a cycle that merged folds its journal in
        final = side["traced"]["dreamkeeper.consolidation.writes:Writes._final_state"]
        assert final["calls"] >= 1 and final["peakMiB"] >= final["atExitMiB"] >= 0
    # One code, one corpus, one hash seed: the traced bytes are the same on both sides.
    update = "dreamkeeper.consolidation.writes:Writes._update_index"
    assert sides["baseline"]["traced"][update]["peakMiB"] == sides["this"]["traced"][update]["peakMiB"]
    text = (out / "peak-probe.md").read_text()
    assert "itself" in text and "Writes._update_index" in text
    assert not list(tmp_path.glob("dk-peak-*"))
