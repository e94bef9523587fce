"""Planning the repair of stale write-backs: an agent's cached copies written over what earlier cycles did.

A caching agent (RockBot loads its index once, MarimerLLC/rockbot ``FileMemoryStore.cs`` @8a7e360e) writes back
the whole cached object on every save: an entry a cycle archived comes back live, a stamp or a fold's counters
vanish. Against the write-back index (``records.py``), each file of the snapshot is one of:

* **current**: it carries the newest marker of every change cycles made to it (or there were none);
* **stale**: same content as when a cycle changed it (its review hash), but written from an older cache:
  * an archived entry live again: archived again ("stale write-back; merged into X"), and what the agent changed
    since (reinforcement increments, a later lastSeenAt, a higher importance, tags and metadata it added) is
    carried into the live end of its successor chain, once: the carry is measured from the last copy of that
    cache already carried (``Archived.carried``), or else from what the successor received;
  * a live entry that lost in-place changes (stamps, a fold's counters, carries): those layers are written again
    on top of the agent's copy, which keeps the agent's own changes;
* **edited**: its content changed since: a new fact, left live (its review hash no longer matches: the gate
  offers it as unreviewed), and no longer tracked.

Every repair is a journal step (``update`` on the target, then ``archive`` of the stale copy, in one group: the
copy is archived only once its changes are carried), fingerprint-guarded like any cycle write, undone by
``dreamkeeper undo``, finished after a SIGKILL by recovery.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from dreamkeeper.consolidation.baseline import Counters
from dreamkeeper.consolidation.journal import Step
from dreamkeeper.consolidation.journal_steps import archive_step, update_step
from dreamkeeper.consolidation.writeback.records import Layer, Record, WriteBackIndex
from dreamkeeper.memory import (
    ARCHIVED_BY_CYCLE,
    BOOKKEEPING_KEYS,
    CARRIED_AT,
    REASON_EPHEMERAL,
    REASON_MERGED_INTO,
    REASON_STALE_WRITE_BACK,
    STALE_COPY_OF,
    Entry,
    ScanResult,
    StoredEntry,
    format_timestamp,
    review_hash,
    shown,
    successor_in,
)

log = logging.getLogger(__name__)

MAX_HOPS = 64  # a successor chain longer than this is not followed (it cannot be: each hop is a cycle's merge)


@dataclass(frozen=True)
class RepairPlan:
    """The journal steps of a repair and what they are for."""

    steps: tuple[Step, ...] = ()
    stale: int = 0  # stale copies to repair
    resurrected: int = 0  # of which archived entries live again
    edited: int = 0  # copies whose content changed: kept live as new facts
    carried: int = 0  # reinforcement increments carried into successors
    leaving: frozenset[Path] = frozenset()  # stale copies archived again
    stale_paths: frozenset[Path] = frozenset()  # every stale copy (archived again, or written again)
    notes: tuple[str, ...] = ()

    @property
    def touched(self) -> set[Path]:
        return {Path(step.path) for step in self.steps}

    @property
    def nothing(self) -> bool:
        """No step, no stale copy, no edited record, no note: what the repair of a quiet corpus finds."""
        return self == RepairPlan()


@dataclass
class _Stale:
    copy: StoredEntry
    record: Record
    depth: int  # layers its cache had

    @property
    def lineage(self) -> str:
        return self.record.lineage_key(self.depth)


@dataclass
class _Target:
    stored: StoredEntry
    image: Entry  # what it will be before the carry (restored, if it was a stale copy itself)
    restored: bool = False
    sources: list[tuple[_Stale, Layer]] = field(default_factory=list)


def plan_repairs(index: WriteBackIndex, scan: ScanResult, now: datetime) -> RepairPlan:
    """The repair of every stale copy in ``scan`` (pure, but for the index: records of edited entries, of entries
    the agent archived or restored itself, are dropped)."""
    if not len(index):
        return RepairPlan()
    resurrected: dict[str, _Stale] = {}
    restores: dict[str, _Stale] = {}
    edited = 0
    candidates = index.to_look_at(itertools.chain(scan.entries, scan.duplicates))
    for stored in _newest_first(candidates):
        key = stored.id.lower()
        if key in resurrected or key in restores:
            continue  # one copy of an id per cycle (two files of one id: the other is looked at next cycle)
        record = index.get(stored.id)
        assert record is not None
        kind = _classify(index, stored, record)
        if kind == "edited":
            edited += 1
        elif kind == "resurrected":
            resurrected[key] = _Stale(stored, record, record.lineage(stored.entry.metadata))
        elif kind == "restore":
            restores[key] = _Stale(stored, record, record.lineage(stored.entry.metadata))
    if not resurrected and not restores:
        return RepairPlan(edited=edited)
    primary = {s.id.lower(): s for s in scan.entries}
    return _Planner(index, primary, resurrected, restores, now).plan(edited)


def _newest_first(stored: Iterable[StoredEntry]) -> list[StoredEntry]:
    """Two files of one id (the agent wrote to the path of a category it cached): the newest is the agent's."""
    return sorted(stored, key=lambda s: -s.fingerprint.mtime_ns)


