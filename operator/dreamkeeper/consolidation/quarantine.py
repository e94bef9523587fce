"""One bad entry never stops a cycle: entries the engine cannot safely act on are set aside as malformed.

The scan already sets aside files it cannot parse. An entry can parse and still be unusable downstream: a lone
surrogate (``"\\uD83D"``) in its text cannot be written back as UTF-8, a reinforcement count beyond int32 or an
offset beyond ±14 h is something RockBot itself cannot read, an id or category the store refuses cannot be rewritten
where it lies. Each such entry is reported with the reason, left byte for byte as it is, and every other entry goes
on through the cycle. The screen is cheap (string checks, no serialisation) because it runs on every entry of every
cycle; the stages after it also isolate what it cannot foresee (the executor, per step; validation, per merge).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from pathlib import Path

from dreamkeeper.memory import (
    Entry,
    MalformedFile,
    MemoryStoreError,
    ScanResult,
    StoredEntry,
    entry_location,
    validate_id,
)

log = logging.getLogger(__name__)

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
FLOAT32_MAX = 3.4028234663852886e38
_DOTNET_MAX_OFFSET = timedelta(hours=14)  # DateTimeOffset's range of offsets
NOTES_LISTED = 50  # malformed files named in a report's notes; the rest are counted


def unencodable(text: str) -> bool:
    """Whether ``text`` cannot be written as UTF-8 (it holds a lone surrogate)."""
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


_SURROGATE = re.compile("[\ud800-\udfff]")


def displayable(text: str) -> str:
    """``text`` with any lone surrogate shown as U+FFFD, so a report or log that quotes it can still be written."""
    return _SURROGATE.sub("\ufffd", text) if unencodable(text) else text


def _bad_text(values: Iterable[tuple[str, str | None]]) -> str | None:
    for field, value in values:
        if value is not None and unencodable(value):
            at = next(i for i, c in enumerate(value) if 0xD800 <= ord(c) <= 0xDFFF)
            return f"{field} holds a lone surrogate (U+{ord(value[at]):04X} at character {at}), which UTF-8 cannot hold"
    return None


def _bad_time(field: str, value: datetime) -> str | None:
    offset = value.utcoffset()
    if offset is not None and abs(offset) > _DOTNET_MAX_OFFSET:
        return f"{field} has offset {offset}, beyond RockBot's ±14:00"
    try:
        value - (offset or timedelta(0))  # the UTC instant must be a date (.NET refuses 0001-01-01T00:00+01:00)
    except OverflowError:
        return f"{field} {value.isoformat()} is outside the calendar once converted to UTC"
    return None


class Screen:
    """Checks entries of one store; remembers where each category's entries belong (one path check per category)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._homes: dict[str | None, tuple[str] | str] = {}  # category -> (its directory,), or why it has none

    def unfit(self, stored: StoredEntry) -> str | None:
        """Why the engine must not act on this entry, or None."""
        entry = stored.entry
        reason = _bad_strings(entry)
        if reason:
            return reason
        extras = entry.__pydantic_extra__
        if extras:
            try:
                json.dumps(extras, ensure_ascii=False, allow_nan=False).encode("utf-8")
            except (ValueError, TypeError) as exc:  # UnicodeEncodeError is a ValueError; so is NaN
                return f"an unknown field cannot be written back ({type(exc).__name__}: {str(exc)[:120]})"
        if not INT32_MIN <= entry.reinforcement_count <= INT32_MAX:
            return f"reinforcementCount {_short(entry.reinforcement_count)} is outside RockBot's int32 range"
        if (reason := _bad_importance(entry)) is not None:
            return reason
        for field, value in (
            ("createdAt", entry.created_at),
            ("updatedAt", entry.updated_at),
            ("lastSeenAt", entry.last_seen_at),
            ("archivedAt", entry.archived_at),
        ):
            if value is not None and (reason := _bad_time(field, value)) is not None:
                return reason
        return self._misplaced(stored)

    def _misplaced(self, stored: StoredEntry) -> str | None:
        """Rewrites go where id and category say (``entry_location``): an entry elsewhere cannot be rewritten."""
        entry = stored.entry
        home = self._homes.get(entry.category)
        if home is None:
            try:
                home = (str(entry_location(self.root, "x", entry.category).parent),)
            except MemoryStoreError as exc:
                home = str(exc).replace("; nothing was written", "")
            self._homes[entry.category] = home
        if isinstance(home, str):
            return home
        try:
            validate_id(entry.id)
        except MemoryStoreError as exc:
            return str(exc).replace("; nothing was written", "")
        expected = os.path.join(home[0], entry.id + ".json")  # strings: a Path per entry costs more than the check
        if stored.name != expected:
            return f"its id and category say it belongs at {expected}, not where it is"
        return None


