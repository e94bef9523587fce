"""``bench cycle-start``: each side is the tree it names, read from the process's own rusage and import log."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from bench.cycle_start import ROOT, main


def test_each_side_runs_its_own_tree_and_the_reading_says_what_it_loaded(tmp_path: Path) -> None:
    # The baseline: this tree with the embeddings module importing openai eagerly, as before session 24 (and so any
    # command that registers them all loads it).
    baseline = tmp_path / "baseline"
    shutil.copytree(ROOT / "operator", baseline / "operator", ignore=shutil.ignore_patterns("__pycache__"))
    module = baseline / "operator" / "dreamkeeper" / "proposers" / "embeddings.py"
    text = module.read_text(encoding="utf-8")
    future = "from __future__ import annotations\n"
    module.write_text(text.replace(future, future + "import openai  # eager, as before\n", 1), encoding="utf-8")
    cli = baseline / "operator" / "dreamkeeper" / "cli.py"  # and seed-vocabulary registering every command
    alone = ', "seed-vocabulary": "dreamkeeper.kube.cli"}'
    assert alone in cli.read_text(encoding="utf-8")
    cli.write_text(cli.read_text(encoding="utf-8").replace(alone, "}"), encoding="utf-8")

    out = tmp_path / "out"
    assert main(["--baseline", str(baseline), "--repeat", "1", "--workdir", str(tmp_path), "--out", str(out)]) == 0
    result = json.loads((out / "cycle-start.json").read_text(encoding="utf-8"))
    assert set(result["workloads"]) == {"dream", "seed-vocabulary"}
    dream = result["workloads"]["dream"]
    this, base = dream["this"], dream["baseline"]
    assert "openai" in base["heavyImports"] and "openai" not in this["heavyImports"]
    assert "pydantic" in this["heavyImports"] and "pydantic" in base["heavyImports"]
    seed = result["workloads"]["seed-vocabulary"]
    assert "openai" in seed["baseline"]["heavyImports"]  # the baseline registers every command, dream's among them
    assert "openai" not in seed["this"]["heavyImports"]
    for side in (this, base, seed["this"], seed["baseline"]):
        (run,) = side["runs"]
        assert run["cpuSeconds"] > 0 and run["wallSeconds"] > 0 and run["peakRssMiB"] > 10
    reading = (out / "cycle-start.md").read_text(encoding="utf-8")
    assert "`seed-vocabulary`" in reading and "openai" in reading and result["command"] in reading
    assert not list(tmp_path.glob("dk-cycle-start-*"))  # its agent copies are removed


def test_a_settled_agent_is_cycled_on_each_sides_own_copy_and_left_as_it_was(tmp_path: Path) -> None:
    from bench.cycle_start import SAMPLE

    agent = tmp_path / "settled"
    shutil.copytree(SAMPLE, agent)
    before = sorted((p.relative_to(agent).as_posix(), p.stat().st_mtime_ns) for p in agent.rglob("*"))
    out = tmp_path / "out"
    argv = [
        "--baseline",
        str(ROOT),
        "--repeat",
        "1",
        "--workdir",
        str(tmp_path),
        "--out",
        str(out),
        "--agent",
        str(agent),
    ]
    assert main(argv) == 0
    result = json.loads((out / "cycle-start.json").read_text(encoding="utf-8"))
    assert set(result["workloads"]) == {"dream", "seed-vocabulary", "dream-settled"}
    for side in result["workloads"]["dream-settled"].values():
        (run,) = side["runs"]
        assert run["cpuSeconds"] > 0 and run["peakRssMiB"] > 10
    assert sorted((p.relative_to(agent).as_posix(), p.stat().st_mtime_ns) for p in agent.rglob("*")) == before
    assert "`dream-settled`" in (out / "cycle-start.md").read_text(encoding="utf-8")
