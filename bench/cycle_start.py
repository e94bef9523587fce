"""What the processes of one cycle Job cost, whole: ``seed-vocabulary`` (its init container) and ``dreamkeeper dream``.

Every cycle the operator runs is a Job of fresh processes (kube/jobspec.py: the init container's ``dreamkeeper
seed-vocabulary --source ... --destination ...`` when a MemoryVocabulary is bound, then ``dreamkeeper dream AGENT
...``), so their imports are paid every cycle, whatever the corpus. This runs both commands, ``dream`` on a copy of
the bundled sample (the offline proposer, as ``make demo``) and ``seed-vocabulary`` of a rendered vocabulary to a
fresh destination, with this code and a baseline tree side by side, alternating, ``--repeat`` times each, and reads
each process's own rusage (``os.wait4``): CPU seconds (user + system), wall seconds, peak RSS. One more run of each
with ``python -X importtime`` says which heavy packages it loaded (``openai`` among them or not). With ``--agent DIR``
(a settled agent, e.g. one ``bench scale-steady`` left), also ``dream-settled``: the whole process of a steady cycle
on each side's own copy of DIR, after one unmeasured cycle each (the copy's new inodes make that one read every
file); what a deployment's Job pays per cycle on that corpus, imports included.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Final

from bench.results_io import side_by_side_header, side_by_side_parser, write_result
from bench.scale_steady import RACY_WAIT_SECONDS

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "operator" / "dreamkeeper" / "demo" / "data" / "sample-agent"
HEAVY: Final = ("openai", "numpy", "pydantic", "typer", "rich", "kubernetes", "kopf", "httpx")


WORKLOADS: Final = ("dream", "seed-vocabulary")
SETTLED: Final = "dream-settled"  # with --agent: that agent's corpus, each side cycling its own copy


def _command(workload: str, workdir: Path, importtime: bool = False, side: str = "this") -> list[str]:
    """The workload's command on fresh input: a copy of the sample (``dream``), a destination that is not there yet
    (``seed-vocabulary``: it creates it); ``dream-settled``: the side's own copy of ``--agent``, cycled in place."""
    flags = ["-X", "importtime"] if importtime else []
    if workload == SETTLED:
        return [
            sys.executable,
            *flags,
            "-m",
            "dreamkeeper",
            "dream",
            str(workdir / f"settled-{side}"),
            "--force",
            "--json",
        ]
    agent = workdir / "agent"
    shutil.rmtree(agent, ignore_errors=True)
    shutil.copytree(SAMPLE, agent)
    if workload == "dream":
        args = ["dream", str(agent), "--force", "--json"]
    else:
        source = workdir / "rendered-vocabulary.json"
        shutil.copyfile(SAMPLE / "merge-coverage-vocabulary.json", source)
        (agent / "merge-coverage-vocabulary.json").unlink()
        args = [
            "seed-vocabulary",
            "--source",
            str(source),
            "--destination",
            str(agent / "merge-coverage-vocabulary.json"),
        ]
    return [sys.executable, *flags, "-m", "dreamkeeper", *args]


def _env(tree: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(tree / "operator"))


def run_once(tree: Path, workdir: Path, workload: str = "dream", side: str = "this") -> dict[str, Any]:
    """One run of ``workload`` on fresh input with ``tree``'s code: its own rusage."""
    command = _command(workload, workdir, side=side)
    # stderr to a file, not a pipe: a cycle logs every write at INFO, more than a pipe holds while we wait on it.
    with (workdir / "stderr.log").open("w+b") as log:
        start = time.perf_counter()
        proc = subprocess.Popen(command, env=_env(tree), stdout=subprocess.DEVNULL, stderr=log, cwd=workdir)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
        log.seek(0)
        stderr = log.read().decode(errors="replace")
    code = proc.returncode
    if code != 0:
        raise RuntimeError(f"dreamkeeper {workload} with {tree} exited {code}: {stderr[-2000:]}")
    return {"cpuSeconds": usage.ru_utime + usage.ru_stime, "wallSeconds": wall, "peakRssMiB": usage.ru_maxrss / 1024}


