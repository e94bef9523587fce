"""`dreamkeeper undo` and `dreamkeeper recover` (the `dream` command lives with the proposers it chooses)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console

from dreamkeeper.consolidation.cycle import recover
from dreamkeeper.consolidation.undo import undo_cycle
from dreamkeeper.memory import CycleLock, LockHeldError, memory_root

err = Console(stderr=True)


def register(app: typer.Typer) -> None:
    @app.command("undo")
    def undo_command(
        agent_dir: Path = typer.Argument(..., help="The agent's data directory."),
        cycle_id: str = typer.Argument(..., help="The cycle to reverse (see .dreamkeeper/cycles/)."),
        memory_dir: Path | None = typer.Option(None, help="Memory directory (default AGENT_DIR/memory)."),
        as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    ) -> None:
        """Reverse a whole cycle: restore its archived entries, archive its successors, revert its folds."""
        try:
            with CycleLock(agent_dir, f"undo {cycle_id}"):
                result = undo_cycle(agent_dir, memory_root(agent_dir, memory_dir), cycle_id)
        except (LockHeldError, FileNotFoundError) as exc:
            err.print(f"[red]error:[/red] {exc}")
            raise typer.Exit(1) from None
        if as_json:
            typer.echo(json.dumps(result.__dict__, indent=2))
        else:
            typer.echo(
                f"undid {cycle_id}: {len(result.restored)} restored, {len(result.archived)} successor(s) archived, "
                f"{len(result.reverted)} rewrite(s) reverted (folds, decays), {len(result.conflicts)} conflict(s)"
            )
        if result.conflicts:
            raise typer.Exit(1)

    @app.command("recover")
    def recover_command(
        agent_dir: Path = typer.Argument(..., help="The agent's data directory."),
        memory_dir: Path | None = typer.Option(None, help="Memory directory (default AGENT_DIR/memory)."),
    ) -> None:
        """Finish any cycle a crash interrupted, from its write-ahead journal (idempotent)."""
        try:
            with CycleLock(agent_dir, "recover"):
                done = recover(agent_dir, memory_root(agent_dir, memory_dir))
        except LockHeldError as exc:
            err.print(f"[red]error:[/red] {exc}")
            raise typer.Exit(1) from None
        if not done:
            typer.echo("nothing to recover")
        for cycle_id, tally in done:
            typer.echo(
                f"recovered {cycle_id}: {tally.created} created, {tally.archived} archived, {tally.conflicts} conflicts"
            )
