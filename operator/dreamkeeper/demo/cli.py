"""`dreamkeeper sample`: a sample agent directory (the bundled default, or one generated for a seed and size)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from dreamkeeper.demo.sample import DEFAULT_SEED, DEFAULT_SIZE, SampleExistsError, copy_bundled, generate_sample
from dreamkeeper.memory import MemoryStore, compute_stats, memory_root
from dreamkeeper.memory.cli import JSON_OPT, Failure, emit_json, expected_errors, out


def register(app: typer.Typer) -> None:
    app.command("sample")(sample_command)


def sample_command(
    dest_dir: Path = typer.Argument(..., help="New or empty directory to create the sample agent in."),
    seed: int = typer.Option(DEFAULT_SEED, "--seed", help="Generator seed (the bundled sample is seed 7)."),
    size: int = typer.Option(DEFAULT_SIZE, "--size", min=20, help="Number of entry files (plus one malformed)."),
    as_json: bool = JSON_OPT,
) -> None:
    """Create a sample agent directory in RockBot's format (the bundled one, or a generated one)."""
    with expected_errors():
        try:
            if seed == DEFAULT_SEED and size == DEFAULT_SIZE:
                copy_bundled(dest_dir)
            else:
                generate_sample(dest_dir, seed, size)
        except SampleExistsError as exc:
            raise Failure(str(exc)) from None
        stats = compute_stats(MemoryStore(memory_root(dest_dir)))
    if as_json:
        emit_json(stats.model_dump(mode="json", by_alias=True))
        return
    out.print(
        f"sample agent in {escape(str(dest_dir))}: {stats.entries} entries ({stats.live} live, {stats.archived} "
        f"archived), {len(stats.malformed)} malformed file, {stats.embeddings} embeddings",
        soft_wrap=True,
    )
