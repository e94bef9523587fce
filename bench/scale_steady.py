"""Steady cycle: a cycle with nothing changed since the last one, against a full read+parse of the same files.

    python -m bench scale-steady [--sizes 10000,100000] [--baseline DIR] [--apply] [--reps 2] [--decay-min-step X]
                                 [--hours-between H]

Per size, on a fresh synthetic corpus (bench/sim/world.py, as ``bench scale``): a cold cycle, then settling cycles
(unmeasured, at most 10) until one asks the model nothing and writes nothing but decay's rewrites, and the corpus
index (operator/dreamkeeper/memory/corpus_index.py) is warm. The settling cycles lift ``reopen_max_per_cycle``: the
cold cycle's merges leave hundreds of clusters that were never shown as they now stand (a merge took out the
neighbour that held them apart), and the engine offers those at most 10 a cycle (``offer_new_clusters``), merging a
few each time, which makes new ones: at the default cap that backlog lasts dozens of cycles at 10,000 entries and
hundreds at 100,000, and every cycle that merges re-clusters the corpus. Offered all at once, it drains in about
four. The measured cycles use the default settings; then, side by side in one run, each in a fresh
subprocess (its own peak RSS), ``--reps`` times each (the lowest CPU kept): (1) load and parse every entry file
(``MemoryStore(root).scan()``); (2) the steady cycle with the corpus index (after one unmeasured cycle with the
measured settings, since session 31: the settling cycles' lifted cap keys the quiet memo apart); (3) the same cycle with
``corpus_index=False`` (every file read, as before the index); (4) with ``--baseline DIR`` (a worktree of another
commit, e.g. main), that commit's steady cycle, with its own corpus index and cluster cache (one unmeasured cycle of
it builds them). Each of (3) and (4) runs on its own copy of the settled corpus, made once it settled, as on a
volume that one engine tends: a cycle's decay rewrites the files it decays, and anything an engine keeps of its own
writes for its next cycle holds only while no other engine rewrote them in between (the three were one corpus
before session 22, so each engine's next scan found the others' decays instead of its own: the same number of
files read again, but never its own).

CPU seconds (user + system of the child) are the measure: the machine is shared. Each child runs one BLAS thread,
as every ``dreamkeeper`` process does since session 25 (cli.py; ``results_io.child_env``): before, the worker numpy's
OpenBLAS started spun ~0.1 s of CPU into the full read+parse, timed right after its imports (0.55 against 0.47 s at
10,000 entries), so earlier results understate the ratios at 10,000 by about a sixth. ``--apply`` lets the cold cycle
apply its plan (``archive_cap`` 1.0); by default the blast-radius cap (10%) holds the synthetic corpus's first plan
for approval, and every later cycle is skipped with that plan pending (what a deployment sees until a person
approves). Goal (issue 27): steady cycle <= 0.5 x a full read+parse at 10,000 and 100,000 entries.

"Nothing changed since the last one" is the agent's side: the cycle itself still decays importance (RockBot's pass,
``decay.min_step`` 0 by default: every drop written), and the seconds between two of these cycles are enough for
the entries past their grace period (about 6% of the synthetic corpus) to drop and be rewritten every cycle; the
column "wrote" says how many entry files the measured cycle wrote. ``--decay-min-step`` (the frugal decay mode,
settings.py) measures the same cycle where decay writes an entry only once it has fallen that much.
``--dotnet-stamps`` writes the corpus's timestamps as RockBot does (.NET's 7 fraction digits, kept raw by the parser
and compared again at each write), not as Python's isoformat does.

``--corpus-age-days D`` makes each entry 1 to D days before today instead of the fixed old corpus's 1-700 days
before 2026-09-01, most of which has decayed to the floor (about 6% of it still decays every cycle in December 2026;
it ages with the calendar, and from about 2027-02-27, when its newest entries of importance 1.0 reach the floor,
none of it decays: RockBot's mode then writes nothing there, and results of other dates are not comparable in what
they write). In a young corpus (D = 365) about a third of the live entries are past their grace period and above the
floor (34% at 10,000 entries; about half in the year simulation's corpus: bench/results/limits-s42.md), and every
one of them is rewritten every cycle in RockBot's decay mode. The json records each measured cycle's live entries
beside what it wrote. When the repetitions write different numbers of files (the frugal mode at a cadence of hours:
decays fall due in waves), the least CPU kept is the cycle that wrote least; the json's ``allCpu`` and ``allWrote``
hold every repetition.

``--hours-between H`` moves the measured cycles' clock (``CycleOptions.now``): repetition r runs (r + 1) x H hours
after the corpus settled, on every engine's copy alike, as a deployment whose cycles are H hours apart sees them.
Without it the measured cycles run seconds after the settling ones, and every memo that holds "until" a time
(decay's ``quiet_until``, a declined cluster's or a review's next offer) still holds: the cheapest cycle there is.
With it, whatever falls due in those hours is done in the measured cycle (the column "wrote" counts it).
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
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.results_io import child_env, write_result

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parent.parent
GOAL_STEADY_OVER_LOAD = 0.5
RACY_WAIT_SECONDS = 2.5  # the corpus index trusts a file only once it is older than 2 s (its racy-clean rule)
SETTLE_MAX = 10
ENGINE_CACHES = (  # state files each engine keeps
    "corpus-index",
    "corpus-index.log",
    "corpus-index.dirs",
    "cluster-cache",
    "quiet-memo",
)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def child(
    kind: str,
    agent_dir: Path,
    apply: bool,
    min_step: float = 0.0,
    settle: bool = False,
    now: datetime | None = None,
) -> dict[str, Any]:
    if kind == "load":
        from dreamkeeper.memory import MemoryStore

        cpu = _cpu()
        scan = MemoryStore(agent_dir / "memory").scan()
        return {"cpuSeconds": _cpu() - cpu, "entries": len(scan.entries), "peakRssMiB": _rss_mib()}
    from dreamkeeper.consolidation.cycle import CycleOptions, run_cycle
    from dreamkeeper.consolidation.settings import MAX_PER_CYCLE, CycleSettings, DecaySettings
    from dreamkeeper.proposers import OfflineProposer

    decay = DecaySettings(min_step=min_step)
    settings = CycleSettings(archive_cap=1.0, decay=decay) if apply else CycleSettings(decay=decay)
    if settle:  # every cluster that is due offered at once: the backlog of a cold cycle's merges drains (see above)
        settings = settings.model_copy(update={"reopen_max_per_cycle": MAX_PER_CYCLE})
    extra: dict[str, Any] = {}
    if kind == "cycle-noindex":
        extra["corpus_index"] = False
    if now is not None:  # ``--hours-between``: the cycle runs at this time (its clock moved)
        extra["now"] = now
    options = CycleOptions(agent_dir=agent_dir, settings=settings, force=True, **extra)
    stages: dict[str, float] = {}
    current: list[Any] = [None, 0.0]

    def progress(stage: str) -> None:
        now = time.process_time()
        if current[0] is not None:
            stages[current[0]] = stages.get(current[0], 0.0) + now - current[1]
        current[0], current[1] = stage, now

    options.progress = progress
    heard = _Heard()  # what the corpus index and the quiet memo said: why a steady cycle did or did not skip a walk
    for name in ("dreamkeeper.memory.corpus_index", "dreamkeeper.consolidation.quiet"):
        logging.getLogger(name).addHandler(heard)
        logging.getLogger(name).setLevel(logging.DEBUG)
    cpu = _cpu()
    outcome = asyncio.run(run_cycle(options, OfflineProposer()))
    if current[0] is not None:
        stages[current[0]] = stages.get(current[0], 0.0) + time.process_time() - current[1]
    report = outcome.report
    wrote = report.saved + report.archived + report.folded + report.decayed + report.purged
    return {
        "cpuSeconds": _cpu() - cpu,
        "peakRssMiB": _rss_mib(),
        "result": report.result,
        "wrote": wrote,
        "decayed": report.decayed,
        "reviewed": report.reviewed,
        "live": report.live_entries,
        "stagesCpu": {k: round(v, 3) for k, v in stages.items()},
        "heard": heard.lines[:8],
    }


class _Heard(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage()[:300])


def _run(
    kind: str,
    agent: Path,
    apply: bool,
    code: Path | None = None,
    min_step: float = 0.0,
    settle: bool = False,
    now: datetime | None = None,
) -> dict[str, Any]:
    if code is None:
        return _run_child(kind, agent, apply, code, min_step, settle, now)
    # Another commit keeps its own corpus index and cluster cache at the same paths (another format, or clusters
    # keyed by another code version: this code would discard them, read every file and cluster again, and the other
    # commit would do the same with ours). Each engine keeps its own caches between its own cycles, as on a volume
    # that runs one engine.
    state = agent / ".dreamkeeper"
    ours = _caches(state)
    _put_caches(state, _THEIRS.get((agent, code), {}))
    try:
        return _run_child(kind, agent, apply, code, min_step, now=now)
    finally:
        _THEIRS[(agent, code)] = _caches(state)
        _put_caches(state, ours)


_THEIRS: dict[tuple[Path, Path], dict[str, bytes]] = {}  # the other commit's caches, between its cycles


def _caches(state: Path) -> dict[str, bytes]:
    return {name: (state / name).read_bytes() for name in ENGINE_CACHES if (state / name).is_file()}


def _put_caches(state: Path, caches: dict[str, bytes]) -> None:
    for name in ENGINE_CACHES:
        (state / name).unlink(missing_ok=True)
        if name in caches:
            (state / name).write_bytes(caches[name])


def _run_child(
    kind: str,
    agent: Path,
    apply: bool,
    code: Path | None,
    min_step: float,
    settle: bool = False,
    now: datetime | None = None,
) -> dict[str, Any]:
    # ``code``: another commit's dreamkeeper, measured by this bench
    env = child_env(None if code is None else str(code / "operator"))
    command = [sys.executable, "-m", "bench.scale_steady", "--child", kind, str(agent)] + (["--apply"] if apply else [])
    if min_step:
        command += ["--decay-min-step", str(min_step)]
    if settle:
        command.append("--settle")
    if now is not None:
        command += ["--now", now.isoformat()]
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=ROOT, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{kind} on {agent} failed ({done.returncode}): {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return min(runs, key=lambda r: float(r["cpuSeconds"]))


def measure(
    size: int,
    seed: int,
    workdir: Path,
    apply: bool,
    reps: int,
    baseline: Path | None,
    min_step: float = 0.0,
    dotnet_stamps: bool = False,
    hours_between: float = 0.0,
    age_days: int | None = None,
) -> dict[str, Any]:
    from bench.sim.world import write_synthetic_corpus

    agent = workdir / f"agent-{size}"
    # ``--corpus-age-days``: a corpus made that many days up to today (a young one), not the fixed old one
    ages: dict[str, Any] = {}
    if age_days is not None:
        today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        ages = {"anchor": today, "max_age_days": age_days}
    write_synthetic_corpus(agent / "memory", size, seed, dotnet_stamps=dotnet_stamps, **ages)
    cold = _run("cycle", agent, apply, min_step=min_step)
    print(f"[steady] {size}: cold cycle {cold['cpuSeconds']:.1f}s CPU, {cold['result']}", file=sys.stderr, flush=True)
    settling = []
    for _ in range(SETTLE_MAX):
        time.sleep(RACY_WAIT_SECONDS)
        settled = _run("cycle", agent, apply, min_step=min_step, settle=True)
        settling.append({k: settled.get(k) for k in ("cpuSeconds", "result", "wrote", "decayed", "reviewed")})
        # Settled: the model was asked nothing and nothing but decay wrote (its time-driven rewrite goes on forever).
        if not settled["reviewed"] and settled["wrote"] == settled.get("decayed", 0):
            break
    kinds = ["load", "cycle", "cycle-noindex"] + (["baseline"] if baseline is not None else [])
    # Each engine on its own copy (see above): the load and this code's cycle on the settled corpus itself.
    agents = {"load": agent, "cycle": agent}
    for kind in kinds[2:]:
        agents[kind] = workdir / f"agent-{size}-{kind}"
        shutil.copytree(agent, agents[kind], symlinks=True)
    time.sleep(RACY_WAIT_SECONDS)  # the copies' files are new (their ctime): the first cycle on each may record them
    if baseline is not None:  # unmeasured: the other commit builds its own caches (corpus index, clusters) once
        _run("cycle", agents["baseline"], apply, baseline, min_step)
    # Unmeasured, as the baseline's: one cycle with the measured cycles' own settings. The settling cycles lift
    # ``reopen_max_per_cycle``, and the quiet memo keys its answers by every setting, so without it this code's
    # first repetition walked the fold, the repair and gating again (0.9 CPU s at 100,000) where the baseline's did
    # not, and a burst of load on the machine could make that repetition the lowest (session 31).
    _run("cycle", agents["cycle"], apply, min_step=min_step)
    time.sleep(RACY_WAIT_SECONDS)
    samples: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
    settled_at = datetime.now(UTC)
    for rep in range(reps):  # interleaved: a burst of load on the machine hits every kind alike
        # ``--hours-between``: this repetition's clock, the same on every engine's copy (each copy's cycles go forward)
        now = settled_at + timedelta(hours=hours_between * (rep + 1)) if hours_between else None
        for kind in kinds:
            if kind == "baseline":
                samples[kind].append(_run("cycle", agents[kind], apply, baseline, min_step, now=now))
            else:
                samples[kind].append(_run(kind, agents[kind], apply, min_step=min_step, now=now))
    best = {k: _best(v) for k, v in samples.items()}
    load = best["load"]["cpuSeconds"]
    row: dict[str, Any] = {
        "size": size,
        "coldCycle": {k: cold[k] for k in ("cpuSeconds", "result", "wrote", "peakRssMiB")},
        "settling": settling,
        "loadCpuSeconds": round(load, 3),
        "loadPeakRssMiB": round(best["load"]["peakRssMiB"], 1),
        "hoursBetween": hours_between,
        "corpusAgeDays": age_days,
    }
    for kind, name in (("cycle", "steady"), ("cycle-noindex", "steadyNoIndex"), ("baseline", "baseline")):
        if kind in best:
            b = best[kind]
            row[name] = {
                "cpuSeconds": round(b["cpuSeconds"], 3),
                "overLoad": round(b["cpuSeconds"] / load, 3),
                "peakRssMiB": round(b["peakRssMiB"], 1),
                "result": b["result"],
                "wrote": b.get("wrote"),
                "live": b.get("live"),
                "reviewed": b.get("reviewed"),
                "stagesCpu": b["stagesCpu"],
                "allCpu": [round(s["cpuSeconds"], 3) for s in samples[kind]],
                "allWrote": [s.get("wrote") for s in samples[kind]],
            }
    print(f"[steady] {size}: {json.dumps(row)}", file=sys.stderr, flush=True)
    for path in {*agents.values()}:
        shutil.rmtree(path, ignore_errors=True)
    return row


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "# Steady cycle against a full read+parse (issue 27)",
        "",
        f"Command: `{result['command']}`. Generated {result['generatedAt']} on {result['machine']}.",
        "",
        (__doc__ or "").split("\n\n", 2)[2].strip(),
        "",
        "CPU seconds (lowest of the repetitions), and the ratio to the load of the same files:",
        "",
        *_clock_line(result),
        "| entries | load+parse | steady, index | / load | steady, no index | / load | baseline steady | / load | "
        "peak RSS MiB (index / no index / baseline) | result | wrote |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["runs"]:
        s, n, b = r["steady"], r["steadyNoIndex"], r.get("baseline", {})
        lines.append(
            f"| {r['size']} | {r['loadCpuSeconds']} | {s['cpuSeconds']} | **{s['overLoad']}** | {n['cpuSeconds']} | "
            f"{n['overLoad']} | {b.get('cpuSeconds', '-')} | {b.get('overLoad', '-')} | {s['peakRssMiB']} / "
            f"{n['peakRssMiB']} / {b.get('peakRssMiB', '-')} | {s['result']} | {s.get('wrote', '-')} |"
        )
    ages = {r.get("corpusAgeDays") for r in result["runs"]} - {None}
    if ages:
        lines += [
            "",
            f"A young corpus (``--corpus-age-days {', '.join(map(str, sorted(ages)))}``); live entries of the "
            "measured cycle: " + "; ".join(f"{r['size']}: {r['steady'].get('live')}" for r in result["runs"]),
        ]
    lines += ["", "CPU seconds per stage of the steady cycle (index / no index):", ""]
    for r in result["runs"]:
        lines.append(f"- {r['size']}: {r['steady']['stagesCpu']} / {r['steadyNoIndex']['stagesCpu']}")
    lines += ["", "## Goal", ""]
    for r in result["runs"]:
        ratio = r["steady"]["overLoad"]
        met = "met" if ratio <= GOAL_STEADY_OVER_LOAD else "missed"
        lines.append(f"- steady cycle at {r['size']} entries <= 0.5 x a full read+parse: {ratio} x — **{met}**")
    lines.append("")
    return "\n".join(lines)


def _clock_line(result: dict[str, Any]) -> list[str]:
    hours = {r.get("hoursBetween", 0.0) for r in result["runs"]}
    if hours == {0.0}:
        return []
    apart = ", ".join(map(str, sorted(hours)))
    wrote = "; ".join(f"{r['size']}: {r['steady'].get('allWrote')}" for r in result["runs"])
    return [
        f"The measured cycles' clock was moved (``--hours-between``): repetition r at (r + 1) x {apart} hours after "
        f"the corpus settled; what each repetition wrote (this code): {wrote}",
        "",
    ]


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench scale-steady", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--apply", action="store_true", help="archive_cap 1.0: the cold cycle applies its plan")
    parser.add_argument("--baseline", type=Path, default=None, help="a worktree of the commit to compare with")
    parser.add_argument("--decay-min-step", type=float, default=0.0, help="decay's frugal mode (settings.py)")
    parser.add_argument(
        "--dotnet-stamps", action="store_true", help="timestamps as RockBot writes them (7 fraction digits)"
    )
    parser.add_argument(
        "--hours-between", type=float, default=0.0, help="the measured cycles run this many hours apart (their clock)"
    )
    parser.add_argument(
        "--corpus-age-days",
        type=int,
        default=None,
        help="entries made 1 to this many days before today (a young corpus; default: the old fixed one)",
    )
    parser.add_argument("--name", default="scale-steady")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--child", nargs=2, metavar=("KIND", "AGENT_DIR"), help=argparse.SUPPRESS)
    parser.add_argument("--settle", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--now", type=datetime.fromisoformat, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(list(argv))
    if args.child:
        logging.basicConfig(level=logging.ERROR)
        kind, agent = args.child
        print(json.dumps(child(kind, Path(agent), args.apply, args.decay_min_step, args.settle, args.now)))
        return 0
    base = args.workdir or (Path("/dev/shm") if os.access("/dev/shm", os.W_OK) else None)
    workdir = Path(tempfile.mkdtemp(prefix="dk-steady-", dir=base))
    baseline = args.baseline.resolve() if args.baseline else None
    try:
        runs = [
            measure(
                int(size),
                args.seed,
                workdir,
                args.apply,
                args.reps,
                baseline,
                args.decay_min_step,
                args.dotnet_stamps,
                args.hours_between,
                args.corpus_age_days,
            )
            for size in args.sizes.split(",")
        ]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    own = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    base_rev = f"; this code at {own.stdout.strip() or '?'}"
    if baseline is not None:
        rev = subprocess.run(
            ["git", "-C", str(baseline), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        )
        base_rev += f"; baseline {baseline} at {rev.stdout.strip()}"
    result: dict[str, Any] = {
        "command": ("python -m bench scale-steady " + shlex.join(argv)).strip(),
        "generatedAt": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, corpus on {base or 'tmp'}{base_rev}",
        "runs": runs,
    }
    write_result(args.out, args.name, result, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
