"""The per-file write-cost bench end to end (no timing assertions: the figures live in bench/results)."""

from __future__ import annotations

import json
from pathlib import Path

from bench.write_cost import WORKLOADS, main

REPO = Path(__file__).resolve().parents[2]


def test_every_workload_writes_every_file_and_syncs_directories_once_per_batch(tmp_path: Path) -> None:
    out = tmp_path / "results"
    argv = ["--entries", "40", "--repeat", "1", "--out", str(out), "--workdir", str(tmp_path)]
    assert main([*argv, "--baseline", str(REPO), "--baseline-label", "itself"]) == 0
    result = json.loads((out / "write-cost.json").read_text())
    assert set(result["workloads"]) == set(WORKLOADS)
    for workload, sides in result["workloads"].items():
        for side in sides.values():
            # decay, stamp, prune: one file each; merge: 20 pairs, a successor created and two sources archived each.
            assert side["files"] == (60 if workload == "merge" else 40), workload
            assert side["cpuMicrosecondsPerFile"] > 0
            # Every file's data is fsynced before its rename; directories once per batch, not once per file.
            assert side["fileFsyncsPer1000Files"] >= 1000
            assert side["dirFsyncsPer1000Files"] < 1000, (workload, side)
    assert "itself" in (out / "write-cost.md").read_text()
    assert not list(tmp_path.glob("dk-write-cost-*"))
