"""RockBot's memory audit and archive purge, ported from its source (MarimerLLC/rockbot, read with read_file):

* ``MemoryStoreWalker.WalkAsync`` (RockBot.Host @9685fbec): every ``*.json`` below the memory root, files under
  ``.embeddings`` skipped; a file that does not deserialize, or has no id, is *malformed*;
* ``MemoryAuditAnalyzer.Analyze`` (@26053e10): the id diff against the previous run's state (created, archived
  since, gone), **purged** = gone, archived at the previous run, ``retention > 0`` and ``archivedAt + retention <
  now``; everything else gone is ``HardDeletedOutsidePurge``; net growth per day (only over ``MinRateWindow``),
  merge-chain depths, rejected merges since the last run, the dream-pass cadence from ``dream-pass-ledger.json``,
  the purge outlook;
* ``MemoryAuditInvariants.Check`` / ``ComputeStatus`` (@092f8885): the structural invariants (``merged-from-
  resolves``, ``archive-fields-present``, ``live-not-merge-source``, ``merge-chain-unbroken``, ``no-malformed-
  files``), the loss ones (``no-hard-delete-outside-purge``, ``loss-percent-threshold``) and the thresholds
  (``no-repeated-rejection``, ``net-growth-threshold``, ``chain-depth-threshold``, ``rejected-merges-threshold``);
  *alert* when one of the three alert invariants fails, *warning* for any other, *healthy* for none;
* ``MemoryAuditService.MaybePauseConsolidationAsync`` (@0969bf1f): with ``PauseConsolidationOnAlert``, the marker
  ``{reason, snapshotId, pausedAt}`` is written on a hard delete outside the purge or a loss-percent finding;
* ``DreamService.RunArchivePurgePassAsync`` (@05346ff0) with ``FileMemoryStore.PurgeArchivedAsync`` (@8a7e360e):
  archived entries with ``ArchivedAt < now - retention`` are deleted (file and ``.embeddings/{id}.bin``, emptied
  category directories pruned upward) unless ``IsProtectedFromPruning`` (float32 importance >= the floor, or
  reinforcement >= its count); nothing when retention <= 0.

Defaults are RockBot's (``MemoryAuditOptions`` @60d98521, ``DreamOptions`` @05346ff0). The port is data in, data
out, as the analyzer is; the year simulation (``bench/audit_year.py``) runs it after every cycle.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

MERGED_FROM = "mergedFrom"
MERGED_AT = "mergedAt"
REJECTED_CLUSTER = "consolidationRejectedCluster"
REJECTED_AT = "consolidationRejectedAt"
MERGED_INTO = "merged into "
CONSOLIDATION_PASS = "memory consolidation"
ALERT_INVARIANTS = frozenset({"no-hard-delete-outside-purge", "loss-percent-threshold", "merge-chain-unbroken"})


@dataclass(frozen=True)
class AuditOptions:
    """The ``MemoryAuditOptions`` the analyzer and the pause read (@60d98521 defaults)."""

    min_rate_window: timedelta = timedelta(hours=12)
    max_net_growth_per_day: float = 5
    max_merge_chain_depth: int = 2
    max_rejected_merges_per_week: int = 5
    max_hard_deletes_outside_purge: int = 0
    max_loss_percent: float = 10
    repeated_rejection_runs: int = 3
    purge_warning_days: int = 7
    pause_on_alert: bool = False


@dataclass(frozen=True)
class DreamOptions:
    """The ``DreamOptions`` the audit and the purge read (@05346ff0 defaults)."""

    retention: timedelta = timedelta(days=90)
    floor_importance: float = 0.80
    floor_reinforcement: int = 5


@dataclass(frozen=True)
class AuditEntry:
    id: str
    archived_at: datetime | None
    archive_reason: str | None
    reinforcement: int
    importance: np.float32
    category: str | None
    metadata: Mapping[str, str]
    path: Path | None = None
    content: str = ""

    @property
    def merged_from(self) -> list[str]:
        raw = self.metadata.get(MERGED_FROM, "")
        return [part.strip() for part in raw.split(",") if part.strip()]


@dataclass(frozen=True)
class Row:
    """``MemoryAuditEntryRow``."""

    id: str
    archived: bool
    archived_at: datetime | None
    reinforcement: int
    merged_from_count: int
    category: str | None


@dataclass
class AuditState:
    """``MemoryAuditState``: what the next run compares against."""

    taken_at: datetime
    rows: list[Row]
    rejected_cluster_runs: dict[str, int] = field(default_factory=dict)


@dataclass
class Snapshot:
    taken_at: datetime
    live: int
    archived: int
    malformed: int
    created: int = 0
    archived_since: int = 0
    hard_deleted: int = 0
    purged: int = 0
    hard_deleted_outside_purge: int = 0
    net_growth_per_day: float | None = None
    max_chain_depth: int = 0
    rejected_sources: int = 0
    repeated_rejections: int = 0
    dream_passes_run: int = 0
    consolidation_last_run: datetime | None = None
    purge_due: int = 0
    purge_due_high_value: int = 0
    invariants: dict[str, list[str]] = field(default_factory=dict)

    @property
    def status(self) -> str:
        if not self.invariants:
            return "healthy"
        return "alert" if ALERT_INVARIANTS & self.invariants.keys() else "warning"

    @property
    def alerts(self) -> list[str]:
        return sorted(ALERT_INVARIANTS & self.invariants.keys())


# ---- reading, as System.Text.Json does (camelCase, case-insensitive) -----------------------------------------------

_FRACTION = re.compile(r"(\.\d{6})\d+")


def parse_time(text: object) -> datetime | None:
    """A DateTimeOffset as System.Text.Json writes it (the round-trip form, up to 7 fraction digits)."""
    if not isinstance(text, str):
        return None
    try:
        value = datetime.fromisoformat(_FRACTION.sub(r"\1", text.replace("Z", "+00:00")))
    except ValueError:
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def read_entry(path: Path) -> AuditEntry | None:
    """One file as ``JsonSerializer.Deserialize<MemoryEntry>`` reads it; None when it would be malformed."""
    try:
        obj = json.loads(path.read_bytes().decode("utf-8-sig"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(obj, dict):
        return None
    fields = {str(k).lower(): v for k, v in obj.items()}
    entry_id = fields.get("id")
    if not isinstance(entry_id, str) or not entry_id.strip():
        return None
    metadata = fields.get("metadata") if isinstance(fields.get("metadata"), dict) else {}
    rc = fields.get("reinforcementcount", 1)
    importance = fields.get("importancescore", 0.5)
    return AuditEntry(
        id=entry_id,
        archived_at=parse_time(fields.get("archivedat")),
        archive_reason=fields.get("archivereason") if isinstance(fields.get("archivereason"), str) else None,
        reinforcement=rc if isinstance(rc, int) and not isinstance(rc, bool) else 1,
        importance=np.float32(importance if isinstance(importance, int | float) else 0.5),
        category=fields.get("category") if isinstance(fields.get("category"), str) else None,
        metadata={str(k): str(v) for k, v in (metadata or {}).items()},
        path=path,
        content=fields.get("content") if isinstance(fields.get("content"), str) else "",
    )


def walk(memory_root: Path) -> tuple[list[AuditEntry], int]:
    """``MemoryStoreWalker.WalkAsync``: the entries and the number of malformed files."""
    entries: list[AuditEntry] = []
    malformed = 0
    if not memory_root.is_dir():
        return entries, 0
    for directory, subdirs, files in os.walk(memory_root):
        subdirs[:] = [d for d in subdirs if d != ".embeddings"]
        for name in files:
            if not name.endswith(".json"):
                continue
            entry = read_entry(Path(directory) / name)
            if entry is None:
                malformed += 1
            else:
                entries.append(entry)
    return entries, malformed


def read_ledger(agent_dir: Path) -> dict[str, datetime]:
    """``MemoryAuditService.ReadPassLedgerAsync``: pass name -> lastRunAt (an unreadable ledger reads as empty)."""
    try:
        data = json.loads((agent_dir / "dream-pass-ledger.json").read_text(encoding="utf-8-sig"))
    except (OSError, ValueError):
        return {}
    out: dict[str, datetime] = {}
    if isinstance(data, dict):
        for name, record in data.items():
            if isinstance(record, dict):
                fields = {str(k).lower(): v for k, v in record.items()}
                at = parse_time(fields.get("lastrunat"))
                if at is not None and isinstance(fields.get("fingerprint"), str) and fields["fingerprint"].strip():
                    out[str(name)] = at
    return out


# ---- the analyzer -------------------------------------------------------------------------------------------------


def is_protected(entry: AuditEntry, dream: DreamOptions) -> bool:
    """``DreamService.IsProtectedFromPruning``, in float32."""
    return bool(entry.importance >= np.float32(dream.floor_importance)) or entry.reinforcement >= (
        dream.floor_reinforcement
    )


def chain_depths(by_id: Mapping[str, AuditEntry]) -> dict[str, int]:
    """``MemoryAuditAnalyzer.ComputeChainDepths``."""
    depths: dict[str, int] = {}
    visiting: set[str] = set()

    def depth(key: str) -> int:
        if key in depths:
            return depths[key]
        if key in visiting:
            return 0
        visiting.add(key)
        value = 0
        entry = by_id.get(key)
        if entry is not None:
            sources = entry.merged_from
            for source in sources:
                if source.lower() in by_id:
                    value = max(value, 1 + depth(source.lower()))
            if value == 0 and sources:
                value = 1
        visiting.discard(key)
        depths[key] = value
        return value

    for key in by_id:
        depth(key)
    return depths


def analyze(
    entries: Sequence[AuditEntry],
    malformed: int,
    previous: AuditState | None,
    now: datetime,
    dream: DreamOptions = DreamOptions(),
    options: AuditOptions = AuditOptions(),
    ledger: Mapping[str, datetime] | None = None,
) -> tuple[Snapshot, AuditState]:
    ledger = ledger or {}
    live = [e for e in entries if e.archived_at is None]
    archived = [e for e in entries if e.archived_at is not None]
    by_id = {e.id.lower(): e for e in entries}
    rows = previous.rows if previous is not None else []
    previous_by_id = {r.id.lower(): r for r in rows}
    snapshot = Snapshot(taken_at=now, live=len(live), archived=len(archived), malformed=malformed)
    if previous is not None:
        snapshot.created = sum(1 for key in by_id if key not in previous_by_id)
        snapshot.archived_since = sum(
            1 for e in archived if (row := previous_by_id.get(e.id.lower())) is not None and not row.archived
        )
    gone = [r for r in rows if r.id.lower() not in by_id]
    retention = dream.retention
    purged = sum(
        1
        for r in gone
        if r.archived and r.archived_at is not None and retention > timedelta(0) and r.archived_at + retention < now
    )
    snapshot.hard_deleted, snapshot.purged = len(gone), purged
    snapshot.hard_deleted_outside_purge = len(gone) - purged
    previous_live = sum(1 for r in rows if not r.archived)
    elapsed = (now - previous.taken_at).total_seconds() / 86400 if previous and now > previous.taken_at else 0.0
    rate_window = previous is not None and elapsed > 0 and elapsed >= options.min_rate_window.total_seconds() / 86400
    if rate_window:
        snapshot.net_growth_per_day = round((len(live) - previous_live) / elapsed, 2)
    depths = chain_depths(by_id)
    snapshot.max_chain_depth = max((depths.get(e.id.lower(), 0) for e in live), default=0)
    rejected_ids, runs = _rejections(entries, previous)
    snapshot.rejected_sources = len(rejected_ids)
    snapshot.repeated_rejections = sum(1 for v in runs.values() if v >= options.repeated_rejection_runs)
    if previous is not None:
        snapshot.dream_passes_run = sum(1 for at in ledger.values() if at > previous.taken_at)
    snapshot.consolidation_last_run = next(
        (at for name, at in ledger.items() if name.lower() == CONSOLIDATION_PASS), None
    )
    horizon = now + timedelta(days=options.purge_warning_days)
    if retention > timedelta(0):
        due = [e for e in archived if e.archived_at is not None and e.archived_at + retention <= horizon]
        snapshot.purge_due = len(due)
        snapshot.purge_due_high_value = sum(1 for e in due if is_protected(e, dream))
    snapshot.invariants = check(
        entries, snapshot, dream, options, now, elapsed if rate_window else 0.0, previous_live if previous else None
    )
    state = AuditState(
        taken_at=now,
        rows=[
            Row(e.id, e.archived_at is not None, e.archived_at, e.reinforcement, len(e.merged_from), e.category)
            for e in entries
        ],
        rejected_cluster_runs=runs,
    )
    return snapshot, state


def _rejections(entries: Sequence[AuditEntry], previous: AuditState | None) -> tuple[list[str], dict[str, int]]:
    cutoff = previous.taken_at if previous is not None else None
    ids: list[str] = []
    clusters: set[str] = set()
    for entry in entries:
        at = parse_time(entry.metadata.get(REJECTED_AT))
        if at is None or (cutoff is not None and at <= cutoff):
            continue
        ids.append(entry.id)
        cluster = entry.metadata.get(REJECTED_CLUSTER, "")
        if cluster.strip():
            clusters.add(cluster.lower())
    carried = {k.lower(): v for k, v in (previous.rejected_cluster_runs if previous else {}).items()}
    return ids, {cluster: carried.get(cluster, 0) + 1 for cluster in clusters}


def _merged_into(entry: AuditEntry) -> str | None:
    reason = entry.archive_reason
    if reason is None or reason[: len(MERGED_INTO)].lower() != MERGED_INTO:
        return None
    target = reason[len(MERGED_INTO) :].strip()
    return target or None


def check(
    entries: Sequence[AuditEntry],
    snapshot: Snapshot,
    dream: DreamOptions,
    options: AuditOptions,
    now: datetime,
    elapsed_days: float,
    previous_live: int | None,
) -> dict[str, list[str]]:
    """``MemoryAuditInvariants.Check``: invariant name -> the ids it names (empty for the count-only ones)."""
    found: dict[str, list[str]] = {}
    by_id = {e.id.lower(): e for e in entries}
    horizon = now - dream.retention if dream.retention > timedelta(0) else datetime.min.replace(tzinfo=UTC)
    dangling = [
        e.id
        for e in entries
        if (at := parse_time(e.metadata.get(MERGED_AT))) is not None
        and at > horizon
        and any(s.lower() not in by_id for s in e.merged_from)
    ]
    if dangling:
        found["merged-from-resolves"] = dangling
    broken_fields = [e.id for e in entries if (e.archived_at is not None) != bool((e.archive_reason or "").strip())]
    if broken_fields:
        found["archive-fields-present"] = broken_fields
    sources = {s.lower() for e in entries for s in e.merged_from}
    live_sources = [e.id for e in entries if e.archived_at is None and e.id.lower() in sources]
    if live_sources:
        found["live-not-merge-source"] = live_sources
    broken = [e.id for e in entries if (t := _merged_into(e)) is not None and t.lower() not in by_id]
    if broken:
        found["merge-chain-unbroken"] = broken
    if snapshot.malformed > 0:
        found["no-malformed-files"] = []
    if snapshot.hard_deleted_outside_purge > options.max_hard_deletes_outside_purge:
        found["no-hard-delete-outside-purge"] = []
    if previous_live:
        loss = (previous_live - snapshot.live) * 100.0 / previous_live
        if loss > options.max_loss_percent:
            found["loss-percent-threshold"] = []
    if snapshot.repeated_rejections > 0:
        found["no-repeated-rejection"] = []
    if snapshot.net_growth_per_day is not None and snapshot.net_growth_per_day > options.max_net_growth_per_day:
        found["net-growth-threshold"] = []
    depths = chain_depths(by_id)
    deep = [
        e.id for e in entries if e.archived_at is None and depths.get(e.id.lower(), 0) > options.max_merge_chain_depth
    ]
    if deep:
        found["chain-depth-threshold"] = deep
    if elapsed_days > 0 and snapshot.rejected_sources * 7.0 / elapsed_days > options.max_rejected_merges_per_week:
        found["rejected-merges-threshold"] = []
    return found


def save_state(audit_dir: Path, state: AuditState, snapshot_id: str) -> Path:
    """``MemoryAuditState.SaveAsync``: ``{audit dir}/state.json``, camelCase, indented, nulls written."""

    def when(value: datetime | None) -> str | None:
        return value.isoformat() if value is not None else None

    body = {
        "takenAt": when(state.taken_at),
        "snapshotId": snapshot_id,
        "entries": [
            {
                "id": r.id,
                "archived": r.archived,
                "archivedAt": when(r.archived_at),
                "reinforcementCount": r.reinforcement,
                "mergedFromCount": r.merged_from_count,
                "category": r.category,
            }
            for r in state.rows
        ],
        "rejectedClusterRuns": state.rejected_cluster_runs,
        "rejectedSourceIds": [],
        "processStarts": [],
        "lastEvalAt": None,
        "lastEvalFingerprint": None,
        "lastDigestAt": None,
    }
    audit_dir.mkdir(parents=True, exist_ok=True)
    path = audit_dir / "state.json"
    path.write_text(json.dumps(body, indent=2), encoding="utf-8")
    return path


def pause_reason(snapshot: Snapshot, options: AuditOptions) -> str | None:
    """``MemoryAuditService.MaybePauseConsolidationAsync``: why the marker is written, or None."""
    if not options.pause_on_alert:
        return None
    if snapshot.hard_deleted_outside_purge > options.max_hard_deletes_outside_purge:
        return f"{snapshot.hard_deleted_outside_purge} entry(s) were hard-deleted outside the retention purge"
    if "loss-percent-threshold" in snapshot.invariants:
        return f"live entries dropped more than {options.max_loss_percent:.0f}% since the previous snapshot"
    return None


def write_pause_marker(audit_dir: Path, reason: str, snapshot_id: str, now: datetime) -> Path:
    """The marker as the service writes it (camelCase, indented, nulls omitted)."""
    audit_dir.mkdir(parents=True, exist_ok=True)
    path = audit_dir / "consolidation-paused.json"
    body: dict[str, Any] = {"reason": reason, "snapshotId": snapshot_id, "pausedAt": now.isoformat()}
    path.write_text(json.dumps(body, indent=2), encoding="utf-8")
    return path


# ---- RockBot's own purge ------------------------------------------------------------------------------------------


def rockbot_purge(
    memory_root: Path, now: datetime, dream: DreamOptions = DreamOptions(), *, delete: bool = True
) -> list[AuditEntry]:
    """``RunArchivePurgePassAsync`` on an index loaded from disk now (the agent restarted since the last cycle):
    the entries it deleted (``delete=False``: would delete)."""
    if dream.retention <= timedelta(0):
        return []
    cutoff = now - dream.retention
    entries, _ = walk(memory_root)
    deleted: list[AuditEntry] = []
    for entry in entries:
        if entry.archived_at is None or not entry.archived_at < cutoff or is_protected(entry, dream):
            continue
        if not delete:
            deleted.append(entry)
            continue
        if entry.path is not None and entry.path.exists():
            entry.path.unlink()
            _prune_upward(memory_root, entry.path.parent)
        (memory_root / ".embeddings" / f"{entry.id}.bin").unlink(missing_ok=True)
        deleted.append(entry)
    return deleted


def _prune_upward(root: Path, directory: Path) -> None:
    """``DirectoryPruner.PruneUpward``: emptied category directories go, up to (not including) the root."""
    while directory != root and root in directory.parents:
        try:
            directory.rmdir()
        except OSError:
            return
        directory = directory.parent


__all__ = [
    "AuditEntry",
    "AuditOptions",
    "AuditState",
    "DreamOptions",
    "Row",
    "Snapshot",
    "analyze",
    "check",
    "pause_reason",
    "read_ledger",
    "rockbot_purge",
    "save_state",
    "walk",
    "write_pause_marker",
]
