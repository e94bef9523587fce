"""A bench result as committed: ``NAME.json`` (the raw numbers) and ``NAME.md`` (the reading, with its command)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def write_result(out: Path, name: str, result: dict[str, Any], markdown: Callable[[dict[str, Any]], str]) -> Path:
    """Both files under ``out``; returns the Markdown's path (printed, so the run says where its reading is)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    md_path = out / f"{name}.md"
    md_path.write_text(markdown(result), encoding="utf-8")
    print(f"wrote {out / (name + '.json')}\nwrote {md_path}")
    return md_path


def child_env(pythonpath: str | None = None) -> dict[str, str]:
    """The environment of a measured child process: this one's, ``PYTHONPATH`` set when given, and one BLAS thread,
    as every ``dreamkeeper`` process has it (``cli._one_blas_thread``) unless one of ``BLAS_THREAD_VARIABLES`` is set.
    Without it the worker numpy's OpenBLAS starts as it is imported spun ~0.1 s of CPU into whatever a child measured
    right after its imports (a full read+parse of 10,000 entries: 0.55 -> 0.47 CPU s, session 25), on either side."""
    # Here, not at the top: a child imports this module with the baseline tree's dreamkeeper, which may lack it.
    from dreamkeeper.cli import BLAS_THREAD_VARIABLES

    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    if not any(env.get(name) for name in BLAS_THREAD_VARIABLES):
        env["OPENBLAS_NUM_THREADS"] = "1"
    return env


def side_by_side_parser(prog: str, doc: str, name: str, repeat: int) -> argparse.ArgumentParser:
    """The options every side-by-side bench (this tree against ``--baseline``) takes; the caller adds its own."""
    parser = argparse.ArgumentParser(prog=f"python -m bench {prog}", description=doc.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, help="a tree holding operator/dreamkeeper")
    parser.add_argument("--baseline-label", default=None)
    parser.add_argument("--repeat", type=int, default=repeat)
    parser.add_argument("--workdir", type=Path, default=Path("/dev/shm"))
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    parser.add_argument("--name", default=name)
    return parser


def side_by_side_header(prog: str, argv: list[str], args: argparse.Namespace, where: str) -> dict[str, Any]:
    """What a side-by-side result says first: its command, when, where (``where``: what lives in --workdir), which
    trees, how many runs."""
    return {
        "command": f"python -m bench {prog} " + " ".join(argv),
        "generatedAt": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, {where} on {args.workdir}",
        "baselineLabel": args.baseline_label or str(args.baseline),
        "thisLabel": head_label(),
        "repeat": max(1, args.repeat),
    }


def head_label() -> str:
    """``this checkout@<short sha>`` of the tree the bench runs from (or just ``this checkout``)."""
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False, cwd=Path(__file__).parent
    )
    return f"this checkout@{done.stdout.strip()}" if done.returncode == 0 else "this checkout"
