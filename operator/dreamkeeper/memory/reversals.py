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
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from dreamkeeper.memory.entry import format_timestamp, utcnow
from dreamkeeper.memory.files import describe_mode, loads_json
from dreamkeeper.memory.lock import ensure_state_dir, state_dir
from dreamkeeper.memory.statefiles import LARGE_STATE_LIMIT, StateFileError, check_state_files, read_state_file

log = logging.getLogger(__name__)

REVERSALS_FILE = "reversals.jsonl"


@dataclass(frozen=True)
class Reversal:
    at: str  # when (ISO-8601): the order against the journals of the cycles around it
    restored: tuple[str, ...] = ()  # entry ids brought back to live by hand (written before the restore)
    undone: tuple[str, ...] = ()  # journal ids (a cycle's plan, fold, write-back journals) whose undo finished
    undoing: tuple[str, ...] = ()  # journal ids an undo is about to reverse (written before its first write)
    cycle: str | None = None  # the cycle an undo reverses

    @property
    def reversed_journals(self) -> tuple[str, ...]:
        """What no longer stands: journals undone, or being undone (an undo interrupted stands no more than a
        finished one: it is resumed, never re-applied)."""
        return (*self.undoing, *self.undone)


def reversals_path(agent_dir: Path) -> Path:
    return state_dir(agent_dir) / REVERSALS_FILE


def note_restored(agent_dir: Path, entry_ids: Iterable[str], now: datetime | None = None) -> None:
    _append(agent_dir, {"restored": sorted(set(entry_ids))}, now)


def note_undoing(agent_dir: Path, cycle_id: str, journal_ids: Iterable[str], now: datetime | None = None) -> None:
    """Before an undo's first write: its journals no longer stand (the write-back index forgets them, recovery never
    finishes them), and until ``note_undone`` the undo is unfinished (``unfinished_undos``: resumed)."""
    _append(agent_dir, {"undoing": sorted(set(journal_ids)), "cycle": cycle_id}, now)


def note_undone(agent_dir: Path, journal_ids: Iterable[str], now: datetime | None = None) -> None:
    _append(agent_dir, {"undone": sorted(set(journal_ids))}, now)


def unfinished_undos(reversals: Iterable[Reversal]) -> dict[str, tuple[str, ...]]:
    """Cycle id -> its journals, for every undo announced and not finished (killed, or its last write failed)."""
    pending: dict[str, tuple[str, ...]] = {}
    for reversal in reversals:
        if reversal.undoing and reversal.cycle:
            pending[reversal.cycle] = reversal.undoing
        if reversal.undone:
            done = set(reversal.undone)
            pending = {cycle: ids for cycle, ids in pending.items() if not done >= set(ids)}
    return pending


def _append(agent_dir: Path, record: dict[str, object], now: datetime | None) -> None:
    """One line, appended and fsynced; a ``StateFileError`` (nothing written) when the log is not a regular file
    we may append to. Callers write it *before* the change it announces: a change that was not announced never
    happens (issue 22: an undo whose log could not be written had already restored its sources)."""
    if not any(record.values()):
        return
    path = reversals_path(agent_dir)
    ensure_state_dir(agent_dir)
    line = json.dumps({"at": format_timestamp(now or utcnow()), **record}, separators=(",", ":")) + "\n"
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        # Non-blocking, never following a link: a FIFO fails at once (ENXIO) instead of waiting for a reader.
        fd = os.open(path, flags, 0o666)
    except OSError as exc:
        check_state_files(agent_dir, (REVERSALS_FILE,))  # a directory, a FIFO, a link: said as such
        raise StateFileError(path, f"it cannot be appended to ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise StateFileError(path, f"it is {describe_mode(st.st_mode)}, not a regular file; nothing was appended")
        data = line.encode("utf-8")
        while data:
            data = data[os.write(fd, data) :]
        os.fsync(fd)
    except StateFileError:
        raise
    except OSError as exc:
        raise StateFileError(path, f"it cannot be appended to ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def read_reversals(agent_dir: Path, offset: int = 0) -> tuple[list[Reversal], int]:
    """The reversals from byte ``offset`` on, and the offset after the last complete line (a torn last line, from
    a crash mid-append, is read next time). A log that is not a regular file is a ``StateFileError``: the stale
    write-back repair must not run without knowing what a person brought back."""
    data = read_state_file(reversals_path(agent_dir), LARGE_STATE_LIMIT)
    if data is None:
        return [], offset
    data = data[offset:]
    out: list[Reversal] = []
    end = offset
    for raw in data.splitlines(keepends=True):
        if not raw.endswith(b"\n"):
            break
        end += len(raw)
        try:
            record = loads_json(raw)
            out.append(
                Reversal(
                    at=str(record["at"]),
                    restored=tuple(str(i) for i in record.get("restored") or ()),
                    undone=tuple(str(j) for j in record.get("undone") or ()),
                    undoing=tuple(str(j) for j in record.get("undoing") or ()),
                    cycle=str(record["cycle"]) if record.get("cycle") else None,
                )
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("%s: unreadable line skipped (%s): %r", reversals_path(agent_dir), exc, raw[:200])
    return out, end