def _classify(index: WriteBackIndex, stored: StoredEntry, record: Record) -> str:
    entry = stored.entry
    meta = entry.metadata or {}
    if record.archived is not None:
        ours = ARCHIVED_BY_CYCLE in meta or STALE_COPY_OF in meta
        if entry.is_archived:
            if not ours:  # archived by the agent itself, over ours: its decision, nothing to watch any more
                record.archived = None
                index.changed = True
            return "current"
        if ours:
            log.info("entry %s was restored by the agent itself (its copy knew the archive); left live", stored.id)
            record.archived = None
            index.changed = True
            return "current"
    if not entry.is_live or (record.archived is None and record.lineage(meta) == len(record.layers)):
        return "current"
    if record.archived is None and (edits := _edited_bookkeeping(record, meta)):
        # A cache holds what a cycle wrote earlier, or nothing: a value no cycle wrote was set on purpose (by hand,
        # or by a tool); it is the entry's state now, not a stale copy to write over.
        log.info(
            "entry %s has bookkeeping no cycle wrote (%s); taken as a deliberate edit and left as is",
            stored.id,
            ", ".join(f"{k}={v}" for k, v in sorted(edits.items())),
        )
        index.drop(stored.id)
        return "current"
    if record.h is None or review_hash(entry.content) != record.h:
        log.info(
            "entry %s came back with new content (%s): a new fact, kept live and reviewed as new: %s",
            stored.id,
            "archived by a cycle" if record.archived is not None else "changed by a cycle",
            shown(entry.content),
        )
        index.drop(stored.id)
        return "edited"
    return "resurrected" if record.archived is not None else "restore"


def _edited_bookkeeping(record: Record, meta: dict[str, str]) -> dict[str, str]:
    """Bookkeeping values of a copy that no cycle's layer wrote, in a layer the copy otherwise shows it descends from.

    A stale copy comes from a cache loaded before a layer: it shows none of that layer's values (each key holds an
    older one, possibly from before any record). A copy that carries some of a layer's values but holds, for
    another key of it, a value no layer wrote descends from the layer and was changed on purpose after it.
    """
    depth = record.lineage(meta)
    known: dict[str, set[str]] = {}
    for layer in record.layers[:depth]:
        for key, value in layer.marker.items():
            known.setdefault(key, set()).add(value)
    edits: dict[str, str] = {}
    for layer in record.layers[depth:]:
        shown = [k for k, v in layer.marker.items() if meta.get(k) == v and v not in known.get(k, ())]
        if not shown:
            continue  # nothing of this layer: written from a cache older than it
        for key, value in layer.marker.items():
            held = meta.get(key)
            if held is not None and held != value and held not in known.get(key, ()):
                edits[key] = held
    return edits


