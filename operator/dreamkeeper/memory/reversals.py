"""The log of reversals: entries brought back by hand (``dreamkeeper memory restore``) and cycles undone.

A cycle's stale write-back repair (``consolidation/writeback``) remembers what earlier cycles archived, so that an
agent's cached copy written back over an archive is recognised and archived again. An entry a person restored,
or a cycle someone undid, must not be: this log says so. It lives in the state directory (never under memory/,
where RockBot would try to load it as an entry), one JSON object a line, appended under the cycle lock.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from dreamkeeper.memory.entry import format_timestamp, utcnow
from dreamkeeper.memory.lock import state_dir

log = logging.getLogger(__name__)

REVERSALS_FILE = "reversals.jsonl"


@dataclass(frozen=True)
class Reversal:
    at: str  # when (ISO-8601): the order against the journals of the cycles around it
    restored: tuple[str, ...] = ()  # entry ids brought back to live by hand
    undone: tuple[str, ...] = ()  # journal ids (a cycle's plan, fold, write-back journals) undone


def reversals_path(agent_dir: Path) -> Path:
    return state_dir(agent_dir) / REVERSALS_FILE


def note_restored(agent_dir: Path, entry_ids: Iterable[str], now: datetime | None = None) -> None:
    _append(agent_dir, {"restored": sorted(set(entry_ids))}, now)


def note_undone(agent_dir: Path, journal_ids: Iterable[str], now: datetime | None = None) -> None:
    _append(agent_dir, {"undone": sorted(set(journal_ids))}, now)


def _append(agent_dir: Path, record: dict[str, object], now: datetime | None) -> None:
    if not any(record.values()):
        return
    path = reversals_path(agent_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"at": format_timestamp(now or utcnow()), **record}, separators=(",", ":")) + "\n"
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())


def read_reversals(agent_dir: Path, offset: int = 0) -> tuple[list[Reversal], int]:
    """The reversals from byte ``offset`` on, and the offset after the last complete line (a torn last line, from
    a crash mid-append, is read next time)."""
    try:
        with open(reversals_path(agent_dir), "rb") as handle:
            handle.seek(offset)
            data = handle.read()
    except OSError:
        return [], offset
    out: list[Reversal] = []
    end = offset
    for raw in data.splitlines(keepends=True):
        if not raw.endswith(b"\n"):
            break
        end += len(raw)
        try:
            record = json.loads(raw)
            out.append(
                Reversal(
                    at=str(record["at"]),
                    restored=tuple(str(i) for i in record.get("restored") or ()),
                    undone=tuple(str(j) for j in record.get("undone") or ()),
                )
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("%s: unreadable line skipped (%s): %r", reversals_path(agent_dir), exc, raw[:200])
    return out, end