def _bad_strings(entry: Entry) -> str | None:
    """Which text of the entry UTF-8 cannot hold, if any (the common all-ASCII entry costs a few ``isascii``)."""
    fields: list[tuple[str, str | None]] = [
        ("id", entry.id),
        ("content", entry.content),
        ("category", entry.category),
        ("supersededBy", entry.superseded_by),
        ("archiveReason", entry.archive_reason),
    ]
    fields += [(f"tag {i}", tag) for i, tag in enumerate(entry.tags) if not tag.isascii()]
    for key, value in (entry.metadata or {}).items():
        if not key.isascii():
            fields.append((f"metadata key {key[:40]!r}", key))
        if not value.isascii():
            fields.append((f"metadata.{key[:40]}", value))
    return _bad_text(fields)


def _bad_importance(entry: Entry) -> str | None:
    if not math.isfinite(entry.importance_score) or abs(entry.importance_score) > FLOAT32_MAX:
        return f"importanceScore {entry.importance_score!r} is outside RockBot's float range"
    return None


def decay_keeps_fit(entry: Entry) -> bool:
    """Whether ``entry``, a decay's copy of an entry the screen found fit, is fit too. A decay changes importanceScore
    and updatedAt alone (``Entry.evolve`` of those two), so only their checks are made again, by ``Screen.unfit``'s
    own code: the corpus index keeps the verdict with the decay it keeps (memory/corpus_index_own.py)."""
    updated = entry.updated_at
    return _bad_importance(entry) is None and (updated is None or _bad_time("updatedAt", updated) is None)


def unfit(stored: StoredEntry, root: Path) -> str | None:
    """Why the engine must not act on this entry, or None (one entry; ``screen`` checks many)."""
    return Screen(root).unfit(stored)


def _short(value: int) -> str:
    text = str(value) if abs(value) < 10**30 else f"~1e{len(str(abs(value))) - 1}"
    return text


def screen(entries: Sequence[StoredEntry], root: Path) -> tuple[list[StoredEntry], list[MalformedFile]]:
    """The entries the engine may act on, and the rest as malformed files with the reason (logged, untouched)."""
    checker = Screen(root)
    fit: list[StoredEntry] = []
    quarantined: list[MalformedFile] = []
    for stored in entries:
        try:
            reason = checker.unfit(stored)
        except Exception as exc:  # the screen itself must not be what stops a cycle
            reason = f"could not be checked ({type(exc).__name__}: {exc})"
        if reason is None:
            fit.append(stored)
            continue
        log.warning("skipping memory entry %s: %s (left untouched)", stored.path, reason)
        quarantined.append(MalformedFile(stored.path, reason))
    return fit, quarantined


def screened(scan: ScanResult, root: Path) -> ScanResult:
    """``scan`` with every entry the engine cannot act on moved to its malformed files. An entry the corpus index
    says is unchanged since the screen found it fit is not screened again (memory/corpus_index.py)."""
    index = scan.index
    todo = index.unscreened(scan.entries) if index is not None else scan.entries
    fit, quarantined = screen(todo, root)
    if index is not None:
        index.note_fit(fit)
    if not quarantined:
        return scan
    out = {str(m.path) for m in quarantined}
    entries = [s for s in scan.entries if s.name not in out]
    return ScanResult(entries=entries, malformed=[*scan.malformed, *quarantined], duplicates=scan.duplicates)


def malformed_notes(malformed: Sequence[MalformedFile]) -> tuple[str, ...]:
    """What a report says of the files the cycle left alone: each with its reason, up to ``NOTES_LISTED``."""
    notes = [f"malformed, left untouched: {m.path}: {m.error}" for m in malformed[:NOTES_LISTED]]
    if len(malformed) > NOTES_LISTED:
        notes.append(f"… and {len(malformed) - NOTES_LISTED} more malformed file(s), left untouched")
    return tuple(notes)


__all__ = ["Screen", "decay_keeps_fit", "displayable", "malformed_notes", "screen", "screened", "unencodable", "unfit"]