class _Planner:
    def __init__(
        self,
        index: WriteBackIndex,
        primary: dict[str, StoredEntry],
        resurrected: dict[str, _Stale],
        restores: dict[str, _Stale],
        now: datetime,
    ) -> None:
        self.index = index
        self.primary = primary
        self.resurrected = resurrected
        self.restores = restores
        self.now = now
        self.steps: list[Step] = []
        self.group = 0

    def plan(self, edited: int) -> RepairPlan:
        targets: dict[str, _Target] = {}
        orphans: list[_Stale] = []
        for stale in self.resurrected.values():
            target = self._target(stale)
            if target is None:
                orphans.append(stale)
                continue
            slot = targets.get(target.id.lower())
            if slot is None:
                restore = self.restores.pop(target.id.lower(), None)
                image = _apply(target.entry, restore.record.layers[restore.depth :]) if restore else target.entry
                slot = targets[target.id.lower()] = _Target(target, image, restored=restore is not None)
            slot.sources.append((stale, _carry(stale)))
        for restore in self.restores.values():
            self._restore(restore)
        carried = 0
        for slot in targets.values():
            carried += self._carry_into(slot)
        kept = [stale for stale in orphans if _archived(stale).successor is not None]
        for stale in kept:
            # Merged into a successor whose chain ends in no live entry (archived since, undone, purged): archived
            # again, its facts would reach nothing live (issue 22: 57 live facts orphaned this way after an undo).
            # It stays live, a fact of its own from now on.
            log.warning(
                "stale write-back of %s (archived by %s: %s): kept live, its successor chain ends in no live entry: %s",
                stale.copy.id,
                _archived(stale).journal,
                _archived(stale).reason,
                shown(stale.copy.entry.content),
            )
            self.index.drop(stale.copy.id)
            del self.resurrected[stale.copy.id.lower()]
        for stale in orphans:
            if _archived(stale).successor is not None:
                continue
            self.group += 1
            self.steps.append(self._rearchive(stale, None, 0))
            log.info(
                "stale write-back of %s (archived by %s: %s): archived again with the agent's copy, no live "
                "successor to carry its changes into: %s",
                stale.copy.id,
                _archived(stale).journal,
                _archived(stale).reason,
                shown(stale.copy.entry.content),
            )
        n_stale = len(self.resurrected) + len(self.restores) + sum(1 for t in targets.values() if t.restored)
        stale_paths = {s.copy.path for s in self.resurrected.values()} | {s.copy.path for s in self.restores.values()}
        stale_paths |= {t.stored.path for t in targets.values() if t.restored}
        notes = []
        if kept:
            notes.append(
                f"stale write-back: {len(kept)} entr(ies) live again whose successor chain ends in no live entry kept "
                f"live: {', '.join(s.copy.id for s in kept[:20])}"
            )
        if self.resurrected:
            notes.append(
                f"stale write-back: {len(self.resurrected)} archived entr(ies) live again (an agent wrote its cached "
                f"copy back) archived again, {carried} reinforcement(s) carried into their successors"
            )
        restored = n_stale - len(self.resurrected)
        if restored:
            notes.append(f"stale write-back: {restored} entr(ies) had stamps or counters a cycle wrote restored")
        return RepairPlan(
            steps=tuple(self.steps),
            stale=n_stale,
            resurrected=len(self.resurrected),
            edited=edited,
            carried=carried,
            leaving=frozenset(s.copy.path for s in self.resurrected.values()),
            stale_paths=frozenset(stale_paths),
            notes=tuple(notes),
        )

    # ---- where a stale copy's changes go ----------------------------------------------------------------------

    def _target(self, stale: _Stale) -> StoredEntry | None:
        """The live end of the successor chain: a successor archived since (merged again) is followed."""
        successor = _archived(stale).successor
        seen: set[str] = set()
        while successor and successor.lower() not in seen and len(seen) < MAX_HOPS:
            key = successor.lower()
            seen.add(key)
            stored = self.primary.get(key)
            if stored is None:
                return None  # purged, or never there: the stale copy keeps its changes in its own archive
            if stored.entry.is_live and key not in self.resurrected:
                return stored
            record = self.index.get(successor)
            if record is not None and record.archived is not None:
                successor = record.archived.successor
            else:
                successor = successor_in(stored.entry.archive_reason)
        return None

    def _carry_into(self, target: _Target) -> int:
        self.group += 1
        carry = _merged([layer for _, layer in target.sources], self.now)
        sources = [stale for stale, _ in target.sources]
        after = _apply(target.image, [carry])
        ids = ", ".join(s.copy.id for s in sources)
        self.steps.append(
            update_step(
                target.stored,
                after,
                self.group,
                f"carried the stale changes of [{ids}] ({carry.rc} reinforcement(s)) into",
                baseline={
                    "repair": "carry+restore" if target.restored else "carry",
                    "layer": {"marker": carry.marker, "changes": carry.changes()},
                    # Carried once this write is done, whether or not each copy's archive then succeeds (the agent
                    # may write it yet again): the next copy of that cache is measured from this one.
                    "sources": [_carried_copy(stale) for stale in sources],
                },
            )
        )
        for stale, layer in target.sources:
            self.steps.append(self._rearchive(stale, target.stored.id, layer.rc))
            log.info(
                "stale write-back of %s (archived by %s: %s): the agent wrote its cached copy back; archived again, "
                "%d reinforcement(s) carried into %s: %s",
                stale.copy.id,
                _archived(stale).journal,
                _archived(stale).reason,
                layer.rc,
                target.stored.id,
                shown(stale.copy.entry.content),
            )
        return carry.rc

    def _rearchive(self, stale: _Stale, target: str | None, carried: int) -> Step:
        archived = _archived(stale)
        original = archived.reason
        if original.startswith(REASON_STALE_WRITE_BACK):
            original = original[len(REASON_STALE_WRITE_BACK) :]
        reason = REASON_STALE_WRITE_BACK + (REASON_MERGED_INTO + target if target else original or REASON_EPHEMERAL)
        return archive_step(
            stale.copy,
            self.group,
            reason,
            "stale",
            metadata={STALE_COPY_OF: archived.journal},
            baseline={
                "repair": "rearchive",
                **_carried_copy(stale),
                "of": archived.journal,
                "target": target,
                "carried": carried,
            },
        )

    def _restore(self, restore: _Stale) -> None:
        self.group += 1
        missing = restore.record.layers[restore.depth :]
        after = _apply(restore.copy.entry, missing)
        self.steps.append(
            update_step(
                restore.copy,
                after,
                self.group,
                f"restored what a stale cached copy dropped ({len(missing)} change(s) of earlier cycles) on",
                baseline={"repair": "restore", "depth": restore.depth},
            )
        )
        log.info(
            "stale write-back of %s: the agent wrote a cached copy without %d change(s) of earlier cycles (%s); "
            "written again on top of its copy: %s",
            restore.copy.id,
            len(missing),
            ", ".join(sorted({k for layer in missing for k in layer.marker})),
            restore.copy.entry.content,
        )


