"""`dreamkeeper memory stats|show|restore --format NAME`: the memory group's commands on a Markdown format's units.

``memory/cli.py`` defines them for RockBot's entry files (the memory layer knows no format); they are registered again
here, one layer up, with ``--format`` and ``--profile-json``: for ``rockbot`` (the default) each simply calls the
memory layer's command, unchanged; for a Markdown format ``stats`` and ``show`` read its unit records, and
``restore`` brings units back into the agent's files (under the cycle lock: ingest, restore, render).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import typer
from rich.markup import escape

from dreamkeeper.consolidation.units_cli import FORMAT_OPT, PROFILE_OPT, format_of, is_markdown, unit_session
from dreamkeeper.formats import MemoryFormat
from dreamkeeper.memory import MemoryStoreError, entry_summary, note_restored, validate_id
from dreamkeeper.memory.cli import (
    AGENT_DIR_ARG,
    JSON_OPT,
    MEMORY_DIR_OPT,
    UsageError,
    err,
    expected_errors,
    out,
    show_command,
    stats_command,
)

REPLACED = ("stats", "show", "restore")

# RockBot's own restore (consolidation/memory_cli.py: the reversals log, the end-of-run check), given by with_formats.
_rockbot_restore: Callable[[Path, list[str], Path | None], None] | None = None


def with_formats(memory: typer.Typer, rockbot_restore: Callable[[Path, list[str], Path | None], None]) -> None:
    """Register the format-aware ``stats``, ``show`` and ``restore`` in place of the memory layer's; ``restore``
    calls ``rockbot_restore`` for RockBot's files."""
    global _rockbot_restore
    _rockbot_restore = rockbot_restore
    memory.registered_commands = [c for c in memory.registered_commands if c.name not in REPLACED]
    memory.command("stats")(units_stats_command)
    memory.command("show")(units_show_command)
    memory.command("restore")(units_restore_command)


def _chosen(agent_dir: Path, memory_dir: Path | None, name: str | None, profile_json: str | None) -> MemoryFormat:
    chosen = format_of(name, profile_json)
    if is_markdown(chosen):
        if memory_dir is not None:
            raise UsageError("--memory-dir is RockBot's; a Markdown format's files are named by its profile")
        chosen.check(agent_dir)
    return chosen


def units_stats_command(
    agent_dir: Path = AGENT_DIR_ARG,
    memory_dir: Path | None = MEMORY_DIR_OPT,
    as_json: bool = JSON_OPT,
    memory_format: str | None = FORMAT_OPT,
    profile_json: str | None = PROFILE_OPT,
) -> None:
    """Counts: live, archived, malformed, duplicates, embeddings, high-value, due for purge, per category."""
    with expected_errors():
        chosen = _chosen(agent_dir, memory_dir, memory_format, profile_json)
    root = chosen.store_root(agent_dir) if is_markdown(chosen) else memory_dir
    stats_command(agent_dir, root, as_json)


def units_show_command(
    agent_dir: Path = AGENT_DIR_ARG,
    entry_id: str = typer.Argument(..., metavar="ID", help="Entry (or unit) id, archived ones too."),
    memory_dir: Path | None = MEMORY_DIR_OPT,
    as_json: bool = JSON_OPT,
    memory_format: str | None = FORMAT_OPT,
    profile_json: str | None = PROFILE_OPT,
) -> None:
    """Print one whole entry, exactly as stored (a unit: its text verbatim, its file and heading path)."""
    with expected_errors():
        chosen = _chosen(agent_dir, memory_dir, memory_format, profile_json)
    root = chosen.store_root(agent_dir) if is_markdown(chosen) else memory_dir
    show_command(agent_dir, entry_id, root, as_json)


def units_restore_command(
    agent_dir: Path = AGENT_DIR_ARG,
    entry_ids: list[str] = typer.Argument(..., metavar="ID...", help="Archived entries (or units) to bring back."),
    memory_dir: Path | None = MEMORY_DIR_OPT,
    memory_format: str | None = FORMAT_OPT,
    profile_json: str | None = PROFILE_OPT,
) -> None:
    """Bring archived entries back to live (under the cycle lock, so no dream cycle runs meanwhile). A Markdown
    format's units are written back into the agent's files, where they were."""
    with expected_errors():
        chosen = _chosen(agent_dir, memory_dir, memory_format, profile_json)
    if not is_markdown(chosen):
        assert _rockbot_restore is not None, "registered by with_formats"
        _rockbot_restore(agent_dir, entry_ids, memory_dir)
        return
    failed = 0
    with expected_errors():
        for entry_id in entry_ids:
            validate_id(entry_id)
        with unit_session(agent_dir, chosen, "restore") as session:
            restored = []
            for entry_id in entry_ids:
                try:
                    stored = session.store.require(entry_id)
                    if not stored.entry.is_archived:
                        out.print(f"{entry_id}: not archived; left as it is", soft_wrap=True)
                        continue
                    session.store.restore(stored)
                    restored.append(stored)
                except MemoryStoreError as exc:
                    err.print(f"[red]error:[/red] {escape(str(exc))}")
                    failed += 1
            note_restored(agent_dir, [s.id for s in restored])
    written = set(session.finished.render.placed) if session.finished and session.finished.render else set()
    for stored in restored:
        where = "written back into the agent's files" if stored.id in written else "live (its file was left as is)"
        out.print(
            f"restored {escape(entry_summary(stored.entry))}, {where}: {escape(stored.entry.content)}", soft_wrap=True
        )
    for note in session.notes:
        err.print(f"[yellow]note:[/yellow] {escape(note)}")
    if failed:
        err.print(f"{failed} of {len(entry_ids)} not restored")
        raise typer.Exit(1)


__all__ = ["with_formats"]
