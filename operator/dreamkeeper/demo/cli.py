"""`dreamkeeper sample`: a sample agent directory (the bundled default, or one generated for a seed and size)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from dreamkeeper.demo.markdown_sample import MarkdownSampleExistsError, generate_markdown_sample
from dreamkeeper.demo.sample import DEFAULT_SEED, DEFAULT_SIZE, SampleExistsError, copy_bundled, generate_sample
from dreamkeeper.formats import FORMAT_NAMES, ROCKBOT
from dreamkeeper.memory import MemoryStore, compute_stats, memory_root
from dreamkeeper.memory.cli import JSON_OPT, Failure, emit_json, expected_errors, out

SAMPLE_FORMATS = " | ".join(name for name in FORMAT_NAMES if name != "claude")


def register(app: typer.Typer) -> None:
    app.command("sample")(sample_command)


def sample_command(
    dest_dir: Path = typer.Argument(..., help="New or empty directory to create the sample agent in."),
    seed: int = typer.Option(DEFAULT_SEED, "--seed", help="Generator seed (the bundled sample is seed 7)."),
    size: int = typer.Option(DEFAULT_SIZE, "--size", min=20, help="Number of entry files (plus one malformed)."),
    as_json: bool = JSON_OPT,
    memory_format: str = typer.Option(
        ROCKBOT,
        "--format",
        help=f"{SAMPLE_FORMATS}: RockBot's entry files, an OpenClaw state "
        "directory (DIR/workspace: MEMORY.md, USER.md, months of daily notes) or a Hermes home (DIR/memories).",
    ),
) -> None:
    """Create a sample agent directory: RockBot's format (the bundled one, or a generated one), or an OpenClaw or
    Hermes Markdown memory directory (seed-shaped: people, dates, accounts, near-duplicates)."""
    if memory_format != ROCKBOT:
        _markdown_sample(dest_dir, memory_format, seed, as_json)
        return
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


def _markdown_sample(dest_dir: Path, memory_format: str, seed: int, as_json: bool) -> None:
    with expected_errors():
        try:
            sample = generate_markdown_sample(memory_format, dest_dir, seed)
        except MarkdownSampleExistsError as exc:
            raise Failure(str(exc)) from None
    if as_json:
        emit_json(
            {
                "agentDir": str(sample.agent_dir),
                "format": sample.format,
                "files": sample.files,
                "units": sample.units,
                "nearDuplicates": sample.near_duplicates,
            }
        )
        return
    out.print(
        f"sample {escape(sample.format)} agent in {escape(str(dest_dir))}: {len(sample.files)} files, {sample.units} "
        f"units ({sample.near_duplicates} facts written more than once)",
        soft_wrap=True,
    )
