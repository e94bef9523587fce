"""The purge beside RockBot: a design its memory audit accepts, and its own purge cannot undo.

What RockBot does (read at the commits cited):

* its **audit** (MemoryAuditAnalyzer.Analyze @26053e10) counts an id gone since its previous run as *purged* only
  when that run saw it archived, ``Dream:MemoryArchiveRetention > 0`` and ``archivedAt + retention < now``; any
  other disappearance is ``HardDeletedOutsidePurge``, an alert (MemoryAuditInvariants @092f8885, limit 0), and with
  ``MemoryAudit:PauseConsolidationOnAlert`` its service writes the pause marker (MemoryAuditService @0969bf1f).
  ``merge-chain-unbroken`` is an alert too: an entry archived ``merged into X`` while X exists nowhere;
* its **purge** (``RunArchivePurgePassAsync``, DreamService.cs @05346ff0; ``PurgeArchivedAsync``, FileMemoryStore
  @8a7e360e) runs first in every dream cycle, whatever its toggles say, and deletes every entry archived before
  ``now - retention`` that is below its high-value floor (``IsProtectedFromPruning``: importance >= 0.80f or
  reinforcement >= 5), with no other check.

So, beside RockBot (docs/rockbot.md, "Running beside RockBot's audit"): RockBot's retention stays on and equal to
dreamkeeper's (``Dream__MemoryArchiveRetention=90.00:00:00``, ``retentionDays: 90``), and dreamkeeper's purge

1. deletes only what the audit will count as purged: strictly after RockBot's window, never before dreamkeeper's
   own (the later of the two), and nothing at all while RockBot's retention is zero (every purge would be an alert);
2. never deletes an entry another archived entry names as its merge successor (``merged into X``): the audit's
   ``merge-chain-unbroken``;
3. keeps what it kept before (the high-value floor, the last record of a specific), and **holds** every entry it
   keeps that RockBot's purge would delete (below RockBot's floor) above that floor, ``hold_ahead_days`` before
   RockBot's window closes: its importance is raised to RockBot's floor, its own importance kept in
   ``dreamkeeperHeldImportance`` (with ``dreamkeeperHeldFor``, the reason, and ``dreamkeeperHeldAt``). RockBot's
   purge keeps it then, as it keeps any high-value entry ("kept above the high-value floor"); a ``restore`` puts the
   importance back, and a hold whose reason has gone is released (the entry is then purged as any other).

The hold uses the one means RockBot's purge has to keep an archived entry, its floor, on an entry that is
archived: importance is not read for anything else there (archived entries are never searched, decayed or
offered). The agent must reload its files after a cycle (coordination ``Stop`` or ``RestartAfter``): RockBot's purge
acts on the index it loaded at start.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from dreamkeeper.consolidation.agent_config import format_timespan
from dreamkeeper.consolidation.agent_view import AgentView
from dreamkeeper.consolidation.clock import ClockCheck
from dreamkeeper.consolidation.counts import CycleCounts
from dreamkeeper.consolidation.format_stages import KeepFn, kept_by_format
from dreamkeeper.consolidation.purge import LastRecords
from dreamkeeper.consolidation.quarantine import screened
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.consolidation.stages import CycleContext, Purged
from dreamkeeper.coverage import Vocabulary
from dreamkeeper.formats import ROCKBOT
from dreamkeeper.memory import (
    HELD_AT,
    HELD_FOR,
    HELD_IMPORTANCE,
    REASON_MERGED_INTO,
    ConflictError,
    Entry,
    HighValueFloor,
    MemoryStore,
    ScanResult,
    StoredEntry,
    entry_summary,
    format_timestamp,
    shown,
    unheld,
)

log = logging.getLogger(__name__)

CHAIN = "merge successor of archived"


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


@dataclass(frozen=True)
class PurgeWindow:
    """How long archived entries are kept before dreamkeeper's purge may delete them, here and now."""

    retention: timedelta | None  # None: nothing is purged
    rockbot: timedelta | None  # RockBot's purge window when known and on (what the holds race against)
    note: str | None = None


def purge_window(settings: CycleSettings, view: AgentView | None) -> PurgeWindow:
    own = settings.retention
    known = view is not None and view.retention_source != "RockBot's default"
    if view is None or not known:
        return PurgeWindow(own, None)
    theirs = view.archive_retention
    if theirs <= timedelta(0):
        if not view.audit_enabled:
            return PurgeWindow(own, None)
        note = (
            f"nothing purged: RockBot's Dream:MemoryArchiveRetention is {format_timespan(theirs)} "
            f"({view.retention_source}), so its memory audit counts every purge as a hard delete outside the purge "
            f"(an alert); set it to {format_timespan(own or timedelta(days=90))} beside dreamkeeper"
        )
        return PurgeWindow(None, None, note)
    if own is None:
        note = (
            f"retentionDays 0 keeps archived entries here, but RockBot's own purge deletes them after {theirs.days} "
            f"days ({view.retention_source}); only what dreamkeeper's purge would keep (last records, high-value "
            "entries, named merge successors) is held from it"
        )
        return PurgeWindow(None, theirs, note)
    if theirs > own:
        note = (
            f"archived entries purged after {theirs.days} days, RockBot's retention ({view.retention_source}), not "
            f"{own.days}: its audit counts an earlier purge as a hard delete"
        )
        return PurgeWindow(theirs, theirs, note)
    return PurgeWindow(own, theirs)


