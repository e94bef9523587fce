"""The scale bench's quick mode end to end (no timing assertions: speed goals live in the bench's results)."""

from __future__ import annotations

import json
from pathlib import Path

from bench.scale import main

STAGES = {"purge", "snapshot", "fold", "gating", "proposal", "validation", "apply", "report"}


def test_scale_quick_pipeline(tmp_path: Path) -> None:
    out = tmp_path / "results"
    assert main(["--quick", "--out", str(out), "--workdir", str(tmp_path)]) == 0
    result = json.loads((out / "scale-quick.json").read_text())
    (run,) = result["runs"]
    assert run["size"] == 300
    assert run["corpus"]["entries"] == 300 and run["corpus"]["embeddings"] > 0
    assert run["report"]["total"] == 300
    assert run["report"]["hard_deletes"] == 0
    for key in ("loadSeconds", "cycleSeconds", "cycleOverLoad", "peakRssMiB", "warmLoadSeconds", "warmCycleSeconds"):
        assert run[key] > 0, key
    assert set(run["stages"]) >= STAGES
    assert run["warmReport"]["reviewed"] < run["report"]["reviewed"]  # the second cycle is gated
    # The steady-state goal is judged against the load of the same (stamped) files.
    assert result["goals"]["warmCycleOverLoad"] == run["warmCycleOverLoad"] > 0
    assert {"cycleOverLoad", "peakRssMiB", "rssMet", "warmCycleOverLoad"} <= set(result["goals"])
    assert (out / "scale-quick.md").exists() and (out / "scale-quick.png").exists()
    assert not list(tmp_path.glob("dk-scale-*"))
