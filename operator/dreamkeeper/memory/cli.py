"""`dreamkeeper memory stats|show` (`list`, `restore` and `purge`: consolidation/memory_cli.py).

Exit codes: 0 ok, 1 the operation failed (lock held, conflict, entry missing), 2 bad usage (bad id, missing
directory). Expected failures print one clear line on stderr, never a traceback. ``--json`` output goes to stdout
alone (logs go to stderr), so it can be piped.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from dreamkeeper.memory.atomic import ENTRY_FILE_LIMIT
from dreamkeeper.memory.entry import Entry
from dreamkeeper.memory.errors import InvalidIdError, MemoryStoreError
from dreamkeeper.memory.files import loads_json, read_regular
from dreamkeeper.memory.paths import memory_root, validate_id
from dreamkeeper.memory.stats import compute_stats
from dreamkeeper.memory.store import MemoryStore, StoredEntry

out = Console(highlight=False)
err = Console(stderr=True, highlight=False, soft_wrap=True)

MEMORY_GROUP = "memory"
AGENT_DIR_ARG = typer.Argument(..., help="The agent's data directory (memory at AGENT_DIR/memory).")
MEMORY_DIR_OPT = typer.Option(None, "--memory-dir", help="Memory directory, if not AGENT_DIR/memory.")
JSON_OPT = typer.Option(False, "--json", help="Print JSON on stdout instead of a table.")


class Scope(StrEnum):
    live = "live"
    archived = "archived"
    all = "all"


class UsageError(Exception):
    """Bad arguments: exit 2."""


class Failure(Exception):
    """The operation could not be done: exit 1."""


@contextmanager
def expected_errors() -> Iterator[None]:
    """Expected errors become one stderr line and an exit code; anything else is a real bug and keeps its trace."""
    try:
        yield
    except (UsageError, InvalidIdError, ValueError) as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None
    except (Failure, MemoryStoreError, OSError) as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(1) from None


def open_store(agent_dir: Path, memory_dir: Path | None) -> MemoryStore:
    """The store of an agent directory; refuses a missing directory instead of showing an empty store."""
    if not agent_dir.is_dir():
        raise UsageError(f"agent directory {agent_dir} does not exist or is not a directory")
    root = memory_root(agent_dir, memory_dir)
    if not root.is_dir():
        raise Failure(f"no memory directory at {root}; pass --memory-dir if the agent keeps it elsewhere")
    return MemoryStore(root)


def emit_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def _listing(stored: StoredEntry) -> dict[str, Any]:
    entry = stored.entry
    return {
        "id": entry.id,
        "category": entry.category,
        "importanceScore": entry.importance_score,
        "reinforcementCount": entry.reinforcement_count,
        "createdAt": entry.created_at.isoformat(),
        "updatedAt": entry.updated_at.isoformat() if entry.updated_at else None,
        "archivedAt": entry.archived_at.isoformat() if entry.archived_at else None,
        "archiveReason": entry.archive_reason,
        "supersededBy": entry.superseded_by,
        "content": entry.content,
        "path": str(stored.path),
    }


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _in_category(entry: Entry, prefix: str | None) -> bool:
    if prefix is None:
        return True
    prefix = prefix.strip("/")
    category = entry.category or ""
    return category == prefix or category.startswith(prefix + "/")


def _in_scope(entry: Entry, scope: Scope) -> bool:
    if scope is Scope.all:
        return True
    return entry.is_archived if scope is Scope.archived else entry.is_live


def register(app: typer.Typer) -> None:
    """``memory stats|show``. ``list``, ``restore`` and ``purge`` need the coverage package (the purge's last-record
    rule, the end-of-run invariant): they are registered by ``consolidation/memory_cli.py`` into the same group."""
    memory = typer.Typer(help="Inspect and maintain an agent's memory store.", no_args_is_help=True)
    app.add_typer(memory, name=MEMORY_GROUP)
    memory.command("stats")(stats_command)
    memory.command("show")(show_command)


def memory_group(app: typer.Typer) -> typer.Typer:
    """The ``memory`` command group ``register`` added to ``app`` (for commands registered from higher layers)."""
    for info in reversed(app.registered_groups):  # the one the command line resolves: the last added
        if info.name == MEMORY_GROUP and info.typer_instance is not None:
            return info.typer_instance
    raise LookupError("the memory commands are not registered on this app")


def stats_command(
    agent_dir: Path = AGENT_DIR_ARG,
    memory_dir: Path | None = MEMORY_DIR_OPT,
    as_json: bool = JSON_OPT,
) -> None:
    """Counts: live, archived, malformed, duplicates, embeddings, high-value, due for purge, per category."""
    with expected_errors():
        store = open_store(agent_dir, memory_dir)
        stats = compute_stats(store)
    if as_json:
        emit_json(stats.model_dump(mode="json", by_alias=True))
        return
    out.print(f"[bold]memory store[/bold] {escape(stats.memory_dir)}")
    summary = Table.grid(padding=(0, 2))
    summary.add_row("entries", str(stats.entries))
    summary.add_row("live", str(stats.live))
    summary.add_row("archived", str(stats.archived))
    summary.add_row("superseded", str(stats.superseded))
    summary.add_row("high-value live (floor)", str(stats.high_value_live))
    summary.add_row("reviewed and unchanged", str(stats.reviewed_live))
    dims = ", ".join(str(d) for d in stats.embedding_dimensions) or "-"
    summary.add_row("embeddings", f"{stats.embeddings} (dimensions: {dims})")
    summary.add_row(
        f"archived > {stats.retention_days} days",
        f"{stats.archived_due_for_purge} due for purge, {stats.archived_kept_above_floor} kept above the floor",
    )
    summary.add_row("malformed files", f"[yellow]{len(stats.malformed)}[/yellow]" if stats.malformed else "0")
    if stats.duplicate_ids:
        summary.add_row("ids in several files", f"[yellow]{', '.join(stats.duplicate_ids)}[/yellow]")
    out.print(summary)
    table = Table(title="categories")
    for column in ("category", "live", "archived", "superseded"):
        table.add_column(column, justify="left" if column == "category" else "right")
    for name, counts in stats.categories.items():
        table.add_row(escape(name), str(counts.live), str(counts.archived), str(counts.superseded))
    out.print(table)
    for bad in stats.malformed:
        out.print(f"[yellow]malformed (left untouched):[/yellow] {escape(bad.path)}: {escape(bad.error)}")


def show_command(
    agent_dir: Path = AGENT_DIR_ARG,
    entry_id: str = typer.Argument(..., metavar="ID", help="Entry id (archived entries too)."),
    memory_dir: Path | None = MEMORY_DIR_OPT,
    as_json: bool = JSON_OPT,
) -> None:
    """Print one whole entry, exactly as stored, with its embedding's presence."""
    with expected_errors():
        validate_id(entry_id)
        store = open_store(agent_dir, memory_dir)
        stored = store.require(entry_id)
        vector = store.load_embedding(stored.id)
        raw = loads_json(read_regular(stored.path, ENTRY_FILE_LIMIT, follow_symlinks=False).decode("utf-8-sig"))
    if as_json:
        emit_json(
            {
                "path": str(stored.path),
                "live": stored.entry.is_live,
                "archived": stored.entry.is_archived,
                "embeddingDimensions": None if vector is None else len(vector),
                "entry": raw,
            }
        )
        return
    entry = stored.entry
    state = (
        f"[yellow]archived[/yellow] {entry.archived_at.isoformat()} — {escape(entry.archive_reason or '')}"
        if entry.archived_at
        else f"superseded by {entry.superseded_by}"
        if entry.superseded_by
        else "[green]live[/green]"
    )
    out.print(Panel(escape(entry.content), title=f"{entry.id}  {escape(entry.category or 'uncategorized')}"))
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row("state", state)
    grid.add_row("path", escape(str(stored.path)))
    grid.add_row("importance", f"{entry.importance_score:.2f}")
    grid.add_row("reinforced", f"{entry.reinforcement_count}x")
    grid.add_row("tags", escape(", ".join(entry.tags) or "-"))
    grid.add_row("created", entry.created_at.isoformat())
    grid.add_row("updated", entry.updated_at.isoformat() if entry.updated_at else "-")
    grid.add_row("last seen", entry.last_seen_at.isoformat() if entry.last_seen_at else "-")
    grid.add_row("embedding", "-" if vector is None else f"{len(vector)} dimensions")
    for key, value in (entry.metadata or {}).items():
        grid.add_row(f"metadata.{escape(key)}", escape(value))
    for key, value in (entry.model_extra or {}).items():
        grid.add_row(f"{escape(key)} (unknown field, kept)", escape(json.dumps(value, ensure_ascii=False)))
    out.print(grid)
