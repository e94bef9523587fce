"""Render: write what the unit records say into the agent's files.

Run after a cycle's apply (and after restore, undo, recover). The records already hold every archived unit
verbatim, with its file, heading path, hash and the archiving cycle's id, durably, before any file of the agent's is
touched. Then, file by file:

* a unit whose record was archived (a merge or fold source, a prune) and is still ``in-file`` is taken out of its
  file, unless the file is an append-only log (an OpenClaw daily note), where it stays as history;
* a record waiting to be placed is written in: a merge's successor where its first source in a core file was (same
  file, same heading path), else into the profile's ``promote_to`` file (OpenClaw: MEMORY.md); a restored or undone
  unit back where it was.

A source leaves its file only once its successor is in a file (written in the same rewrite when they share a file:
one atomic rename). Each rewrite holds the agent's lock, is checked by parsing it again, keeps every cap (never takes
a file over its cap, never makes one already over it larger), and is guarded by the fingerprint it read: when the
agent wrote meanwhile, the file is read again and the same unit-level changes are applied to what it now holds. A
successor that cannot be written (a cap, a lock held too long, a file that will not parse back) undoes its merge in
the records: the sources, still in their files, are live again, and the successor is archived with the reason.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from dreamkeeper.formats import records as rec
from dreamkeeper.formats.agentlock import agent_lock
from dreamkeeper.formats.entries import edit_entries
from dreamkeeper.formats.layout import memory_dir, read_bytes, units_of
from dreamkeeper.formats.markdown import EditRefused, Insertion, edit
from dreamkeeper.formats.profile import FileRule, Profile
from dreamkeeper.formats.units import Unit, UnitKey, heading_string, heading_tuple, text_hash
from dreamkeeper.memory import (
    ARCHIVED_BY_CYCLE,
    MERGED_FROM,
    MUST_NOT_EXIST,
    ConflictError,
    Fingerprint,
    LockHeldError,
    MemoryStore,
    StoredEntry,
    UnsafeFileError,
    format_timestamp,
    note_restored,
    replace_file,
    shown,
    successor_in,
)

log = logging.getLogger(__name__)

ATTEMPTS = 5  # rewrites tried when the agent keeps writing the same file meanwhile


@dataclass
class RenderReport:
    removed: list[str] = field(default_factory=list)  # records whose unit was taken out of its file
    placed: list[str] = field(default_factory=list)  # records whose unit was written into a file
    kept_in_log: int = 0  # archived units left in an append-only log as history
    refused: list[str] = field(default_factory=list)  # "record: why"
    reverted: list[str] = field(default_factory=list)  # successors whose merge was undone in the records
    conflicts: int = 0  # rewrites read again because the agent wrote meanwhile
    files_written: list[str] = field(default_factory=list)

    def notes(self) -> list[str]:
        out = [f"not written to the agent's files: {line}" for line in self.refused[:20]]
        if len(self.refused) > 20:
            out.append(f"not written to the agent's files: {len(self.refused) - 20} more")
        out += [f"merge undone (its successor could not be written): {line}" for line in self.reverted[:20]]
        return out


@dataclass
class _Placement:
    stored: StoredEntry
    heading: tuple[str, ...]


@dataclass(frozen=True)
class _Written:
    before: list[Unit]  # the file's units as the rewrite read them
    removed: list[UnitKey]  # the units the rewrite took out
    units: dict[str, Unit]  # record id (lower) -> the unit of the rewritten file it now speaks for


@dataclass
class _FileWork:
    relative: str
    rule: FileRule
    insert: list[_Placement] = field(default_factory=list)
    remove: list[StoredEntry] = field(default_factory=list)


class _Render:
    def __init__(self, agent_dir: Path, profile: Profile, store: MemoryStore, now: datetime) -> None:
        self.agent_dir = agent_dir
        self.profile = profile
        self.store = store
        self.now = now
        self.root = memory_dir(agent_dir, profile)
        self.report = RenderReport()
        self.by_id: dict[str, StoredEntry] = {}
        self.placed: set[str] = set()  # successors (lower-cased ids) now in a file
        self.failed: dict[str, str] = {}  # successor id (lower) -> why it could not be written

    # ---- planning ------------------------------------------------------------------------------------------

    def plan(self) -> list[_FileWork]:
        scan = self.store.scan()
        self.by_id = {s.id.lower(): s for s in scan.entries}
        work: dict[str, _FileWork] = {}

        def of(relative: str) -> _FileWork | None:
            rule = self.profile.rule_for(relative)
            if rule is None:
                return None
            return work.setdefault(relative, _FileWork(relative, rule))

        for stored in scan.entries:
            entry = stored.entry
            if entry.is_live:
                if entry.is_live and not rec.needs_placing(entry):
                    if rec.placement_of(entry) == rec.IN_FILE:
                        self.placed.add(entry.id.lower())
                    continue
                target = self._target(stored)
                if target is None:
                    self.report.refused.append(f"{entry.id}: no file of the {self.profile.name} profile takes it")
                    continue
                relative, heading = target
                job = of(relative)
                if job is not None:
                    job.insert.append(_Placement(stored, heading))
            elif rec.placement_of(entry) == rec.IN_FILE and entry.meta(rec.FILE):
                job = of(entry.meta(rec.FILE) or "")
                if job is None:
                    continue
                if job.rule.append_only:
                    self.report.kept_in_log += 1
                    continue
                job.remove.append(stored)
        # Files that gain units first: a source leaves its file only after its successor is in one.
        return sorted(work.values(), key=lambda w: (not w.insert, w.relative))

    def _target(self, stored: StoredEntry) -> tuple[str, tuple[str, ...]] | None:
        entry = stored.entry
        own = entry.meta(rec.FILE)
        if own and self.profile.rule_for(own) is not None:
            return own, heading_tuple(entry.meta(rec.HEADING))
        sources = [self.by_id.get(i.strip().lower()) for i in (entry.meta(MERGED_FROM) or "").split(",") if i.strip()]
        for source in sources:
            file = source.entry.meta(rec.FILE) if source is not None else None
            rule = self.profile.rule_for(file) if file else None
            # By the file's rule, not the record's kind: a source that is itself an earlier successor was written
            # into its file by a render and carries no kind of its own.
            if source is not None and file and rule is not None and rule.kind == "core":
                return file, heading_tuple(source.entry.meta(rec.HEADING))
        if self.profile.promote_to is not None:
            return self.profile.promote_to, self.profile.promote_heading
        return None

    # ---- writing -------------------------------------------------------------------------------------------

    def run(self) -> RenderReport:
        if any(rule.split == "file" for rule in self.profile.files):
            from dreamkeeper.formats.topics import TopicRender

            TopicRender(self).run()  # one file per memory: files are moved and created, the index kept
            return self.report
        for job in self.plan():
            self._file(job)
        self._revert_unplaced()
        return self.report

    def _ready(self, job: _FileWork, inserting: set[str]) -> list[StoredEntry]:
        """The sources that may leave this file now: their successor is in a file (or goes into this one in the same
        rewrite); a source whose successor failed or is gone stays in its file and is live again."""
        ready = []
        for stored in job.remove:
            successor = successor_in(stored.entry.archive_reason)
            if successor is None or stored.entry.meta(ARCHIVED_BY_CYCLE) is None:
                ready.append(stored)
                continue
            key = successor.lower()
            if key in self.placed or key in inserting:
                ready.append(stored)
            elif key in self.failed or key not in self.by_id or not self.by_id[key].entry.is_live:
                self._keep_source(stored, self.failed.get(key, f"its successor {successor} is not live"))
        return ready

    def _file(self, job: _FileWork) -> None:
        path = self.root.joinpath(*job.relative.split("/"))
        inserting = list(job.insert)
        for attempt in range(ATTEMPTS):
            ready = self._ready(job, {p.stored.id.lower() for p in inserting})
            if not inserting and not ready:
                return
            try:
                with agent_lock(self.profile.lock, self.agent_dir, self.root, path):
                    written = self._rewrite(job, path, inserting, ready)
            except ConflictError as exc:
                self.report.conflicts += 1
                log.info(
                    "%s changed while it was being rewritten (%s); reading it again (try %d)",
                    job.relative,
                    exc,
                    attempt + 2,
                )
                continue
            except (EditRefused, LockHeldError, UnsafeFileError, OSError) as exc:
                if inserting:
                    for placement in inserting:
                        self._refuse(placement.stored, f"{job.relative}: {exc}")
                    inserting = []  # the removals that do not depend on them are still done
                    continue
                for stored in ready:
                    self.report.refused.append(f"{stored.id}: not taken out of {job.relative}: {exc}")
                return
            self._settle(job, written, inserting, ready)
            return
        for placement in inserting:
            self._refuse(placement.stored, f"{job.relative}: the agent kept writing it ({ATTEMPTS} tries)")

    def _rewrite(self, job: _FileWork, path: Path, inserting: list[_Placement], ready: list[StoredEntry]) -> _Written:
        try:
            data, fingerprint = read_bytes(path)
            text: str = data.decode("utf-8")
            expected: Fingerprint | None = fingerprint
        except FileNotFoundError:
            text, expected = "", MUST_NOT_EXIST
        except UnicodeDecodeError as exc:
            raise EditRefused(f"{job.relative} is not UTF-8 ({exc.reason}); left as it is") from None
        current = units_of(text, job.relative, job.rule, self.profile)[0]
        before = {u.key for u in current}
        remove = [k for s in ready if (k := rec.key_of(s.entry)) is not None and k in before]
        adopted = self._adopt(job, current, inserting)
        writing = [p for p in inserting if p.stored.id.lower() not in adopted]
        new_text = self._edited(job, text, remove, writing)
        if new_text != text:
            replace_file(path, new_text.encode("utf-8"), expected)
            self.report.files_written.append(job.relative)
        after = units_of(new_text, job.relative, job.rule, self.profile)[0]
        return _Written(current, remove, self._assign(job, current, after, set(remove), adopted, writing))

    def _adopt(self, job: _FileWork, current: list[Unit], inserting: list[_Placement]) -> dict[str, Unit]:
        """Units already in the file with a pending record's text and no record claiming them: written by a run
        killed before it could say so (or by the agent, the same text): taken as placed, never written twice."""
        # Every unit a record speaks for is claimed, archived ones included (a source about to leave its file may
        # say exactly what its successor says: it is not the successor).
        claimed = {
            key
            for s in self.by_id.values()
            if rec.placement_of(s.entry) == rec.IN_FILE and (key := rec.key_of(s.entry))
        }
        free: dict[tuple[str, str], list[Unit]] = defaultdict(list)
        for unit in current:
            if unit.key not in claimed:
                free[(unit.key.heading, unit.key.hash)].append(unit)
        out: dict[str, Unit] = {}
        for placement in inserting:
            heading = heading_string(placement.heading) if job.rule.split == "block" else ""
            keys = free.get((heading, text_hash(placement.stored.entry.content)))
            if keys:
                out[placement.stored.id.lower()] = keys.pop(0)
        return out

    def _edited(self, job: _FileWork, text: str, remove: list[UnitKey], inserting: list[_Placement]) -> str:
        rule = job.rule
        if rule.split == "entry":
            return edit_entries(
                text,
                file=job.relative,
                kind=rule.kind,
                remove=remove,
                insert=[p.stored.entry.content for p in inserting],
                cap=rule.cap,
                separator=self.profile.separator,
                after=[p.stored.entry.meta(rec.AFTER) for p in inserting],
            )
        if rule.split == "file":
            raise EditRefused(f"{job.relative}: whole-file units are written by the topics renderer")
        new_text = edit(
            text,
            file=job.relative,
            kind=rule.kind,
            remove=remove,
            insert=[
                Insertion(p.stored.entry.content, p.heading, after=p.stored.entry.meta(rec.AFTER)) for p in inserting
            ],
            managed=self.profile.managed,
        )
        if rule.cap is not None and len(new_text) > rule.cap and len(new_text) > len(text):
            raise EditRefused(f"{len(new_text):,} characters would be over its cap of {rule.cap:,} (now {len(text):,})")
        return new_text

    def _assign(
        self,
        job: _FileWork,
        current: list[Unit],
        after: list[Unit],
        removed: set[UnitKey],
        adopted: dict[str, Unit],
        writing: list[_Placement],
    ) -> dict[str, Unit]:
        """Which unit of the rewritten file each record now speaks for, record id (lower) -> unit.

        Units with the same text under the same heading are numbered in file order, so taking one out renumbers
        the ones after it: within each such group, the records that stay (in their old order), then the ones
        written in, take the group's units in file order. Identical texts are interchangeable, so this is exact."""
        groups: dict[tuple[str, str], list[Unit]] = defaultdict(list)
        for unit in after:
            groups[(unit.key.heading, unit.key.hash)].append(unit)
        staying: list[tuple[UnitKey, str]] = []
        present = {u.key for u in current}
        for stored in self.by_id.values():
            key = rec.key_of(stored.entry)
            in_file = stored.entry.is_live or rec.placement_of(stored.entry) == rec.IN_FILE
            if key is not None and key.file == job.relative and key in present and key not in removed and in_file:
                staying.append((key, stored.id.lower()))
        staying += [(unit.key, record_id) for record_id, unit in adopted.items()]
        out: dict[str, Unit] = {}
        for key, record_id in sorted(staying, key=lambda item: (item[0].heading, item[0].hash, item[0].nth)):
            group = groups.get((key.heading, key.hash))
            if group:
                out[record_id] = group.pop(0)
        for placement in writing:
            digest = text_hash(placement.stored.entry.content)
            heading = heading_string(placement.heading) if job.rule.split == "block" else ""
            group = groups.get((heading, digest)) or next((g for (_, h), g in groups.items() if h == digest and g), [])
            if group:
                out[placement.stored.id.lower()] = group.pop(0)
        return out

    def _settle(self, job: _FileWork, written: _Written, inserting: list[_Placement], ready: list[StoredEntry]) -> None:
        """Record what the rewrite did, in the records (each write fingerprint-guarded by what was read)."""
        removed_set = set(written.removed)
        placing = {p.stored.id.lower() for p in inserting}
        for record_id, unit in written.units.items():
            if record_id in placing:
                continue
            current = self.store.get(self.by_id[record_id].id) if record_id in self.by_id else None
            if current is not None and rec.key_of(current.entry) != unit.key:
                # Renumbered: an identical unit before it under the same heading was taken out or written in.
                self.store.update(
                    current, current.entry.with_meta(**rec.key_metadata(unit.key, rec.placement_of(current.entry)))
                )
        for placement in inserting:
            stored = placement.stored
            landed = written.units.get(stored.id.lower())
            if landed is None:
                # The rewrite was verified to hold it, so this is ours to find, not the agent's doing: the record stays
                # pending, and the next ingest adopts the unit it finds with its text.
                log.error(
                    "unit %s was written into %s but could not be matched; the next run adopts it",
                    stored.id,
                    job.relative,
                )
                self.report.refused.append(f"{stored.id}: written into {job.relative}, matched by the next run")
                continue
            self.store.update(stored, rec.placed_entry(stored.entry, landed))
            self.placed.add(stored.id.lower())
            self.report.placed.append(stored.id)
            log.info(
                "wrote unit %s into %s (%s): %s",
                stored.id,
                job.relative,
                landed.key.heading or "top",
                shown(stored.entry.content),
            )
        previous = _predecessors(written.before)
        for stored in ready:
            source_key = rec.key_of(stored.entry)
            if source_key is None:
                continue
            current = self.store.get(stored.id) or stored
            update = {rec.PLACEMENT: rec.REMOVED, rec.REMOVED_AT: format_timestamp(self.now)}
            if source_key in previous:
                update[rec.AFTER] = previous[source_key]  # where an undo or a restore puts it back
            self.store.update(current, current.entry.with_meta(**update))
            if source_key in removed_set:
                self.report.removed.append(stored.id)
                log.info(
                    "took unit %s out of %s (archived: %s); kept verbatim in the archive: %s",
                    stored.id,
                    job.relative,
                    stored.entry.archive_reason,
                    shown(stored.entry.content),
                )

    # ---- what could not be written --------------------------------------------------------------------------

    def _refuse(self, stored: StoredEntry, why: str) -> None:
        self.report.refused.append(f"{stored.id}: {why}")
        log.warning("unit %s not written: %s", stored.id, why)
        if stored.entry.meta(rec.FILE) is None:
            self.failed[stored.id.lower()] = why  # a successor: its merge is undone in the records

    def _keep_source(self, stored: StoredEntry, why: str) -> None:
        """A merge source whose successor is not in any file stays in its file, live again."""
        current = self.store.get(stored.id)
        if current is None or current.entry.is_live:
            return
        self.store.restore(current)
        note_restored(self.agent_dir, [stored.id], self.now)
        log.info("kept unit %s in its file and live: %s", stored.id, why)

    def _revert_unplaced(self) -> None:
        for key, why in self.failed.items():
            current = self.store.get(self.by_id[key].id) if key in self.by_id else None
            if current is None or not current.entry.is_live:
                continue
            for source_id in (current.entry.meta(MERGED_FROM) or "").split(","):
                source = self.store.get(source_id.strip()) if source_id.strip() else None
                if source is not None and source.entry.is_archived and rec.placement_of(source.entry) == rec.IN_FILE:
                    self._keep_source(source, why)
            marked = StoredEntry(
                current.entry.with_meta(**{rec.PLACEMENT: rec.REMOVED}), current.path, current.fingerprint
            )
            self.store.archive(marked, f"not written to the agent's files: {why}"[:500], self.now)
            self.report.reverted.append(f"{current.id}: {why}")


def _predecessors(units: list[Unit]) -> dict[UnitKey, str]:
    """Each unit's predecessor under the same heading: its hash, or "" for the first."""
    out: dict[UnitKey, str] = {}
    last: dict[str, str] = {}
    for unit in units:
        out[unit.key] = last.get(unit.key.heading, "")
        last[unit.key.heading] = unit.key.hash
    return out


def render(agent_dir: Path, profile: Profile, store: MemoryStore, now: datetime) -> RenderReport:
    """Write the unit records' pending changes into the agent's files. The caller holds the cycle lock."""
    report = _Render(agent_dir, profile, store, now).run()
    if report.removed or report.placed or report.refused or report.reverted:
        log.info(
            "render (%s): %d unit(s) taken out, %d written, %d left in append-only logs, %d refused, %d merge(s) "
            "undone, %d file(s) rewritten (%d re-read after the agent wrote)",
            profile.name,
            len(report.removed),
            len(report.placed),
            report.kept_in_log,
            len(report.refused),
            len(report.reverted),
            len(set(report.files_written)),
            report.conflicts,
        )
    return report


__all__ = ["RenderReport", "render"]
