"""Ingest: bring the unit records up to date with the agent's files, before anything else reads them.

Run under dreamkeeper's cycle lock at the start of every cycle and of every command that changes units (restore,
undo, recover, purge). The agent's files are the truth for what is live; the records are the truth for what
dreamkeeper did and has still to do (their placement). For each unit in a file, and each record:

* a unit with no record: a new record (live, ``in-file``);
* a live record whose unit is in its file: unchanged (a reformatted text is taken as it now reads);
* a live record waiting to be written into a file (``pending``, ``removed``): left for the render;
* a live record that was in a file and no longer is: the agent removed or changed it. The record is archived, its
  text kept verbatim (the agents' own consolidations lose exactly these: openclaw#84882, hermes#56464), and
  ``dreamkeeper memory restore`` writes it back;
* an archived record still in its file: the render takes it out (or, in an append-only log, it stays as history);
* an archived record that reappears after the render took it out: a stale copy when the unit it was merged into is
  still in a file (the render takes it out again); otherwise it is the file's only copy of the fact (a writer that
  cached the file wrote its old list over the successor: hermes#26045, or the agent wrote it again on purpose), and
  it is restored while the successor, gone from the file, is kept in the archive.

A file that cannot be read is reported and its records are left as they are: nothing is concluded about them.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from dreamkeeper.formats import records as rec
from dreamkeeper.formats.layout import ReadFile, Unreadable, list_files, read_file
from dreamkeeper.formats.profile import Profile
from dreamkeeper.formats.units import Unit, UnitKey, text_hash
from dreamkeeper.memory import MemoryStore, StoredEntry, note_restored, shown

log = logging.getLogger(__name__)


@dataclass
class IngestReport:
    created: int = 0
    updated: int = 0
    agent_removed: list[str] = field(default_factory=list)  # record ids archived for the agent
    restored: list[str] = field(default_factory=list)  # archived records the agent wrote again
    stale_copies: list[str] = field(default_factory=list)  # archived records a stale writer put back
    unreadable: list[str] = field(default_factory=list)  # "file: why"
    files: int = 0
    units: int = 0
    drift: list[str] = field(default_factory=list)  # entry files that do not round-trip (the agent's guard refuses)

    def notes(self) -> list[str]:
        out = [f"agent file left untouched: {line}" for line in self.unreadable]
        if self.agent_removed:
            out.append(
                f"{len(self.agent_removed)} unit(s) no longer in the agent's files were kept in the archive "
                f"(restorable): {', '.join(self.agent_removed[:5])}"
            )
        if self.stale_copies:
            out.append(f"{len(self.stale_copies)} archived unit(s) written back by a stale writer, taken out again")
        out += [
            f"{name} does not round-trip (the agent's drift guard refuses edits until it is rewritten)"
            for name in self.drift
        ]
        return out


def _recurring(unit: Unit) -> str:
    """What makes two units the same text written twice: the identity hash, or for a whole file its text's hash."""
    return text_hash(unit.text) if unit.kind == "file" else unit.key.hash


def _rank(stored: StoredEntry) -> tuple[int, int]:
    """Which of several records claiming one identity speaks for it: live before archived, in the file first."""
    entry = stored.entry
    return (0 if entry.is_live else 1, 0 if rec.placement_of(entry) == rec.IN_FILE else 1)


