"""Scale: offline consolidation cycles on synthetic corpora of growing size.

    python -m bench scale [--quick] [--sizes 1000,10000,100000] [--out DIR]

Per size, on a fresh synthetic corpus (bench/sim/world.py: the sample agent's world and near-duplicate rates,
embeddings on about half the facts, no review stamps), each measurement runs in a fresh subprocess so its peak
RSS is its own: (1) load and parse every entry file (``MemoryStore(root).scan()``); (2) a cold-start cycle with
the offline proposer, timed per stage through ``CycleOptions.progress``; (3) a second cycle on the result (the
steady state: everything is stamped reviewed), compared with a fresh load of the stamped files. Goals: 100k
cycle <= 3 x load, peak RSS < 1 GiB, time(100k) / time(10k) <= 12.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
GOAL_CYCLE_OVER_LOAD = 3.0
GOAL_RSS_MIB = 1024.0
GOAL_GROWTH = 12.0


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def _cpu_seconds() -> float:
    """User + system CPU of this process: less sensitive than wall time to other work on a shared machine."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def child_load(agent_dir: Path) -> dict[str, Any]:
    from dreamkeeper.memory import MemoryStore

    cpu = _cpu_seconds()
    started = time.perf_counter()
    scan = MemoryStore(agent_dir / "memory").scan()
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "cpuSeconds": _cpu_seconds() - cpu,
        "entries": len(scan.entries),
        "peakRssMiB": _peak_rss_mib(),
    }


def child_cycle(agent_dir: Path, apply: bool = False) -> dict[str, Any]:
    """One cold cycle; ``apply``: with ``archive_cap`` 1.0, so the plan is applied instead of held by the 10% cap."""
    from dreamkeeper.consolidation.cycle import CycleOptions, run_cycle
    from dreamkeeper.consolidation.settings import CycleSettings
    from dreamkeeper.proposers import OfflineProposer

    stages: dict[str, float] = {}
    stages_cpu: dict[str, float] = {}
    current: list[Any] = [None, 0.0, 0.0]

    rss: dict[str, float] = {}

    def progress(stage: str) -> None:
        now, cpu_now = time.perf_counter(), _cpu_seconds()
        if current[0] is not None:
            stages[current[0]] = stages.get(current[0], 0.0) + now - current[1]
            stages_cpu[current[0]] = stages_cpu.get(current[0], 0.0) + cpu_now - current[2]
            rss[current[0]] = round(_peak_rss_mib(), 1)  # peak so far, at the end of that stage
        current[0], current[1], current[2] = stage, now, cpu_now

    settings = CycleSettings(archive_cap=1.0) if apply else CycleSettings()
    options = CycleOptions(agent_dir=agent_dir, settings=settings, force=True, progress=progress)
    cpu = _cpu_seconds()
    started = time.perf_counter()
    outcome = asyncio.run(run_cycle(options, OfflineProposer()))
    finished = time.perf_counter()
    progress("")  # closes the last stage
    stages.pop("", None)
    report = outcome.report
    return {
        "seconds": finished - started,
        "cpuSeconds": _cpu_seconds() - cpu,
        "stages": {k: round(v, 3) for k, v in stages.items()},
        "stagesCpu": {k: round(v, 3) for k, v in stages_cpu.items()},
        "peakRssByStageMiB": rss,
        "peakRssMiB": _peak_rss_mib(),
        "report": {
            k: getattr(report, k)
            for k in (
                "total",
                "reviewed",
                "withheld",
                "clusters",
                "folded",
                "saved",
                "archived",
                "rejected",
                "census_refusals",
                "hard_deletes",
                "specifics_lost",
                "live_entries",
            )
        },
    }


