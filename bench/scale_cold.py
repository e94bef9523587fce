"""Cold cycles side by side: this checkout against a baseline tree, on copies of one corpus, in one run.

    python -m bench scale --baseline DIR [--baseline-label main@SHA] [--sizes 10000,100000] [--repeat 3]

DIR holds the baseline's ``operator/dreamkeeper`` (``git archive main operator | tar -x -C DIR``); its children
import it through PYTHONPATH. Per size, one synthetic corpus is written once and kept pristine; every run copies
it (files and mtimes) and measures, in a fresh interpreter each, ``MemoryStore.scan()`` (the read) and one cold
cycle with the offline proposer, in CPU seconds (user + system): the machine is shared, and CPU time is what
contention distorts least. Trees alternate run by run, and the least CPU of ``--repeat`` runs counts for each
measurement (noise only ever adds). Issue 27's goal: cold cycle <= 3 x the read at 10,000 and 100,000 entries.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.results_io import head_label, write_result
from bench.scale import _child

GOAL_COLD_OVER_READ = 3.0


def _one_tree(pristine: Path, workdir: Path, source: Path | None, label: str, apply: bool) -> dict[str, Any]:
    agent = workdir / f"agent-{label}"
    shutil.rmtree(agent, ignore_errors=True)
    shutil.copytree(pristine, agent, symlinks=True)
    try:
        load = _child("load", agent, source)
        cold = _child("cycle", agent, source, apply)
    finally:
        shutil.rmtree(agent, ignore_errors=True)
    return {"load": load, "cold": cold}


def _least(runs: list[dict[str, Any]]) -> dict[str, Any]:
    load = min((r["load"] for r in runs), key=lambda m: m["cpuSeconds"])
    cold = min((r["cold"] for r in runs), key=lambda m: m["cpuSeconds"])
    return {
        "loadCpuSeconds": round(load["cpuSeconds"], 3),
        "loadCpuSecondsAll": [round(r["load"]["cpuSeconds"], 3) for r in runs],
        "cycleCpuSeconds": round(cold["cpuSeconds"], 3),
        "cycleCpuSecondsAll": [round(r["cold"]["cpuSeconds"], 3) for r in runs],
        "cycleSeconds": round(cold["seconds"], 3),
        "cycleCpuOverLoadCpu": round(cold["cpuSeconds"] / load["cpuSeconds"], 2),
        "peakRssMiB": round(max(r["cold"]["peakRssMiB"] for r in runs), 1),
        "stagesCpu": cold["stagesCpu"],
        "peakRssByStageMiB": cold.get("peakRssByStageMiB", {}),
        "report": cold["report"],
    }


def measure(size: int, seed: int, workdir: Path, baseline: Path, repeat: int, apply: bool = False) -> dict[str, Any]:
    from bench.sim.world import write_synthetic_corpus

    pristine = workdir / f"pristine-{size}"
    corpus = write_synthetic_corpus(pristine / "memory", size, seed)
    runs: dict[str, list[dict[str, Any]]] = {"baseline": [], "this": []}
    for n in range(repeat):
        order = [("baseline", baseline), ("this", None)]
        for label, source in order if n % 2 == 0 else order[::-1]:
            run = _one_tree(pristine, workdir, source, label, apply)
            runs[label].append(run)
            print(
                f"[scale-cold] {size} {label} run {n + 1}: read {run['load']['cpuSeconds']:.2f} CPU s, cold cycle "
                f"{run['cold']['cpuSeconds']:.2f} CPU s",
                file=sys.stderr,
                flush=True,
            )
    shutil.rmtree(pristine, ignore_errors=True)
    return {"size": size, "corpus": corpus, "baseline": _least(runs["baseline"]), "this": _least(runs["this"])}


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "# Cold cycle side by side with the baseline (issue 27 item 3)",
        "",
        f"Command: `{result['command']}`. Baseline: {result['baselineLabel']}; this: {result['thisLabel']}. "
        f"Generated {result['generatedAt']} on {result['machine']}.",
        "",
        "CPU seconds (user + system) of a fresh interpreter each; both trees on copies of one synthetic corpus "
        "(no review stamps: a cold start), alternating, the least of "
        f"{result['repeat']} runs per measurement. The read is that tree's `MemoryStore.scan()`.",
        "",
        "| entries | read (base / this) | cold cycle (base / this) | cycle / read (base / this) | goal <= 3 | "
        "peak RSS MiB (base / this) | saved (base / this) | archived (base / this) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in result["runs"]:
        b, t = r["baseline"], r["this"]
        met = "met" if t["cycleCpuOverLoadCpu"] <= GOAL_COLD_OVER_READ else "missed"
        lines.append(
            f"| {r['size']} | {b['loadCpuSeconds']} / {t['loadCpuSeconds']} | {b['cycleCpuSeconds']} / "
            f"{t['cycleCpuSeconds']} | {b['cycleCpuOverLoadCpu']} / {t['cycleCpuOverLoadCpu']} | **{met}** | "
            f"{b['peakRssMiB']} / {t['peakRssMiB']} | {b['report']['saved']} / {t['report']['saved']} | "
            f"{b['report']['archived']} / {t['report']['archived']} |"
        )
    runs = result["runs"]
    stages = list(dict.fromkeys(k for r in runs for side in ("baseline", "this") for k in r[side]["stagesCpu"]))
    lines += ["", "CPU seconds per stage of the cold cycle (base / this), from the run with the least CPU:", ""]
    lines += ["| entries | " + " | ".join(stages) + " |", "|---|" + "---|" * len(stages)]
    for r in runs:
        b, t = r["baseline"]["stagesCpu"], r["this"]["stagesCpu"]
        lines.append(f"| {r['size']} | " + " | ".join(f"{b.get(s, '-')} / {t.get(s, '-')}" for s in stages) + " |")
    lines += ["", "Peak RSS so far at the end of each stage, MiB (base / this), from the run with the least CPU:", ""]
    lines += ["| entries | " + " | ".join(stages) + " |", "|---|" + "---|" * len(stages)]
    for r in runs:
        b, t = r["baseline"].get("peakRssByStageMiB", {}), r["this"].get("peakRssByStageMiB", {})
        lines.append(f"| {r['size']} | " + " | ".join(f"{b.get(s, '-')} / {t.get(s, '-')}" for s in stages) + " |")
    lines += ["", "Every run's CPU seconds (read; cold cycle):", ""]
    for r in runs:
        for side in ("baseline", "this"):
            m = r[side]
            lines.append(f"- {r['size']} {side}: read {m['loadCpuSecondsAll']}; cycle {m['cycleCpuSecondsAll']}")
    lines.append("")
    return "\n".join(lines)


def side_by_side_main(args: argparse.Namespace, sizes: list[int], workdir: Path, command: str) -> int:
    runs = [measure(size, args.seed, workdir, args.baseline, max(1, args.repeat), args.apply) for size in sizes]
    name = args.name or "scale-cold"
    result: dict[str, Any] = {
        "command": command,
        "generatedAt": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, corpus on {workdir.parent}",
        "baselineLabel": args.baseline_label or str(args.baseline),
        "thisLabel": _head(),
        "repeat": max(1, args.repeat),
        "runs": runs,
    }
    write_result(args.out, name, result, markdown)
    return 0


def _head() -> str:
    return head_label()
