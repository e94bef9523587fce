"""Per-file cost of a journaled write (issue 27 item 3), side by side with a baseline tree, in one run.

    python -m bench write-cost --baseline DIR [--baseline-label main@SHA] [--entries 3000] [--repeat 3]

Each workload journals a plan over every entry of a synthetic corpus and runs it with the cycle's own ``Executor``:
``decay`` (importance and updatedAt, as a cold start's decay stage), ``stamp`` (a review stamp each), ``merge``
(pairs merged: a create, then two archives, as the apply stage) and ``prune`` (one archive each). Measured in a fresh
interpreter per tree and workload, on a copy of one pristine corpus: CPU microseconds per file written (journal
written, steps run: to_json, temp file, fsyncs, rename, outcome records), and the fsyncs of directories and of
files per 1,000 files written. DIR holds the baseline's ``operator/dreamkeeper`` (e.g. a worktree of main); trees
alternate, the least CPU of ``--repeat`` runs counts. The corpus is where ``--workdir`` says (default /dev/shm: an
fsync is then nearly free, so the counts say what a real disk would pay for).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.results_io import child_env, side_by_side_header, side_by_side_parser, write_result

WORKLOADS = ("decay", "stamp", "merge", "prune")


def _child(workload: str, agent: Path) -> dict[str, Any]:
    """Runs inside the measured tree's interpreter (its dreamkeeper on PYTHONPATH)."""
    from dreamkeeper.consolidation.executor import Executor
    from dreamkeeper.consolidation.journal_steps import write_journal
    from dreamkeeper.consolidation.plan import DecayAction, MergeAction, Plan, PruneAction, StampAction
    from dreamkeeper.memory import MemoryStore

    counts = {"dir": 0, "file": 0}
    fsync = os.fsync

    def counted(fd: Any) -> None:
        counts["dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"] += 1
        fsync(fd)

    store = MemoryStore(agent / "memory")
    live = sorted(store.scan().entries, key=lambda s: s.id)
    now = datetime(2026, 12, 1, tzinfo=UTC)
    if workload == "decay":
        plan = Plan(decays=[DecayAction(s, s.entry.evolve(importance_score=0.25, updated_at=now)) for s in live])
    elif workload == "stamp":
        plan = Plan(stamps=[StampAction(s, {"dk.reviewedHash": f"h-{s.id}"}) for s in live])
    elif workload == "prune":
        plan = Plan(prunes=[PruneAction(s) for s in live])
    else:
        pairs = list(zip(live[::2], live[1::2], strict=False))
        plan = Plan(
            merges=[
                MergeAction(a.entry.evolve(id=f"{a.id}-m", content=f"{a.entry.content} {b.entry.content}"), [a, b])
                for a, b in pairs
            ]
        )
    os.fsync = counted
    started = time.process_time()
    journal = write_journal(agent, f"bench-{workload}", plan, store, now)
    snapshot = {str(s.path): s for s in live}
    tally = Executor(store, journal, now, snapshot).run()
    cpu = time.process_time() - started
    os.fsync = fsync
    files = tally.decayed + tally.stamped + tally.created + tally.archived
    return {"files": files, "cpuSeconds": cpu, "dirFsyncs": counts["dir"], "fileFsyncs": counts["file"]}


