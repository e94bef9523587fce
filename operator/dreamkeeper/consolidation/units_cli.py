"""What every command that changes an agent's memory shares once the memory may be a Markdown format: the
``--format`` and ``--profile-json`` options, and the unit session (ingest, the operation, render, under the cycle
lock), so that ``restore``, ``undo``, ``recover`` and ``purge`` work on units as a cycle does."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError

from dreamkeeper.formats import (
    FORMAT_NAMES,
    ROCKBOT,
    Finished,
    MemoryFormat,
    Prepared,
    ProfileOverrides,
    get_format,
)
from dreamkeeper.memory import CycleLock, MemoryStore, parse_json_object, utcnow

FORMAT_SECTION = "format"  # the settings file's section: {"name": "openclaw", "memoryDir": ..., "caps": {...}}

FORMAT_OPT = typer.Option(
    None,
    "--format",
    help=f"How the agent keeps its memory: {' | '.join(FORMAT_NAMES)} (default rockbot: one JSON file per entry "
    "under AGENT_DIR/memory). See docs/formats.md.",
)
PROFILE_OPT = typer.Option(
    None,
    "--profile-json",
    help='A Markdown format\'s profile fields as JSON, e.g. \'{"memoryDir": "workspace", "caps": {"MEMORY.md": '
    '12000}, "appendOnlyLogs": true}\'.',
)


def format_of(name: str | None, profile_json: str | None, section: dict[str, Any] | None = None) -> MemoryFormat:
    """The format the flags (over the settings' ``format`` section) name. ValueError says what is wrong."""
    data = dict(section or {})
    chosen = name if name is not None else str(data.pop("name", ROCKBOT))
    data.pop("name", None)
    if profile_json is not None:
        try:
            data.update(parse_json_object(profile_json.encode("utf-8")))
        except ValueError as exc:
            raise ValueError(f"--profile-json: expected a JSON object: {exc}") from None
    try:
        overrides = ProfileOverrides.model_validate(data) if data else None
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ValueError(f"format profile: {problems}") from None
    return get_format(chosen, overrides)


def is_markdown(memory_format: MemoryFormat) -> bool:
    return memory_format.name != ROCKBOT


@dataclass
class UnitSession:
    store: MemoryStore
    prepared: Prepared
    finished: Finished | None = None
    notes: list[str] = field(default_factory=list)


@contextlib.contextmanager
def unit_session(agent_dir: Path, memory_format: MemoryFormat, purpose: str) -> Iterator[UnitSession]:
    """Under the cycle lock: the agent's files ingested, then the caller's operation on the records, then what it
    changed rendered into the files (not when the operation raised: the next run finishes what it left)."""
    memory_format.check(agent_dir)
    with CycleLock(agent_dir, purpose):
        now = utcnow()
        store = MemoryStore(memory_format.store_root(agent_dir))
        session = UnitSession(store, memory_format.prepare(agent_dir, store, now))
        yield session
        session.finished = memory_format.finish(agent_dir, store, now)
        session.notes = [*session.prepared.notes, *session.finished.notes]


__all__ = ["FORMAT_OPT", "FORMAT_SECTION", "PROFILE_OPT", "UnitSession", "format_of", "is_markdown", "unit_session"]