def heavy_imports(tree: Path, workdir: Path, workload: str = "dream", side: str = "this") -> dict[str, float]:
    """Which of ``HEAVY`` the command loaded, with the cumulative import seconds of each (``-X importtime``)."""
    command = _command(workload, workdir, importtime=True, side=side)
    done = subprocess.run(command, env=_env(tree), capture_output=True, text=True, check=True, cwd=workdir)
    found: dict[str, float] = {}
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or line.count("|") != 2:
            continue
        _, cumulative, name = line.split("|")
        name = name.strip()
        if name in HEAVY and cumulative.strip().isdigit():
            found[name] = int(cumulative) / 1e6
    return found


def _summary(runs: list[dict[str, Any]]) -> dict[str, float]:
    return {
        key: round(statistics.median(r[key] for r in runs), 3) for key in ("cpuSeconds", "wallSeconds", "peakRssMiB")
    }


def measure(
    tree: Path, baseline: Path, repeat: int, workdir: Path, workload: str = "dream", agent: Path | None = None
) -> dict[str, Any]:
    trees = {"this": tree, "baseline": baseline}
    if workload == SETTLED:
        # Each side its own copy, as on a volume one engine tends (a cycle's decay rewrites files, and what an engine
        # keeps of its own writes holds only while no other rewrote them), then one unmeasured cycle each: the copy
        # has new inodes, so the first cycle reads every file and builds the side's corpus index and cluster cache.
        # The copies' ctimes are now: a scan within the corpus index's racy window of them would not keep what it
        # read (corpus_index.py), and the first measured cycle would read every file again.
        assert agent is not None
        for side in trees:
            shutil.copytree(agent, workdir / f"settled-{side}", symlinks=True)
        time.sleep(RACY_WAIT_SECONDS)
        for side, code in trees.items():
            run_once(code, workdir, workload, side)
    runs: dict[str, list[dict[str, Any]]] = {"this": [], "baseline": []}
    for _ in range(repeat):  # alternating: a slower minute of the machine falls on both
        for side, code in trees.items():
            if workload == SETTLED:
                time.sleep(RACY_WAIT_SECONDS)  # what the last cycle read is past the racy window, as between cycles
            runs[side].append(run_once(code, workdir, workload, side))
    return {
        side: {"median": _summary(rs), "runs": rs, "heavyImports": heavy_imports(trees[side], workdir, workload, side)}
        for side, rs in runs.items()
    }


def markdown(result: dict[str, Any]) -> str:
    rows, imports = [], []
    for workload, sides in result["workloads"].items():
        this, base = sides["this"]["median"], sides["baseline"]["median"]
        for label, key in (("CPU s", "cpuSeconds"), ("wall s", "wallSeconds"), ("peak RSS MiB", "peakRssMiB")):
            rows.append(f"| `{workload}` | {label} | {base[key]} | {this[key]} | {this[key] / base[key]:.2f}x |")

        def loaded(side: str, sides: dict[str, Any] = sides) -> str:
            found = sides[side]["heavyImports"]
            return ", ".join(f"{name} {seconds:.2f} s" for name, seconds in sorted(found.items())) or "none"

        imports.append(f"- `{workload}`: baseline: {loaded('baseline')}; this: {loaded('this')}")
    table = "\n".join(rows)
    loaded_lines = "\n".join(imports)
    return f"""# The processes of one cycle Job, whole: `seed-vocabulary` and `dreamkeeper dream` on the bundled sample

Command: `{result["command"]}`. Generated {result["generatedAt"]} on {result["machine"]}; this code at
{result["thisLabel"]}, baseline {result["baselineLabel"]}.

{__doc__.split(chr(10) * 2, 1)[1].strip()}

Medians of {result["repeat"]} runs each:

| command | | baseline | this | this / baseline |
|---|---|---|---|---|
{table}

Heavy packages loaded (cumulative import seconds, one `-X importtime` run):

{loaded_lines}
"""


def main(argv: list[str] | None = None) -> int:
    args_list = sys.argv[1:] if argv is None else argv
    parser = side_by_side_parser("cycle-start", __doc__ or "", "cycle-start", 7)
    parser.add_argument("--agent", type=Path, help="also: dream on each side's copy of this (settled) agent directory")
    args = parser.parse_args(args_list)
    workdir = args.workdir / f"dk-cycle-start-{os.getpid()}"
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        chosen = (*WORKLOADS, SETTLED) if args.agent is not None else WORKLOADS
        workloads = {w: measure(ROOT, args.baseline, max(1, args.repeat), workdir, w, args.agent) for w in chosen}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result = {**side_by_side_header("cycle-start", args_list, args, "agent copies"), "workloads": workloads}
    write_result(args.out, args.name, result, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
