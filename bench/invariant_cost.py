"""What the end-of-run invariant costs a cycle (issue 22: it runs every cycle, so it must be cheap).

    python -m bench invariant-cost [--sizes 10000,50000] [--seed 7] [--out DIR]

Per size, one synthetic corpus (bench/sim/world.py) copied twice; on each copy a cold cycle (offline proposer:
many merges and folds, applied with the blast-radius cap lifted, so the invariant has departures to judge) and then
a second, steady cycle, each in a fresh interpreter, side by side: one with the invariant, one with it switched off
(``Writes._check_end`` patched to do nothing). Reported: the "report" stage (the final scan, and the invariant) and
the whole cycle, wall and CPU, and their ratios with / without.
"""

from __future__ import annotations

import argparse
import json
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


def _child(agent: Path, invariant: bool) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.invariant_cost", "--child", "on" if invariant else "off", str(agent)]
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=Path(__file__).parent.parent)
    if done.returncode != 0:
        raise RuntimeError(f"cycle on {agent} failed ({done.returncode}): {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _run_child(mode: str, agent: Path) -> None:
    from bench.scale import child_cycle
    from dreamkeeper.consolidation import cycle as cycle_module
    from dreamkeeper.consolidation.invariant import EndCheck

    if mode == "off":
        # The real signature (writes.py ``Writes._check_end``): the report stage passes ``departed=`` by keyword.
        def no_check(
            self: object, final: object, vocabulary: object, index: object, departed: object = None
        ) -> EndCheck:
            return EndCheck()

        cycle_module.Writes._check_end = no_check  # type: ignore[method-assign,assignment]
    # Applied (archive_cap 1.0): held by the 10% blast-radius cap, the cold plan would leave no departures to judge.
    print(json.dumps(child_cycle(agent, apply=True)))


def measure(size: int, seed: int, workdir: Path) -> dict[str, Any]:
    from bench.sim.world import write_synthetic_corpus

    base = workdir / f"corpus-{size}"
    write_synthetic_corpus(base / "memory", size, seed)
    arms: dict[str, dict[str, Any]] = {}
    for name, invariant in (("with", True), ("without", False)):
        agent = workdir / f"agent-{size}-{name}"
        shutil.copytree(base, agent)
        cold = _child(agent, invariant)
        steady = _child(agent, invariant)
        arms[name] = {"cold": cold, "steady": steady}
        print(
            f"[invariant-cost] {size} {name}: cold {cold['seconds']:.2f}s (report {cold['stages'].get('report')}), "
            f"steady {steady['seconds']:.2f}s (report {steady['stages'].get('report')})",
            file=sys.stderr,
            flush=True,
        )
        shutil.rmtree(agent)
    shutil.rmtree(base)
    out: dict[str, Any] = {"size": size, **arms}
    for phase in ("cold", "steady"):
        on, off = arms["with"][phase], arms["without"][phase]
        out[f"{phase}Ratios"] = {
            "cycleWall": round(on["seconds"] / off["seconds"], 3),
            "cycleCpu": round(on["cpuSeconds"] / off["cpuSeconds"], 3),
            "reportStageWall": round(on["stages"]["report"] / max(off["stages"]["report"], 1e-9), 3),
            "reportStageExtraSeconds": round(on["stages"]["report"] - off["stages"]["report"], 3),
        }
    return out


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "# The end-of-run invariant's cost",
        "",
        f"Command: `{result['command']}`. Generated {result['generatedAt']}. Each cycle in a fresh interpreter, on "
        "copies of one synthetic corpus (offline proposer), the two arms side by side; wall seconds with CPU "
        "seconds in parentheses (the machine is shared: wall includes waiting for a core). The report stage is the "
        "final scan plus the invariant.",
        "",
        "| entries | phase | cycle with (CPU) | cycle without (CPU) | cycle ratio wall / CPU | report stage with | "
        "report stage without | report stage extra s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in result["sizes"]:
        for phase in ("cold", "steady"):
            on, off, ratio = row["with"][phase], row["without"][phase], row[f"{phase}Ratios"]
            lines.append(
                f"| {row['size']} | {phase} | {on['seconds']:.2f} ({on['cpuSeconds']:.2f}) | {off['seconds']:.2f} "
                f"({off['cpuSeconds']:.2f}) | {ratio['cycleWall']} / {ratio['cycleCpu']} | {on['stages']['report']} | "
                f"{off['stages']['report']} | {ratio['reportStageExtraSeconds']} |"
            )
    lines += [
        "",
        "Cold: the offline proposer merges and folds thousands of entries, so the invariant judges every departure "
        "(a fold copy's text is its survivor's; a merge source is asked of its successor's inventory first, one per "
        "successor). Steady: nothing departs, and the invariant costs one pass over the before and after maps. The "
        "invariant runs only in the report stage, so its cost is that stage's difference; the whole-cycle ratios "
        "carry the noise of a shared machine (the two arms run one after the other, minutes apart).",
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench invariant-cost", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,50000")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--child", nargs=2, metavar=("MODE", "AGENT"), help=argparse.SUPPRESS)
    args = parser.parse_args(list(argv))
    if args.child:
        _run_child(args.child[0], Path(args.child[1]))
        return 0
    workdir = Path(tempfile.mkdtemp(prefix="dk-invariant-cost-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    started = time.perf_counter()
    try:
        sizes = [measure(int(size), args.seed, workdir) for size in args.sizes.split(",")]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result = {
        "command": ("python -m bench invariant-cost " + shlex.join(argv)).strip(),
        "generatedAt": datetime.now(UTC).isoformat(timespec="seconds"),
        "seconds": round(time.perf_counter() - started, 1),
        "sizes": sizes,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "invariant-cost.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    (args.out / "invariant-cost.md").write_text(markdown(result), encoding="utf-8")
    print(f"wrote {args.out / 'invariant-cost.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