def merge_targets(entries: Iterable[Entry]) -> set[str]:
    """The ids (lower-cased) that archived entries name as their successor: ``merged into X``, matched as the audit
    matches it (``StartsWith("merged into ", OrdinalIgnoreCase)``, target trimmed)."""
    targets: set[str] = set()
    for entry in entries:
        reason = entry.archive_reason
        if entry.archived_at is None or reason is None:
            continue
        if reason[: len(REASON_MERGED_INTO)].lower() == REASON_MERGED_INTO:
            target = reason[len(REASON_MERGED_INTO) :].strip()
            if target:
                targets.add(target.lower())
    return targets


def chain_kept(candidates: Sequence[StoredEntry], staying: Sequence[StoredEntry], kept: set[str]) -> dict[str, str]:
    """Of ``candidates`` (about to go), those an entry that stays names as its successor, to a fixed point (a kept
    entry keeps its own successor too)."""
    found: dict[str, str] = {}
    while True:
        holders = [s.entry for s in staying] + [s.entry for s in candidates if s.id in kept or s.id in found]
        targets = merge_targets(holders)
        added = {
            s.id: f"{CHAIN} entries (merge-chain-unbroken)"
            for s in candidates
            if s.id not in kept and s.id not in found and s.id.lower() in targets
        }
        if not added:
            return found
        found.update(added)


class KeepRule:
    """The store's ``keep`` rule for one purge: last records, then merge successors still named."""

    def __init__(
        self, entries: Sequence[StoredEntry] | Callable[[], Sequence[StoredEntry]], last_records: LastRecords
    ) -> None:
        self.entries = entries  # or how to list them: asked only when an entry is due
        self.last_records = last_records

    def __call__(self, due: Sequence[StoredEntry]) -> dict[str, str]:
        kept = dict(self.last_records.keep(due))
        due_ids = {s.id for s in due}
        entries = self.entries() if callable(self.entries) else self.entries
        staying = [s for s in entries if s.id not in due_ids]
        kept.update(chain_kept(due, staying, set(kept)))
        return kept


@dataclass(frozen=True)
class Hold:
    stored: StoredEntry
    updated: Entry
    reason: str
    release: bool = False  # the hold's reason has gone: the entry gets its own importance back


def plan_holds(
    entries: Sequence[StoredEntry],
    settings: CycleSettings,
    view: AgentView,
    window: PurgeWindow,
    last_records: LastRecords,
    now: datetime,
) -> list[Hold]:
    """Archived entries dreamkeeper keeps that RockBot's purge would delete within ``hold_ahead_days``: lift them
    to RockBot's floor; held entries dreamkeeper no longer keeps: release them."""
    if window.rockbot is None:
        return []
    theirs = HighValueFloor(importance=view.floor_importance, reinforcement=view.floor_reinforcement)
    horizon = now + timedelta(days=settings.rockbot.hold_ahead_days)
    exposed: list[StoredEntry] = []  # RockBot's purge deletes these by the horizon unless they are held
    for stored in entries:
        entry = stored.entry
        if entry.archived_at is None:
            continue
        if _aware(entry.archived_at) >= horizon - window.rockbot:
            continue
        if theirs.protects(unheld(entry)):
            continue
        exposed.append(stored)
    if not exposed:
        return []
    reasons: dict[str, str] = {}
    ours = settings.floor
    for stored in exposed:
        own = unheld(stored.entry)
        if ours.protects(own):
            reasons[stored.id] = f"above dreamkeeper's high-value floor ({ours.describe(own)})"
    originals = [StoredEntry(unheld(s.entry), s.path, s.fingerprint) for s in exposed if s.id not in reasons]
    reasons.update(last_records.keep(originals))
    exposed_ids = {s.id for s in exposed}
    staying = [s for s in entries if s.id not in exposed_ids]
    reasons.update(chain_kept(exposed, staying, set(reasons)))
    holds: list[Hold] = []
    for stored in exposed:
        entry = stored.entry
        held = entry.meta(HELD_IMPORTANCE) is not None
        reason = reasons.get(stored.id)
        if reason is None:
            if held:
                holds.append(Hold(stored, unheld(entry), "nothing keeps it any more", release=True))
            continue
        if held and entry.meta(HELD_FOR) == reason and theirs.protects(entry):
            continue
        own = unheld(entry)
        lifted = own.evolve(importance_score=max(own.importance_score, view.floor_importance))
        lifted = lifted.with_meta(
            **{HELD_IMPORTANCE: repr(own.importance_score), HELD_FOR: reason, HELD_AT: format_timestamp(now)}
        )
        holds.append(Hold(stored, lifted, reason))
    return holds


