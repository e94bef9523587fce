"""The physical floor of a cold and a steady cycle (issue 27): the files a cycle writes, written bare, against the
cycle itself and a full read, side by side in one run.

    python -m bench floor [--sizes 10000] [--repeat 3] [--workdir DIR] [--name floor-10k] [--out DIR]

Per size, one synthetic corpus (bench/sim/world.py) is written once and kept pristine; every measurement runs in a
fresh interpreter on a copy of it, and the least CPU (user + system) of ``--repeat`` runs counts:

* **read**: ``MemoryStore.scan()`` of the copy (what issue 27's ratios are over);
* **cold cycle**: one cycle, offline proposer, ``archive_cap`` 1.0 (the plan applied, as ``bench scale --apply``);
* **what it wrote**: the tree after that cycle against the pristine one, file by file (path -> bytes): entry files
  created, changed and removed under ``memory/`` (hidden names aside), and, counted apart, the cycle's own state
  (the journal, the corpus index, the report, the cluster cache, the pass ledger: every other file that changed);
* **cold floor**: on a fresh copy of the pristine corpus, exactly those entry files written with the bytes the cycle
  gave them and the removed ones unlinked, timed around the writes alone, three ways: (a) ``project``: the project's
  own durable primitive bare (``memory/atomic.replace_file`` unchecked: temp file, fsync, rename; no parse, no
  guard, no re-read), one directory fsync per directory at the end, as the cycle batches them; (b) ``posix``: the
  least a durable write needs (open O_EXCL, write, fsync, close, rename), one directory fsync per directory at the
  end; (c) ``nofsync``: (b) without any fsync (what the fsyncs cost, by difference). A test
  (tests/bench/test_floor.py) checks that each writer leaves the tree byte-identical to the cycle's;
* **steady**: cycles on the cold-cycled copy until settled (as ``bench scale-steady``: the model asked nothing,
  nothing written but decay's rewrites), then ``--repeat`` steady cycles (the least CPU counts); the last one's
  writes, diffed as above, written bare (a), (b), (c) on a copy of the tree as it was before it; and the **stat
  walk** alone (``os.scandir`` of every directory, one ``lstat`` per entry file): the least a steady cycle that must
  notice any change can do.

The floors are lower bounds of the writes alone: a cycle must also read what it decides about, journal before it
writes (the undo record) and guard each write against the agent's own (docs/architecture.md); none of that is in
them. ``--workdir`` (default /dev/shm, where an fsync is nearly free in CPU and time) can name a disk-backed
directory (e.g. /var/tmp) to see what fsyncs cost there.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.results_io import child_env, write_result

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parent.parent
MODES = ("project", "posix", "nofsync")
GOAL_COLD, GOAL_STEADY = 3.0, 0.5  # issue 27: cold cycle <= 3x a read, steady <= 0.5x


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# ---- the tree a cycle leaves ---------------------------------------------------------------------------------


def files_of(root: Path) -> dict[str, bytes]:
    """Every regular file under ``root``, by its '/'-separated path relative to ``root``, with its bytes."""
    out: dict[str, bytes] = {}
    for directory, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names):
            path = Path(directory, name)
            if path.is_file() and not path.is_symlink():
                out[path.relative_to(root).as_posix()] = path.read_bytes()
    return out


def _is_entry_file(relative: str) -> bool:
    """An entry file of the agent's memory: under ``memory/``, no hidden part (temps, .embeddings), a .json."""
    parts = relative.split("/")
    return parts[0] == "memory" and relative.endswith(".json") and not any(p.startswith(".") for p in parts)


@dataclass
class TreeDiff:
    """What a cycle did to the entry files (``writes``: path -> bytes; ``removed``), and to everything else."""

    writes: dict[str, bytes] = field(default_factory=dict)
    created: int = 0
    changed: int = 0
    removed: list[str] = field(default_factory=list)
    state_files: int = 0
    state_bytes: int = 0

    def summary(self) -> dict[str, Any]:
        return {
            "entryFilesCreated": self.created,
            "entryFilesChanged": self.changed,
            "entryFilesRemoved": len(self.removed),
            "entryBytesWritten": sum(len(b) for b in self.writes.values()),
            "stateFilesWritten": self.state_files,
            "stateBytesWritten": self.state_bytes,
        }


def tree_diff(before: dict[str, bytes], after: dict[str, bytes]) -> TreeDiff:
    diff = TreeDiff()
    for relative, data in after.items():
        old = before.get(relative)
        if old == data:
            continue
        if _is_entry_file(relative):
            diff.writes[relative] = data
            if old is None:
                diff.created += 1
            else:
                diff.changed += 1
        else:
            diff.state_files += 1
            diff.state_bytes += len(data)
    diff.removed = sorted(r for r in before if r not in after and _is_entry_file(r))
    return diff


# ---- the floor writers (each in a fresh interpreter: ``--child-write``) ---------------------------------------