def _run(workload: str, agent: Path, source: Path | None) -> dict[str, Any]:
    env = child_env()
    if source is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(source / "operator"), env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-m", "bench.write_cost", "--child", workload, str(agent)],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).parent.parent,
        env=env,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{workload} on {agent} failed ({done.returncode}): {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _per_file(run: dict[str, Any]) -> dict[str, Any]:
    files = max(1, run["files"])
    return {
        "files": run["files"],
        "cpuMicrosecondsPerFile": round(run["cpuSeconds"] / files * 1e6, 1),
        "dirFsyncsPer1000Files": round(run["dirFsyncs"] / files * 1000, 1),
        "fileFsyncsPer1000Files": round(run["fileFsyncs"] / files * 1000, 1),
    }


def measure(entries: int, workdir: Path, baseline: Path, repeat: int, seed: int) -> dict[str, Any]:
    from bench.sim.world import write_synthetic_corpus

    pristine = workdir / "pristine"
    shutil.rmtree(pristine, ignore_errors=True)
    write_synthetic_corpus(pristine / "memory", entries, seed)
    out: dict[str, Any] = {}
    try:
        for workload in WORKLOADS:
            runs: dict[str, list[dict[str, Any]]] = {"baseline": [], "this": []}
            for n in range(repeat):
                order = [("baseline", baseline), ("this", None)]
                for label, source in order if n % 2 == 0 else order[::-1]:
                    agent = workdir / f"agent-{label}"
                    shutil.rmtree(agent, ignore_errors=True)
                    shutil.copytree(pristine, agent, symlinks=True)
                    try:
                        runs[label].append(_run(workload, agent, source))
                    finally:
                        shutil.rmtree(agent, ignore_errors=True)
            out[workload] = {
                label: {
                    **_per_file(min(side, key=lambda r: r["cpuSeconds"])),
                    "cpuSecondsAll": [round(r["cpuSeconds"], 3) for r in side],
                }
                for label, side in runs.items()
            }
            b, t = out[workload]["baseline"], out[workload]["this"]
            print(
                f"[write-cost] {workload}: {b['cpuMicrosecondsPerFile']} -> {t['cpuMicrosecondsPerFile']} us a file; "
                f"dir fsyncs / 1000 files {b['dirFsyncsPer1000Files']} -> {t['dirFsyncsPer1000Files']}",
                file=sys.stderr,
                flush=True,
            )
    finally:
        shutil.rmtree(pristine, ignore_errors=True)
    return out


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "# Per-file cost of a journaled write, side by side (issue 27 item 3)",
        "",
        f"Command: `{result['command']}`. Baseline: {result['baselineLabel']}; this: {result['thisLabel']}. "
        f"Generated {result['generatedAt']} on {result['machine']}.",
        "",
        f"{result['entries']} entries; every entry written once per workload through the cycle's Executor (journal "
        f"written, steps run), CPU of a fresh interpreter, the least of {result['repeat']} runs per tree. Fsyncs are "
        "counted per 1,000 files written (on tmpfs they cost no time; on a real disk each is a device flush).",
        "",
        "| workload | files | CPU us a file (base / this) | dir fsyncs / 1000 files (base / this) | "
        "file fsyncs / 1000 files (base / this) |",
        "|---|---|---|---|---|",
    ]
    for workload, sides in result["workloads"].items():
        b, t = sides["baseline"], sides["this"]
        lines.append(
            f"| {workload} | {t['files']} | {b['cpuMicrosecondsPerFile']} / {t['cpuMicrosecondsPerFile']} | "
            f"{b['dirFsyncsPer1000Files']} / {t['dirFsyncsPer1000Files']} | "
            f"{b['fileFsyncsPer1000Files']} / {t['fileFsyncsPer1000Files']} |"
        )
    lines += ["", "Every run's CPU seconds:", ""]
    for workload, sides in result["workloads"].items():
        lines.append(f"- {workload}: base {sides['baseline']['cpuSecondsAll']}, this {sides['this']['cpuSecondsAll']}")
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args_list = sys.argv[1:] if argv is None else argv
    if args_list[:1] == ["--child"]:
        print(json.dumps(_child(args_list[1], Path(args_list[2]))))
        return 0
    parser = side_by_side_parser("write-cost", __doc__ or "", "write-cost", 3)
    parser.add_argument("--entries", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(args_list)
    workdir = args.workdir / f"dk-write-cost-{os.getpid()}"
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        workloads = measure(args.entries, workdir, args.baseline, max(1, args.repeat), args.seed)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result = {
        **side_by_side_header("write-cost", args_list, args, "corpus"),
        "entries": args.entries,
        "workloads": workloads,
    }
    write_result(args.out, args.name, result, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