def apply_holds(store: MemoryStore, holds: Sequence[Hold]) -> tuple[int, int, int]:
    """Write the holds (fingerprint-guarded: an entry the agent wrote meanwhile is left, and held next cycle).
    Returns (held, released, conflicts)."""
    held = released = conflicts = 0
    for hold in holds:
        try:
            store.update(hold.stored, hold.updated)
        except ConflictError as exc:
            log.warning("purge hold of %s not written: %s", hold.stored.id, exc)
            conflicts += 1
            continue
        if hold.release:
            released += 1
            log.info(
                "released the purge hold on archived entry %s (%s); importance back to %.2f: %s",
                entry_summary(hold.updated),
                hold.reason,
                hold.updated.importance_score,
                shown(hold.updated.content),
            )
        else:
            held += 1
            log.info(
                "held archived entry %s above RockBot's high-value floor before its purge could delete it — %s "
                "(own importance %s kept in %s): %s",
                entry_summary(hold.updated),
                hold.reason,
                hold.updated.meta(HELD_IMPORTANCE),
                HELD_IMPORTANCE,
                shown(hold.updated.content),
            )
    return held, released, conflicts


def _own(stored: StoredEntry) -> StoredEntry:
    """The entry with its own importance, as the purge judges it (a hold lifted it: ``unheld``)."""
    if not stored.held:
        return stored
    entry = unheld(stored.entry)
    return stored if entry is stored.entry else StoredEntry(entry, stored.path, stored.fingerprint)


def purge_stage(
    context: CycleContext, vocabulary: Vocabulary, writing: Callable[..., None], clock: ClockCheck | None = None
) -> Purged:
    """The cycle's purge, as this module says: the window, the keep rule, then the holds. ``writing`` marks that
    the cycle wrote (with when it started, for a purge). Refused, with nothing written, when ``clock`` disagrees with
    the agent's history (clock.py: retention is an age)."""
    settings, store = context.settings, context.store
    context.stage("purge")
    window = purge_window(settings, context.agent)
    notes = (window.note,) if window.note else ()
    if not ((window.retention is not None and window.retention > timedelta(0)) or window.rockbot is not None):
        return Purged(notes=notes)
    if clock is not None and not clock.allows:
        refusal = clock.refusal("purge")
        log.warning("archive purge — %s", refusal)
        return Purged(counts=CycleCounts(clock_refusals=1), notes=(*notes, refusal))
    # One scan serves purge and snapshot: purge removes only the files it names, so the snapshot is that scan minus
    # the purged entries (a purge conflict means the agent wrote meanwhile: rescan). Screened first: purge never
    # deletes a file the engine could not read safely.
    scan: ScanResult | None = screened(store.scan(), store.root)
    assert scan is not None
    scanned = scan.entries  # the list itself: ``scan`` is dropped below once holds rewrite files
    rule = LastRecords.of_stored(scanned, vocabulary)
    # Held entries are judged with their own importance: a hold whose reason has gone ends. The purge looks only at
    # archived entries; the keep rule, asked only when one is due, at all of them (``KeepRule``).
    own = [_own(s) for s in scanned if s.is_archived]
    started = datetime.now(UTC)
    keep: KeepFn = KeepRule(lambda: [_own(s) for s in scanned], rule)
    if context.memory_format.name != ROCKBOT:
        # A Markdown format's records of units still in the agent's files (an append-only log's consolidated line)
        # are kept: purged, the next ingest would take the unit for new (format_stages.py).
        keep = kept_by_format(keep, context.memory_format)
    purge = store.purge(window.retention, settings.floor, context.now, entries=own, keep=keep)
    chained = sum(1 for _, why in purge.kept_by_rule if why.startswith(CHAIN))
    gone = frozenset(e.id for e in purge.purged)
    held = released = conflicts = 0
    if context.agent is not None and window.rockbot is not None:
        remaining = [s for s in scan.entries if s.id not in gone]
        holds = plan_holds(remaining, settings, context.agent, window, rule, context.now)
        if holds:
            writing()
            held, released, conflicts = apply_holds(store, holds)
            scan = None  # the holds rewrote files: the snapshot reads the corpus again
    counts = CycleCounts(
        purged=len(purge.purged),
        purge_kept_above_floor=len(purge.kept_above_floor),
        purge_kept_last_record=len(purge.kept_by_rule) - chained,
        purge_kept_chain=chained,
        purge_held=held,
        purge_released=released,
        conflicts=conflicts,
    )
    if purge.purged or purge.conflicts:
        writing(started)
    return Purged(scan, gone, purge.conflicts, counts, notes)


__all__ = [
    "CHAIN",
    "Hold",
    "KeepRule",
    "PurgeWindow",
    "apply_holds",
    "chain_kept",
    "merge_targets",
    "plan_holds",
    "purge_stage",
    "purge_window",
]