class _Ingest:
    def __init__(self, agent_dir: Path, profile: Profile, store: MemoryStore, now: datetime, note: bool) -> None:
        self.agent_dir = agent_dir
        self.note = note
        self.profile = profile
        self.store = store
        self.now = now
        self.report = IngestReport()
        self.ids: set[str] = set()
        self.pending: dict[str, list[StoredEntry]] = defaultdict(list)
        self.present: set[UnitKey] = set()

    def run(self) -> IngestReport:
        read: dict[str, ReadFile] = {}
        unreadable: set[str] = set()
        for agent_file in list_files(self.agent_dir, self.profile):
            result = read_file(agent_file, self.profile)
            if isinstance(result, Unreadable):
                log.warning("agent memory file %s left untouched: %s", agent_file.path, result.error)
                self.report.unreadable.append(f"{agent_file.relative}: {result.error}")
                unreadable.add(agent_file.relative)
                continue
            read[agent_file.relative] = result
            if not result.round_trips:
                self.report.drift.append(agent_file.relative)
        self.report.files = len(read)
        units = [u for f in read.values() for u in f.units]
        self.report.units = len(units)
        # How often the same *text* is written: a whole-file unit's identity hash names the file, not its text, so
        # counting by it would take every topic file for a copy of every other (all at the high-value floor).
        recurrence = Counter(_recurring(u) for u in units)
        scan = self.store.scan()
        self.ids = {s.id.lower() for s in (*scan.entries, *scan.duplicates)}
        by_key: dict[UnitKey, list[StoredEntry]] = defaultdict(list)
        for stored in scan.entries:
            key = rec.key_of(stored.entry)
            if key is not None:
                by_key[key].append(stored)
        for claims in by_key.values():
            claims.sort(key=_rank)
        # Records waiting to be written (a successor, a restored unit) whose text is already in a file: a run killed
        # after writing the file and before saying so in the record. Adopted, never taken for a new unit.
        for stored in scan.entries:
            if rec.needs_placing(stored.entry):
                self.pending[text_hash(stored.entry.content)].append(stored)
        present = {u.key for u in units}
        self.present = present
        for unit in units:
            self._unit(unit, read[unit.key.file], by_key.get(unit.key, []), recurrence[_recurring(unit)])
        for key, claims in by_key.items():
            if key in present or key.file in unreadable or self.profile.rule_for(key.file) is None:
                continue
            for stored in claims:
                self._absent(stored)
        return self.report

    def _unit(
        self,
        unit: Unit,
        source: ReadFile,
        claims: list[StoredEntry],
        recurrence: int,
    ) -> None:
        if not claims:
            waiting = self.pending.get(unit.key.hash)
            if waiting:
                stored = waiting.pop(0)
                self.store.update(stored, rec.placed_entry(stored.entry, unit))
                self.report.updated += 1
                log.info(
                    "unit %s was already written into %s by a run that stopped before saying so",
                    stored.id,
                    unit.key.file,
                )
                return
            self._create(unit, source, recurrence)
            return
        stored, entry = claims[0], claims[0].entry
        placement = rec.placement_of(entry)
        if entry.is_live:
            changes: dict[str, str | None] = {}
            if placement != rec.IN_FILE or entry.meta(rec.PLACEMENT) is None:
                changes[rec.PLACEMENT] = rec.IN_FILE
            if changes or entry.content != unit.text:
                self.store.update(stored, entry.with_meta(**changes).evolve(content=unit.text))
                self.report.updated += 1
            return
        if placement == rec.IN_FILE:
            if unit.kind == "file" and text_hash(entry.content) != text_hash(unit.text):
                # A whole file the agent rewrote after a cycle archived it: its new text is a new unit; the old
                # text stays archived, out of the file's claim.
                self.store.update(stored, entry.with_meta(**{rec.PLACEMENT: rec.REMOVED}))
                self._create(unit, source, recurrence)
            return  # still to be taken out by the render, or kept as history in an append-only log
        successor = rec.live_successor(stored)
        if successor is not None and self._in_a_file(successor):
            self.store.update(stored, entry.with_meta(**{rec.PLACEMENT: rec.IN_FILE}))
            self.report.stale_copies.append(entry.id)
            log.info(
                "archived unit %s (merged into %s) is back in %s: a stale copy, taken out again by the render: %s",
                entry.id,
                successor,
                unit.key.file,
                shown(unit.text),
            )
            return
        back = stored.entry.with_meta(**{rec.PLACEMENT: rec.IN_FILE, rec.REMOVED_AT: None})
        self.store.restore(StoredEntry(back, stored.path, stored.fingerprint))
        if self.note:  # the stale write-back repair must not take it for a cached copy
            note_restored(self.agent_dir, [entry.id], self.now)
        self.report.restored.append(entry.id)
        log.info(
            "unit %s was written again by the agent into %s: restored: %s", entry.id, unit.key.file, shown(unit.text)
        )

    def _in_a_file(self, record_id: str) -> bool:
        """Whether a record is live and its unit in a file now. A source put back while its successor is still in a
        file is a stale copy; put back while the successor is gone (a stale writer wrote its old list over it), the
        source is the file's only copy of the fact: it is restored, and the successor kept in the archive."""
        current = self.store.get(record_id)
        if current is None or not current.entry.is_live:
            return False
        key = rec.key_of(current.entry)
        return key is not None and key in self.present

    def _create(self, unit: Unit, source: ReadFile, recurrence: int) -> None:
        record_id = unit.key.unit_id()
        n = 1
        while record_id.lower() in self.ids:
            n += 1
            record_id = f"{unit.key.unit_id()}-{n}"
        self.ids.add(record_id.lower())
        entry = rec.new_record(unit, source.file.rule, self.profile, record_id, self.now, recurrence)
        self.store.create(entry)
        self.report.created += 1

    def _absent(self, stored: StoredEntry) -> None:
        """A record whose unit is not in its file."""
        entry = stored.entry
        placement = rec.placement_of(entry)
        if entry.is_live:
            if placement != rec.IN_FILE:
                return  # to be written by the render
            gone = StoredEntry(
                entry.with_meta(**{rec.PLACEMENT: rec.REMOVED, rec.REMOVED_AT: None}), stored.path, stored.fingerprint
            )
            file = entry.meta(rec.FILE) or "?"
            self.store.archive(gone, rec.REASON_AGENT_REMOVED + file, self.now)
            self.report.agent_removed.append(entry.id)
            return
        if placement == rec.IN_FILE:
            # Archived and meant to leave its file, which no longer has it: nothing left for the render to do.
            self.store.update(stored, entry.with_meta(**{rec.PLACEMENT: rec.REMOVED}))


def ingest(agent_dir: Path, profile: Profile, store: MemoryStore, now: datetime, *, note: bool = True) -> IngestReport:
    """Bring ``store`` (the unit records) up to date with the agent's files. The caller holds the cycle lock.
    ``note=False`` (a dry run's throwaway copy) writes nothing outside ``store``."""
    report = _Ingest(agent_dir, profile, store, now, note).run()
    if report.created or report.updated or report.agent_removed or report.restored or report.stale_copies:
        log.info(
            "ingest (%s): %d file(s), %d unit(s); %d new, %d updated, %d kept for the agent (no longer in its files), "
            "%d restored, %d stale copies",
            profile.name,
            report.files,
            report.units,
            report.created,
            report.updated,
            len(report.agent_removed),
            len(report.restored),
            len(report.stale_copies),
        )
    return report


__all__ = ["IngestReport", "ingest"]