def write_floor(root: Path, diff: TreeDiff, mode: str) -> dict[str, Any]:
    """Make ``diff``'s changes to the entry files under ``root`` the ``mode`` way; CPU of the writes alone."""
    from dreamkeeper.memory.atomic import UNCHECKED, fsync_directory, replace_file

    items = [(root / relative, data) for relative, data in diff.writes.items()]
    gone = [root / relative for relative in diff.removed]
    directories = {path.parent for path, _ in items} | {path.parent for path in gone}
    sync = mode != "nofsync"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    cpu, started = _cpu(), time.perf_counter()
    for path, data in items:
        if not path.parent.is_dir():
            path.parent.mkdir(parents=True)
        if mode == "project":
            replace_file(path, data, UNCHECKED, sync_directory=False)
            continue
        temp = path.with_name(f".{path.name}.floor")
        fd = os.open(temp, flags, 0o644)
        try:
            view = memoryview(data)
            while view:  # a write may be short
                view = view[os.write(fd, view) :]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(temp, path)
    for path in gone:
        os.unlink(path)
    if sync:
        for directory in directories:
            fsync_directory(directory)
    return {
        "cpuSeconds": _cpu() - cpu,
        "seconds": time.perf_counter() - started,
        "files": len(items) + len(gone),
        "directoriesSynced": len(directories) if sync else 0,
    }


def stat_walk(root: Path) -> dict[str, Any]:
    """The stat walk alone: every directory listed, one lstat per entry file (the corpus index's check)."""
    cpu, count, stack = _cpu(), 0, [str(root)]
    while stack:
        directory = stack.pop()
        with os.scandir(directory) as listing:
            for child in listing:
                if child.name.startswith("."):
                    continue
                if child.is_dir(follow_symlinks=False):
                    stack.append(child.path)
                elif child.name.endswith(".json"):
                    child.stat(follow_symlinks=False)
                    count += 1
    return {"cpuSeconds": _cpu() - cpu, "files": count}


def _copy(source: Path, target: Path) -> None:
    """``target`` a fresh copy of ``source`` (files and mtimes), written back before anything is measured on it: on
    a disk, the copy's dirty pages would otherwise be flushed by (and charged to) the next measurement's fsyncs."""
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target, symlinks=True)
    os.sync()


