"""Unit records: each unit of an agent's Markdown files as an entry of dreamkeeper's unit store.

The engine (gating, clustering, proposals, coverage, census, floor, blast radius, journal, undo, report) works on
entries; a Markdown format gives it one entry per unit, kept in ``AGENT_DIR/.dreamkeeper/units/<category>/`` (outside
every path the agent reads or indexes). The record holds the unit verbatim (``content``), its identity and placement
in ``metadata`` (Markdown has no slot for either), and everything the engine stamps (review stamps, decline and
rejection stamps, decay). An archived record *is* the archive: the unit's text as it was in the file, with its file,
heading path, hash and the archiving cycle's id.

Placement (``dkPlacement``) says where a record stands against the agent's files, so that work a killed run left half
done is finished, never mistaken for the agent's doing:

* ``in-file``: the unit is in its file (as read, or as dreamkeeper wrote it). Archived and ``in-file`` means the
  file still has to lose it (or, in an append-only log, that it stays there as history).
* ``removed``: dreamkeeper took it out of its file (or the agent did, and the record was archived for it).
* ``pending`` (or no placement on a successor a cycle created): to be written into a file.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Final, Literal

from dreamkeeper.formats.profile import FileRule, Profile
from dreamkeeper.formats.units import Unit, UnitKey
from dreamkeeper.memory import CREATED_BY_CYCLE, REVIEWED_HASH, Entry, StoredEntry, review_hash

FILE: Final = "dkFile"
HEADING: Final = "dkHeading"
HASH: Final = "dkHash"
NTH: Final = "dkNth"
KIND: Final = "dkKind"
PLACEMENT: Final = "dkPlacement"
FORMAT: Final = "dkFormat"
MOVED_TO: Final = "dkMovedTo"  # a whole file moved into the archive: where it is (relative to AGENT_DIR)
REMOVED_AT: Final = "dkRemovedAt"
AFTER: Final = "dkAfter"  # when taken out: the hash of the unit it came after ("" if first), to go back there
FRONT: Final = "dkFrontMatter"  # a whole-file unit's front matter, verbatim
RECORD_KEYS: Final = frozenset({FILE, HEADING, HASH, NTH, KIND, PLACEMENT, FORMAT, MOVED_TO, REMOVED_AT, AFTER, FRONT})

Placement = Literal["in-file", "removed", "pending"]
IN_FILE: Final = "in-file"
REMOVED: Final = "removed"
PENDING: Final = "pending"

REASON_AGENT_REMOVED: Final = "no longer in its file (removed or changed by the agent); kept here: "
_DATE = re.compile(r"(?:^|/)(\d{4})-(\d{2})-(\d{2})[^/]*$")


def key_of(entry: Entry) -> UnitKey | None:
    """The identity a record says its unit has (None for a successor not written anywhere yet)."""
    file, digest = entry.meta(FILE), entry.meta(HASH)
    if not file or not digest:
        return None
    try:
        nth = int(entry.meta(NTH) or "1")
    except ValueError:
        nth = 1
    return UnitKey(file, entry.meta(HEADING) or "", digest, nth)


def placement_of(entry: Entry) -> Placement:
    value = entry.meta(PLACEMENT)
    if value == IN_FILE:
        return IN_FILE
    return REMOVED if value == REMOVED else PENDING


def needs_placing(entry: Entry) -> bool:
    """A live record whose unit is in no file: a successor a cycle created, or a unit restored or undone."""
    if not entry.is_live:
        return False
    placement = entry.meta(PLACEMENT)
    if placement is None:
        return entry.meta(CREATED_BY_CYCLE) is not None
    return placement in (PENDING, REMOVED)


def key_metadata(key: UnitKey, placement: Placement) -> dict[str, str | None]:
    """A unit's identity and placement as record metadata. Every key is always written, defaults included: the
    engine's fold fills a survivor's *missing* metadata keys from its copies (RockBot's), so an absent ordinal or
    heading would be taken from a copy and give the survivor the copy's identity."""
    return {FILE: key.file, HEADING: key.heading, HASH: key.hash, NTH: str(key.nth), PLACEMENT: placement}


def placed_entry(entry: Entry, unit: Unit) -> Entry:
    """A pending record once its unit is found in a file: its identity and placement set, its text as the file has
    it (a list marker added). A review stamp of the text as the cycle wrote it still holds for the text as it now
    reads, so it is carried over (re-offering a merge's output built RockBot's merge-of-merge chains)."""
    placed: dict[str, str | None] = {**key_metadata(unit.key, IN_FILE), REMOVED_AT: None, KIND: unit.kind}
    if entry.content != unit.text:
        if entry.meta(REVIEWED_HASH) == review_hash(entry.content):
            placed[REVIEWED_HASH] = review_hash(unit.text)
        entry = entry.evolve(content=unit.text)
    return entry.with_meta(**placed)


def written_day(file: str) -> datetime | None:
    """The day a dated log file's name starts with (OpenClaw's ``memory/YYYY-MM-DD[-slug].md``)."""
    match = _DATE.search(file)
    if match is None:
        return None
    try:
        return datetime(int(match[1]), int(match[2]), int(match[3]), tzinfo=UTC)
    except ValueError:
        return None


def importance_of(unit: Unit, rule: FileRule, profile: Profile, recurrence: int) -> float:
    """Importance where the format records none (docs/formats.md): the file's kind, the category's own value,
    +step for each other place the same text is written (bounded), or the agent's own annotation when it wrote one."""
    rules = profile.importance
    if rules.importance_comment:
        found = re.search(rules.importance_comment, unit.text)
        if found is not None:
            return min(1.0, max(0.0, int(found.group(1)) / 10))
    kinds = {"core": rules.core, "log": rules.log, "file": rules.file}
    base = rules.by_category.get(rule.category, kinds[unit.kind])
    return round(min(1.0, base + min(rules.recurrence_max, rules.recurrence_step * max(0, recurrence - 1))), 4)


def new_record(unit: Unit, rule: FileRule, profile: Profile, record_id: str, now: datetime, recurrence: int) -> Entry:
    """The record of a unit first seen in a file: created at the log's day when the file is dated (so age counts
    from when the agent wrote it), otherwise now."""
    created = (written_day(unit.key.file) if rule.dated else None) or now
    created = min(created, now)
    metadata: dict[str, str] = {k: v for k, v in key_metadata(unit.key, IN_FILE).items() if v is not None}
    metadata[KIND] = unit.kind
    metadata[FORMAT] = profile.name
    if unit.front:
        metadata[FRONT] = unit.front
    return Entry(
        id=record_id,
        content=unit.text,
        category=rule.category,
        created_at=created,
        updated_at=created,
        last_seen_at=created,
        importance_score=importance_of(unit, rule, profile, recurrence),
        reinforcement_count=max(1, recurrence),
        metadata=metadata,
    )


def live_successor(stored: StoredEntry) -> str | None:
    """The successor an archived record's reason names ("merged into X")."""
    from dreamkeeper.memory import successor_in

    return successor_in(stored.entry.archive_reason)


__all__ = [
    "AFTER",
    "FILE",
    "FORMAT",
    "FRONT",
    "HASH",
    "HEADING",
    "IN_FILE",
    "KIND",
    "MOVED_TO",
    "NTH",
    "PENDING",
    "PLACEMENT",
    "REASON_AGENT_REMOVED",
    "RECORD_KEYS",
    "REMOVED",
    "REMOVED_AT",
    "Placement",
    "importance_of",
    "key_metadata",
    "key_of",
    "live_successor",
    "needs_placing",
    "new_record",
    "placed_entry",
    "placement_of",
    "written_day",
]