def _carried_copy(stale: _Stale) -> dict[str, Any]:
    return {"id": stale.copy.id, "lineage": stale.lineage, "copy": Counters.of(stale.copy.entry).to_json()}


def _archived(stale: _Stale) -> Any:
    assert stale.record.archived is not None
    return stale.record.archived


def _carry(stale: _Stale) -> Layer:
    """What the agent changed since the copy of its cache last carried (or since the archive): once."""
    archived = _archived(stale)
    base = archived.carried.get(stale.lineage)
    if base is not None:
        counters = base[1]
    else:
        # The archive's image, less what the layers its cache lacked added in place (they are in the image).
        missing = sum(layer.rc for layer in stale.record.layers[stale.depth :])
        image = archived.image
        counters = Counters(image.rc - missing, image.seen, image.importance, image.tags, image.meta)
    entry = stale.copy.entry
    copy = Counters.of(entry)
    return Layer(
        journal="",
        marker={},
        rc=max(0, copy.rc - counters.rc),
        tags=tuple(t for t in copy.tags if t not in counters.tags),
        filled={
            k: v for k, v in (entry.metadata or {}).items() if k not in BOOKKEEPING_KEYS and k not in counters.meta
        },
        seen=copy.seen if _when(copy.seen) > _when(counters.seen) else None,
        importance=copy.importance if copy.importance > counters.importance else None,
    )


def _merged(layers: Sequence[Layer], now: datetime) -> Layer:
    """Several stale copies' changes, into one carry (one write of the target)."""
    tags: list[str] = []
    filled: dict[str, str] = {}
    for layer in layers:
        tags += [t for t in layer.tags if t not in tags]
        for k, v in layer.filled.items():
            filled.setdefault(k, v)
    seens = [layer.seen for layer in layers if layer.seen]
    importances = [layer.importance for layer in layers if layer.importance is not None]
    return Layer(
        journal="",
        marker={CARRIED_AT: format_timestamp(now)},
        rc=sum(layer.rc for layer in layers),
        tags=tuple(tags),
        filled=filled,
        seen=max(seens, key=_when) if seens else None,
        importance=max(importances) if importances else None,
    )


def _apply(entry: Entry, layers: Sequence[Layer]) -> Entry:
    """``entry`` with layers written on top: markers set, counts added, the rest merged as a fold merges them."""
    if not layers:
        return entry
    metadata = dict(entry.metadata or {})
    tags = list(entry.tags)
    rc, created, seen, importance = entry.reinforcement_count, entry.created_at, entry.seen_at, entry.importance_score
    for layer in layers:
        metadata.update(layer.marker)
        for k, v in layer.filled.items():
            metadata.setdefault(k, v)
        tags += [t for t in layer.tags if t not in tags]
        rc += layer.rc
        if layer.created is not None:
            created = min(created, _when(layer.created))
        if layer.seen is not None:
            seen = max(seen, _when(layer.seen))
        if layer.importance is not None:
            importance = max(importance, layer.importance)
    changes: dict[str, Any] = {"metadata": metadata, "tags": tags, "reinforcement_count": rc}
    if created != entry.created_at:
        changes["created_at"] = created
    if seen != entry.seen_at:
        changes["last_seen_at"] = seen
    if importance != entry.importance_score:
        changes["importance_score"] = importance
    return entry.evolve(**changes)


def _when(text: str) -> datetime:
    return datetime.fromisoformat(text)
