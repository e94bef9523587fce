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


def main() -> None:
    alone = _ALONE.get(sys.argv[1]) if len(sys.argv) > 1 else None
    if alone is None:
        _register()
    else:
        __import__(alone, fromlist=["register"]).register(app)
    app()
