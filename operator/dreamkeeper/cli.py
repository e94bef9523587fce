"""The `dreamkeeper` command line: one root app composed of each concern's sub-commands.

Each package owns its commands (``memory/cli.py``, ``coverage/cli.py``, ...); this module only wires them,
so the one-way import flow memory <- coverage <- consolidation <- proposers <- kube, cli is kept. ``dream``
joins a cycle to a proposer, so it lives at this layer (``dream_command.py``), not inside either package.
``demo/cli.py``, the sample agent, is a leaf above memory and coverage that nothing else imports.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from typing import Final

import typer

from dreamkeeper import __version__

app = typer.Typer(
    name="dreamkeeper",
    help="Dream consolidation of AI agents' long-term memory that never loses a memory.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"dreamkeeper {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log at DEBUG."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Log warnings and errors only."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True),
) -> None:
    level = logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO
    level_name = os.environ.get("DREAMKEEPER_LOG_LEVEL")
    if level_name:
        level = logging.getLevelName(level_name.upper())
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


@functools.cache  # once per process: a second `memory` group would hide the commands registered into the first
def _register() -> None:
    # Imported lazily so `dreamkeeper --help` stays fast and a broken optional piece names itself.
    from dreamkeeper.memory.cli import register as register_memory

    register_memory(app)
    for module_name in (
        "dreamkeeper.demo.cli",
        "dreamkeeper.coverage.cli",
        "dreamkeeper.consolidation.cli",
        "dreamkeeper.consolidation.memory_cli",
        "dreamkeeper.dream_command",
        "dreamkeeper.kube.cli",
    ):
        try:
            module = __import__(module_name, fromlist=["register"])
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue
        module.register(app)


# The commands every cycle Job runs (kube/jobspec.py: the init container's ``seed-vocabulary``, then ``dream``), each
# with the one module that registers it: such a process loads that module alone, not every other command's (for
# ``dream``, the demo's sample world among them, ~5% of its CPU on the bundled sample; for ``seed-vocabulary``, the
# whole engine: 0.74 s and 61 MB of imports for a command that copies one file). Anything else (``--help``, a root
# option before the command, another command) registers every command.
_ALONE: Final = {"dream": "dreamkeeper.dream_command", "seed-vocabulary": "dreamkeeper.kube.cli"}


# numpy's wheels bundle OpenBLAS, which starts a worker thread for each CPU the process may run on as numpy is imported,
# and each worker busy-waits before it sleeps (measured here, from /proc: the worker on the second core of a 2-CPU
# machine spent 0.10 s of CPU right after ``import numpy``; a steady cycle's whole process at 10,000 entries took 1.27
# CPU s with it and 1.07 without, medians of 5; bench/results/cycle-start-s25.md). A pod sees every CPU of its node (a
# CPU limit is a quota, not fewer CPUs), so on a 64-CPU node a cycle Job would burn ~6 s a process for nothing. The
# engine's BLAS work is small (cosine blocks of the groups under ``BRUTE_FORCE_BELOW``; larger ones go by SimHash) and
# its cost is the CPU seconds of a Job that requests 50m: one thread, unless whoever runs the process chose a number
# (these are the variables OpenBLAS reads).
BLAS_THREAD_VARIABLES: Final = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def _one_blas_thread() -> None:
    """``OPENBLAS_NUM_THREADS=1`` unless one of ``BLAS_THREAD_VARIABLES`` is set; before numpy is loaded (after, the
    pool exists already: nothing is changed)."""
    if "numpy" not in sys.modules and not any(os.environ.get(name) for name in BLAS_THREAD_VARIABLES):
        os.environ["OPENBLAS_NUM_THREADS"] = "1"


def main() -> None:
    _one_blas_thread()
    alone = _ALONE.get(sys.argv[1]) if len(sys.argv) > 1 else None
    if alone is None:
        _register()
    else:
        __import__(alone, fromlist=["register"]).register(app)
    app()