def _child(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "bench.floor", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        env=child_env(),
    )
    if done.returncode != 0:
        raise RuntimeError(f"bench.floor {' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _floors(source: Path, diff: TreeDiff, workdir: Path, repeat: int) -> dict[str, dict[str, Any]]:
    """Each writer ``repeat`` times, each on a fresh copy of ``source`` (least CPU kept)."""
    plan = workdir / "plan.pickle"
    plan.write_bytes(pickle.dumps({"writes": diff.writes, "removed": diff.removed}))
    best: dict[str, dict[str, Any]] = {}
    for _ in range(repeat):
        for mode in MODES:  # interleaved: a burst of load on the machine hits every writer alike
            target = workdir / f"floor-{mode}"
            _copy(source, target)
            run = _child("--child-write", mode, str(plan), str(target))
            shutil.rmtree(target, ignore_errors=True)
            if mode not in best or run["cpuSeconds"] < best[mode]["cpuSeconds"]:
                best[mode] = run
    plan.unlink()
    return best


# ---- one size ------------------------------------------------------------------------------------------------


def measure(size: int, seed: int, workdir: Path, repeat: int) -> dict[str, Any]:
    from bench.scale_steady import RACY_WAIT_SECONDS, SETTLE_MAX, _run
    from bench.sim.world import write_synthetic_corpus

    pristine = workdir / f"pristine-{size}"
    write_synthetic_corpus(pristine / "memory", size, seed)
    os.sync()
    before = files_of(pristine)
    reads, colds = [], []
    agent = workdir / f"agent-{size}"
    for _ in range(repeat):
        _copy(pristine, agent)
        reads.append(_run("load", agent, True))
        colds.append(_run("cycle", agent, True))  # the last copy is kept: its tree is diffed, then settled
        print(
            f"[floor] {size}: read {reads[-1]['cpuSeconds']:.2f}, cold {colds[-1]['cpuSeconds']:.2f}", file=sys.stderr
        )
    read = min(r["cpuSeconds"] for r in reads)
    cold = min(colds, key=lambda r: float(r["cpuSeconds"]))
    cold_diff = tree_diff(before, files_of(agent))
    cold_floor = _floors(pristine, cold_diff, workdir, repeat)
    settling = []
    for _ in range(SETTLE_MAX):
        time.sleep(RACY_WAIT_SECONDS)
        settled = _run("cycle", agent, True, settle=True)
        settling.append(settled["cpuSeconds"])
        if not settled["reviewed"] and settled["wrote"] == settled.get("decayed", 0):
            break
    steadies, steady_diff, steady_before = [], TreeDiff(), workdir / f"steady-before-{size}"
    for _ in range(repeat):
        time.sleep(RACY_WAIT_SECONDS)
        _copy(agent, steady_before)  # the copy only: the agent's own index stays warm
        ahead = files_of(agent)
        steadies.append(_run("cycle", agent, True))
        steady_diff = tree_diff(ahead, files_of(agent))
    steady = min(steadies, key=lambda r: float(r["cpuSeconds"]))
    steady_floor = _floors(steady_before, steady_diff, workdir, repeat)
    walks = [_child("--child-walk", str(agent / "memory")) for _ in range(repeat)]
    walk = min(walks, key=lambda r: float(r["cpuSeconds"]))
    for path in (agent, steady_before, pristine):
        shutil.rmtree(path, ignore_errors=True)

    def over(seconds: float) -> float:
        return round(seconds / read, 3)

    row: dict[str, Any] = {
        "size": size,
        "readCpuSeconds": round(read, 3),
        "cold": {
            "cycleCpuSeconds": round(cold["cpuSeconds"], 3),
            "cycleOverRead": over(cold["cpuSeconds"]),
            "stagesCpu": cold["stagesCpu"],
            "allCycleCpu": [round(r["cpuSeconds"], 3) for r in colds],
            **cold_diff.summary(),
            "floor": {m: {**_rounded(r), "overRead": over(r["cpuSeconds"])} for m, r in cold_floor.items()},
        },
        "steady": {
            "cycleCpuSeconds": round(steady["cpuSeconds"], 3),
            "cycleOverRead": over(steady["cpuSeconds"]),
            "stagesCpu": steady["stagesCpu"],
            "allCycleCpu": [round(r["cpuSeconds"], 3) for r in steadies],
            "settlingCpu": [round(s, 3) for s in settling],
            **steady_diff.summary(),
            "statWalk": {**_rounded(walk), "overRead": over(walk["cpuSeconds"])},
            "floor": {m: {**_rounded(r), "overRead": over(r["cpuSeconds"])} for m, r in steady_floor.items()},
        },
    }
    walk_and_write = walk["cpuSeconds"] + steady_floor["posix"]["cpuSeconds"]
    row["steady"]["floorStatWalkPlusPosix"] = {"cpuSeconds": round(walk_and_write, 3), "overRead": over(walk_and_write)}
    print(f"[floor] {size}: {json.dumps(row)}", file=sys.stderr, flush=True)
    return row


def _rounded(run: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in run.items()}


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "# The floor of a cycle: its writes, written bare",
        "",
        f"Command: `{result['command']}` at {result['commit']}. Generated {result['generatedAt']}; "
        f"{result['machine']}. CPU seconds (user + system), each in a fresh interpreter, the least of "
        f"{result['repeat']} runs; ratios over the read (``MemoryStore.scan()`` of the same files).",
        "",
        "| entries | read | cycle | / read | files written (created, changed, removed) | state files | "
        "floor project (/ read) | floor posix (/ read) | floor no fsync (/ read) | stat walk (/ read) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in result["sizes"]:
        for phase in ("cold", "steady"):
            p = row[phase]
            f = p["floor"]
            walk = p.get("statWalk")
            made, changed, removed = p["entryFilesCreated"], p["entryFilesChanged"], p["entryFilesRemoved"]
            lines.append(
                f"| {row['size']} {phase} | {row['readCpuSeconds']} | {p['cycleCpuSeconds']} | {p['cycleOverRead']} | "
                f"{made + changed + removed} ({made}, {changed}, {removed}) | {p['stateFilesWritten']} | "
                f"{f['project']['cpuSeconds']} ({f['project']['overRead']}) | "
                f"{f['posix']['cpuSeconds']} ({f['posix']['overRead']}) | "
                f"{f['nofsync']['cpuSeconds']} ({f['nofsync']['overRead']}) | "
                + (f"{walk['cpuSeconds']} ({walk['overRead']}) |" if walk else "- |")
            )
    lines += ["", result.get("conclusion", ""), ""]
    return "\n".join(lines)


def _commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", "operator", "bench"], capture_output=True, text=True, cwd=ROOT
    )
    return (done.stdout.strip() or "unknown") + ("+dirty" if dirty.stdout.strip() else "")


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench floor", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None, help="where corpora are written (default /dev/shm)")
    parser.add_argument("--name", default="floor")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--child-write", nargs=3, metavar=("MODE", "PLAN", "ROOT"), help=argparse.SUPPRESS)
    parser.add_argument("--child-walk", metavar="ROOT", help=argparse.SUPPRESS)
    args = parser.parse_args(list(argv))
    if args.child_write:
        mode, plan, root = args.child_write
        given = pickle.loads(Path(plan).read_bytes())  # our own file, written by the parent just now
        print(json.dumps(write_floor(Path(root), TreeDiff(writes=given["writes"], removed=given["removed"]), mode)))
        return 0
    if args.child_walk:
        print(json.dumps(stat_walk(Path(args.child_walk))))
        return 0
    base = args.workdir or (Path("/dev/shm") if os.access("/dev/shm", os.W_OK) else None)
    workdir = Path(tempfile.mkdtemp(prefix="dk-floor-", dir=base))
    command = ("python -m bench floor " + shlex.join(argv)).strip()
    try:
        sizes = [measure(int(size), args.seed, workdir, args.repeat) for size in args.sizes.split(",")]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result: dict[str, Any] = {
        "command": command,
        "commit": _commit(),
        "generatedAt": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, corpus on {base or tempfile.gettempdir()}",
        "repeat": args.repeat,
        "sizes": sizes,
    }
    write_result(args.out, args.name, result, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
