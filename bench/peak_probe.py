"""Where a cold cycle's memory goes: tracemalloc's peak within named functions, and RSS at each stage, side by side.

    python -m bench peak-probe [--size 10000] [--dotnet-stamps] [--baseline DIR] [--trace MODULE:QUALNAME] ...

One synthetic corpus (bench/sim/world.py) is written once; each tree (this checkout, and DIR's ``operator`` with
``--baseline``: ``git archive <commit> operator | tar -x -C DIR``) runs a cold cycle (offline proposer,
``archive_cap`` 1.0: the plan applied) on a fresh copy of it, in a fresh interpreter each, trees alternating:

* ``--reps`` untraced runs: peak RSS (``ru_maxrss``), the RSS at each stage's start (``/proc/self/statm``) and CPU;
* one traced run: tracemalloc started at the entry of each ``--trace`` function and stopped at its exit, giving the
  peak of what was allocated within it and what was still allocated at its exit (functions that do not nest; a
  call inside another traced one is not traced). The default: the report stage's two transients at 100,000 entries
  (session 35): the write-back index update and the final-state scan.

Traced bytes are nearly the same run after run for one corpus and code (no allocator's arenas, no fragmentation; the
child runs with ``PYTHONHASHSEED=0``): the comparison that peak RSS, ±30 MiB between runs of one tree at 100,000
entries, cannot make. Nearly: a peak moves by a few hundred bytes between runs of one code (measured at 300 entries:
522,246-522,540 bytes), so a peak rounded to 0.01 MiB can differ by one step; ``peakBytes`` holds it unrounded.
Tracing costs memory of its own, so RSS comes from the untraced runs only.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.results_io import child_env, head_label, write_result

DEFAULT_TRACE = (
    "dreamkeeper.consolidation.writes:Writes._update_index",
    "dreamkeeper.consolidation.writes:Writes._final_state",
)
ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
MiB = 1024 * 1024


def _rss_now() -> float:
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / MiB


def _peak() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _traced(spec: str, calls: list[dict[str, Any]]) -> None:
    """``spec`` (``module:Qual.name``) replaced by a wrapper that traces each call that is not inside another."""
    module, qualname = spec.split(":")
    owner: Any = importlib.import_module(module)
    *path, name = qualname.split(".")
    for part in path:
        owner = getattr(owner, part)
    original: Callable[..., Any] = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if tracemalloc.is_tracing():
            calls.append({"nested": True})
            return original(*args, **kwargs)
        tracemalloc.start()
        try:
            return original(*args, **kwargs)
        finally:
            current, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            calls.append(
                {
                    "peakMiB": round(peak / MiB, 2),
                    "atExitMiB": round(current / MiB, 2),
                    "peakBytes": peak,
                    "atExitBytes": current,
                }
            )

    setattr(owner, name, wrapper)


def child(agent: Path, trace: Sequence[str]) -> dict[str, Any]:
    """One cold cycle on ``agent``; traced (``trace`` given) or not."""
    from dreamkeeper.consolidation.cycle import CycleOptions, run_cycle
    from dreamkeeper.consolidation.settings import CycleSettings
    from dreamkeeper.proposers import OfflineProposer

    calls: dict[str, list[dict[str, Any]]] = {spec: [] for spec in trace}
    for spec in trace:
        _traced(spec, calls[spec])
    stages: dict[str, float] = {}

    def progress(stage: str) -> None:
        stages[stage] = round(_rss_now(), 1)

    options = CycleOptions(agent_dir=agent, settings=CycleSettings(archive_cap=1.0), force=True, progress=progress)
    started = time.process_time()
    outcome = asyncio.run(run_cycle(options, OfflineProposer()))
    return {
        "cpuSeconds": round(time.process_time() - started, 3),
        "peakRssMiB": round(_peak(), 1),
        "rssAtStageStartMiB": stages,
        "result": outcome.report.result,
        "saved": outcome.report.saved,
        "archived": outcome.report.archived,
        "traced": calls,
    }


def _run(pristine: Path, workdir: Path, tree: Path | None, trace: Sequence[str]) -> dict[str, Any]:
    agent = workdir / "agent"  # one path for both trees: a cycle holds paths, so their length is kept equal
    shutil.rmtree(agent, ignore_errors=True)
    shutil.copytree(pristine, agent, symlinks=True)
    env = child_env(None if tree is None else str(tree / "operator"))
    env["PYTHONHASHSEED"] = "0"
    command = [sys.executable, "-m", "bench.peak_probe", "--child", str(agent)]
    command += [arg for spec in trace for arg in ("--trace", spec)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=ROOT, env=env)
    finally:
        shutil.rmtree(agent, ignore_errors=True)
    if done.returncode != 0:
        raise RuntimeError(f"peak-probe child failed ({done.returncode}): {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _summary(calls: list[dict[str, Any]]) -> dict[str, Any]:
    traced = [c for c in calls if not c.get("nested")]
    return {
        "calls": len(calls),
        "peakMiB": max((c["peakMiB"] for c in traced), default=None),
        "atExitMiB": max((c["atExitMiB"] for c in traced), default=None),
        "peakBytes": max((c["peakBytes"] for c in traced), default=None),
    }


def measure(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    from bench.sim.world import write_synthetic_corpus

    pristine = workdir / "pristine"
    write_synthetic_corpus(pristine / "memory", args.size, args.seed, dotnet_stamps=args.dotnet_stamps)
    trees: dict[str, Path | None] = {"this": None}
    if args.baseline is not None:
        trees = {"baseline": args.baseline.resolve(), "this": None}
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label in trees}
    for _ in range(args.reps):
        for label, tree in trees.items():
            runs[label].append(_run(pristine, workdir, tree, ()))
    traced = {label: _run(pristine, workdir, tree, args.trace) for label, tree in trees.items()}
    sides: dict[str, Any] = {}
    for label in trees:
        least = min(runs[label], key=lambda r: float(r["cpuSeconds"]))
        sides[label] = {
            "peakRssMiBAll": [r["peakRssMiB"] for r in runs[label]],
            "cpuSecondsAll": [r["cpuSeconds"] for r in runs[label]],
            "rssAtStageStartMiB": least["rssAtStageStartMiB"],
            "report": {"result": least["result"], "saved": least["saved"], "archived": least["archived"]},
            "traced": {spec: _summary(calls) for spec, calls in traced[label]["traced"].items()},
        }
    return {"size": args.size, "seed": args.seed, "dotnetStamps": args.dotnet_stamps, "sides": sides}


def markdown(result: dict[str, Any]) -> str:
    run, labels = result["run"], list(result["run"]["sides"])
    sides = run["sides"]
    lines = [
        "# Where a cold cycle's memory goes (issue 27)",
        "",
        f"Command: `{result['command']}`. Generated {result['generatedAt']} on {result['machine']}.",
        f"Trees: {', '.join(f'{k} = {v}' for k, v in result['trees'].items())}.",
        "",
        (__doc__ or "").split("\n\n", 2)[2].strip(),
        "",
        f"{run['size']} entries, seed {run['seed']}, {'.NET' if run['dotnetStamps'] else 'Python'} timestamps.",
        "",
        "| tree | peak RSS MiB, every run | CPU s, every run | result (saved / archived) |",
        "|---|---|---|---|",
    ]
    for label in labels:
        side = sides[label]
        report = side["report"]
        lines.append(
            f"| {label} | {side['peakRssMiBAll']} | {side['cpuSecondsAll']} | "
            f"{report['result']} ({report['saved']} / {report['archived']}) |"
        )
    stages = list(sides[labels[-1]]["rssAtStageStartMiB"])
    lines += ["", "RSS at each stage's start, MiB (the run with the least CPU):", ""]
    lines += ["| tree | " + " | ".join(stages) + " |", "|---|" + "---|" * len(stages)]
    for label in labels:
        at = sides[label]["rssAtStageStartMiB"]
        lines.append(f"| {label} | " + " | ".join(str(at.get(stage, "-")) for stage in stages) + " |")
    lines += ["", "Traced within each function (MiB; the largest of its calls):", ""]
    lines += ["| function | " + " | ".join(f"{label}: peak / at exit (calls)" for label in labels) + " |"]
    lines.append("|---|" + "---|" * len(labels))
    for spec in sides[labels[-1]]["traced"]:
        cells = []
        for label in labels:
            t = sides[label]["traced"].get(spec, {})
            cells.append(f"{t.get('peakMiB')} / {t.get('atExitMiB')} ({t.get('calls', 0)})")
        lines.append(f"| `{spec}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench peak-probe", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--dotnet-stamps", action="store_true", help="timestamps as RockBot writes them")
    parser.add_argument("--reps", type=int, default=2, help="untraced runs per tree (peak RSS)")
    parser.add_argument("--trace", action="append", default=None, help="module:Qual.name (repeatable)")
    parser.add_argument("--baseline", type=Path, default=None, help="a tree holding another commit's operator/")
    parser.add_argument("--baseline-label", default=None)
    parser.add_argument("--name", default="peak-probe")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(list(argv))
    args.trace = args.trace or list(DEFAULT_TRACE)
    if args.child is not None:
        print(json.dumps(child(args.child, args.trace if "--trace" in argv else ())))
        return 0
    base = args.workdir or (Path("/dev/shm") if os.access("/dev/shm", os.W_OK) else None)
    workdir = Path(tempfile.mkdtemp(prefix="dk-peak-", dir=base))
    try:
        run = measure(args, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    trees = {"this": head_label()}
    if args.baseline is not None:
        trees = {"baseline": args.baseline_label or str(args.baseline), **trees}
    result = {
        "command": ("python -m bench peak-probe " + " ".join(argv)).strip(),
        "generatedAt": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, corpus on {base or 'tmp'}",
        "trees": trees,
        "run": run,
    }
    write_result(args.out, args.name, result, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