def _child(kind: str, agent_dir: Path, source: Path | None = None, apply: bool = False) -> dict[str, Any]:
    """Run one measurement in a fresh interpreter and read its JSON line back. ``source``: a tree whose
    ``operator/dreamkeeper`` is imported instead of this checkout's (the baseline of a side-by-side run)."""
    command = [sys.executable, "-m", "bench.scale", "--child", kind, str(agent_dir), *(["--apply"] if apply else [])]
    from bench.results_io import child_env

    env = child_env()
    if source is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(source / "operator"), env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        command, capture_output=True, text=True, check=False, cwd=Path(__file__).parent.parent, env=env
    )
    if done.returncode != 0:
        raise RuntimeError(f"{kind} on {agent_dir} failed ({done.returncode}): {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def measure_size(size: int, seed: int, workdir: Path, warm: bool) -> dict[str, Any]:
    from bench.sim.world import write_synthetic_corpus

    agent = workdir / f"agent-{size}"
    started = time.perf_counter()
    corpus = write_synthetic_corpus(agent / "memory", size, seed)
    generated = time.perf_counter() - started
    print(f"[scale] {size}: corpus written in {generated:.1f}s; loading", file=sys.stderr, flush=True)
    load = _child("load", agent)
    print(f"[scale] {size}: load {load['seconds']:.2f}s; cold cycle", file=sys.stderr, flush=True)
    cold = _child("cycle", agent)
    print(f"[scale] {size}: cycle {cold['seconds']:.2f}s {cold['stages']}", file=sys.stderr, flush=True)
    run: dict[str, Any] = {
        "size": size,
        "corpus": corpus,
        "loadSeconds": round(load["seconds"], 3),
        "loadCpuSeconds": round(load["cpuSeconds"], 3),
        "loadPeakRssMiB": round(load["peakRssMiB"], 1),
        "cycleSeconds": round(cold["seconds"], 3),
        "cycleCpuSeconds": round(cold["cpuSeconds"], 3),
        "cycleOverLoad": round(cold["seconds"] / load["seconds"], 2),
        "peakRssMiB": round(cold["peakRssMiB"], 1),
        "cycleCpuOverLoadCpu": round(cold["cpuSeconds"] / load["cpuSeconds"], 2),
        "stages": cold["stages"],
        "stagesCpu": cold["stagesCpu"],
        "peakRssByStageMiB": cold["peakRssByStageMiB"],
        "report": cold["report"],
    }
    if warm:
        # The cold cycle stamped every file (two more metadata keys each): the second cycle is compared with a load
        # of the files as they now are, like with like.
        warm_load = _child("load", agent)
        second = _child("cycle", agent)
        print(f"[scale] {size}: second cycle {second['seconds']:.2f}s", file=sys.stderr, flush=True)
        run.update(
            warmLoadSeconds=round(warm_load["seconds"], 3),
            warmLoadCpuSeconds=round(warm_load["cpuSeconds"], 3),
            warmCycleOverLoad=round(second["seconds"] / warm_load["seconds"], 2),
            warmCycleSeconds=round(second["seconds"], 3),
            warmCycleCpuSeconds=round(second["cpuSeconds"], 3),
            warmPeakRssMiB=round(second["peakRssMiB"], 1),
            warmStages=second["stages"],
            warmPeakRssByStageMiB=second["peakRssByStageMiB"],
            warmReport=second["report"],
        )
    shutil.rmtree(agent, ignore_errors=True)
    return run


def goals(runs: list[dict[str, Any]]) -> dict[str, Any]:
    by_size = {r["size"]: r for r in runs}
    largest = by_size[max(by_size)]
    out: dict[str, Any] = {
        "largest": largest["size"],
        "cycleOverLoad": largest["cycleOverLoad"],
        "cycleOverLoadMet": largest["cycleOverLoad"] <= GOAL_CYCLE_OVER_LOAD,
        "peakRssMiB": max(r["peakRssMiB"] for r in runs),
        "rssMet": max(r["peakRssMiB"] for r in runs) < GOAL_RSS_MIB,
    }
    if "warmCycleSeconds" in largest:
        warm = largest["warmCycleOverLoad"]
        out.update(warmCycleOverLoad=warm, warmCycleOverLoadMet=warm <= GOAL_CYCLE_OVER_LOAD)
        first_load = largest["warmCycleSeconds"] / largest["loadSeconds"]
        out.update(warmCycleOverFirstLoad=round(first_load, 2))
    if 10_000 in by_size and 100_000 in by_size:
        small, big = by_size[10_000], by_size[100_000]
        growth = big["cycleSeconds"] / small["cycleSeconds"]
        out.update(growth100kOver10k=round(growth, 2), growthMet=growth <= GOAL_GROWTH)
        if "warmCycleSeconds" in big and "warmCycleSeconds" in small:
            warm_growth = big["warmCycleSeconds"] / small["warmCycleSeconds"]
            out.update(warmGrowth100kOver10k=round(warm_growth, 2), warmGrowthMet=warm_growth <= GOAL_GROWTH)
    return out


def markdown(result: dict[str, Any], png: str | None) -> str:
    g = result["goals"]
    lines = [
        "# Scale: offline cycles at growing corpus sizes",
        "",
        f"Command: `{result['command']}`. Generated {result['generatedAt']} on {result['machine']}.",
        "",
        "Each figure is a fresh subprocess on a fresh synthetic corpus in tmpfs (no review stamps: the first cycle "
        "is a cold start; the second is the steady state). Wall seconds, with the process's CPU seconds (user + "
        "system) in parentheses: the machine is shared, so wall time includes waiting for a core.",
        "",
    ]
    if png:
        lines += [f"![scale]({png})", ""]
    lines += [
        "| entries | load+parse s (CPU) | cold cycle s (CPU) | cycle / load | load of the stamped files s (CPU) | "
        "second cycle s (CPU) | second / its load | peak RSS MiB | reviewed | saved | archived |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["runs"]:
        lines.append(
            f"| {r['size']} | {r['loadSeconds']} ({r['loadCpuSeconds']}) | {r['cycleSeconds']} "
            f"({r['cycleCpuSeconds']}) | {r['cycleOverLoad']} | {r.get('warmLoadSeconds', '-')} "
            f"({r.get('warmLoadCpuSeconds', '-')}) | {r.get('warmCycleSeconds', '-')} "
            f"({r.get('warmCycleCpuSeconds', '-')}) | {r.get('warmCycleOverLoad', '-')} | {r['peakRssMiB']} | "
            f"{r['report']['reviewed']} | {r['report']['saved']} | {r['report']['archived']} |"
        )
    lines += ["", "Seconds per stage (cold cycle):", ""]
    stages = list(result["runs"][0]["stages"])
    lines += ["| entries | " + " | ".join(stages) + " |", "|---|" + "---|" * len(stages)]
    for r in result["runs"]:
        lines.append(f"| {r['size']} | " + " | ".join(str(r["stages"].get(s, "-")) for s in stages) + " |")
    if any("warmStages" in r for r in result["runs"]):
        lines += ["", "Seconds per stage (second cycle):", ""]
        lines += ["| entries | " + " | ".join(stages) + " |", "|---|" + "---|" * len(stages)]
        for r in result["runs"]:
            if "warmStages" in r:
                lines.append(f"| {r['size']} | " + " | ".join(str(r["warmStages"].get(s, "-")) for s in stages) + " |")
    lines += ["", "Peak RSS so far at the end of each stage, MiB (cold cycle):", ""]
    lines += ["| entries | " + " | ".join(stages) + " |", "|---|" + "---|" * len(stages)]
    for r in result["runs"]:
        by_stage = r.get("peakRssByStageMiB", {})
        lines.append(f"| {r['size']} | " + " | ".join(str(by_stage.get(s, "-")) for s in stages) + " |")
    lines += [
        "",
        "## Goals",
        "",
        f"- cycle at {g['largest']} entries <= 3 x load: {g['cycleOverLoad']} x — "
        f"**{'met' if g['cycleOverLoadMet'] else 'missed'}**",
        f"- peak RSS < 1 GiB: {g['peakRssMiB']} MiB — **{'met' if g['rssMet'] else 'missed'}**",
    ]
    if "warmCycleOverLoad" in g:
        lines.append(
            f"- second (steady-state) cycle at {g['largest']} entries <= 3 x load of the same files: "
            f"{g['warmCycleOverLoad']} x — **{'met' if g['warmCycleOverLoadMet'] else 'missed'}** "
            f"({g['warmCycleOverFirstLoad']} x the first, unstamped load)"
        )
    if "growth100kOver10k" in g:
        lines.append(
            f"- time(100k) / time(10k) <= 12, cold start: {g['growth100kOver10k']} — "
            f"**{'met' if g['growthMet'] else 'missed'}**"
        )
    if "warmGrowth100kOver10k" in g:
        lines.append(
            f"- time(100k) / time(10k) <= 12, second cycle: {g['warmGrowth100kOver10k']} — "
            f"**{'met' if g['warmGrowthMet'] else 'missed'}**"
        )
    lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench scale", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one small corpus (300 entries), for tests")
    parser.add_argument("--sizes", default=None, help="comma-separated corpus sizes (default 1000,10000,100000)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-warm", action="store_true", help="skip the second (steady-state) cycle")
    parser.add_argument("--name", default=None, help="result file stem (default scale, or scale-quick)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--workdir", type=Path, default=None, help="where corpora are written (default /dev/shm)")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="cold cycles only, side by side with the tree BASELINE holding operator/dreamkeeper "
        "(e.g. `git archive main operator | tar -x -C DIR`): bench/scale_cold.py",
    )
    parser.add_argument("--baseline-label", default=None, help="what the baseline is (e.g. main@215a8d1)")
    parser.add_argument("--repeat", type=int, default=3, help="with --baseline: runs per tree (the least CPU counts)")
    parser.add_argument(
        "--apply",
        action="store_true",
        help="with --baseline: cold cycles with archive_cap 1.0 (the plan applied, not held by the 10%% cap)",
    )
    parser.add_argument("--child", nargs=2, metavar=("KIND", "AGENT_DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args(list(argv))
    if args.child:
        logging.basicConfig(level=logging.ERROR)
        kind, agent = args.child
        print(json.dumps(child_load(Path(agent)) if kind == "load" else child_cycle(Path(agent), args.apply)))
        return 0
    sizes = [int(s) for s in (args.sizes or ("300" if args.quick else "1000,10000,100000")).split(",")]
    name = args.name or ("scale-quick" if args.quick else "scale")
    base = args.workdir or (Path("/dev/shm") if os.access("/dev/shm", os.W_OK) else None)
    workdir = Path(tempfile.mkdtemp(prefix="dk-scale-", dir=base))
    try:
        if args.baseline is not None:
            from bench.scale_cold import side_by_side_main

            return side_by_side_main(args, sizes, workdir, ("python -m bench scale " + shlex.join(argv)).strip())
        runs = [measure_size(size, args.seed, workdir, warm=not args.no_warm) for size in sizes]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result: dict[str, Any] = {
        "command": ("python -m bench scale " + shlex.join(argv)).strip(),
        "generatedAt": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, corpus on {base or 'the temp dir'}",
        "runs": runs,
        "goals": goals(runs),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    json_path, md_path, png_path = (args.out / f"{name}{suffix}" for suffix in (".json", ".md", ".png"))
    json_path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    if not args.no_plot:
        from bench.plots import plot_scale

        plot_scale(result, png_path)
        print(f"wrote {png_path}")
    md_path.write_text(markdown(result, None if args.no_plot else png_path.name), encoding="utf-8")
    print(f"wrote {json_path}\nwrote {md_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
