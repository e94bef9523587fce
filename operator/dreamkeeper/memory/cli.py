"""`dreamkeeper memory ...` commands."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    memory = typer.Typer(help="Inspect and maintain an agent's memory store.", no_args_is_help=True)
    app.add_typer(memory, name="memory")
