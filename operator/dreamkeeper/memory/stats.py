"""Store statistics: what an operator wants to know before (and after) a cycle touches an agent's memory."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta

from pydantic import BaseModel, Field

from dreamkeeper.memory.entry import REVIEWED_HASH, Entry, as_aware, utcnow
from dreamkeeper.memory.fingerprints import review_hash
from dreamkeeper.memory.paths import EMBEDDINGS_DIR
from dreamkeeper.memory.store import HighValueFloor, MemoryStore, ScanResult


class CategoryCount(BaseModel):
    live: int = 0
    archived: int = 0
    superseded: int = 0


class MalformedReport(BaseModel):
    path: str
    error: str


class StoreStats(BaseModel):
    memory_dir: str = Field(serialization_alias="memoryDir")
    entries: int
    live: int
    archived: int
    superseded: int
    malformed: list[MalformedReport]
    duplicate_ids: list[str] = Field(serialization_alias="duplicateIds")
    high_value_live: int = Field(serialization_alias="highValueLive")
    reviewed_live: int = Field(serialization_alias="reviewedLive")
    embeddings: int
    embedding_dimensions: list[int] = Field(serialization_alias="embeddingDimensions")
    archived_due_for_purge: int = Field(serialization_alias="archivedDueForPurge")
    archived_kept_above_floor: int = Field(serialization_alias="archivedKeptAboveFloor")
    retention_days: int = Field(serialization_alias="retentionDays")
    categories: dict[str, CategoryCount]


def compute_stats(
    store: MemoryStore,
    floor: HighValueFloor | None = None,
    retention: timedelta = timedelta(days=90),
    now: datetime | None = None,
    scan: ScanResult | None = None,
) -> StoreStats:
    """Counts over one scan. ``categories`` is keyed by the top-level category ('(uncategorized)' for the root)."""
    floor = floor or HighValueFloor()
    now = now or utcnow()
    scan = scan or store.scan()
    categories: dict[str, CategoryCount] = {}
    dimensions: Counter[int] = Counter()
    due = kept = reviewed = high_value = 0
    for stored in scan.entries:
        entry = stored.entry
        top = (entry.category or "(uncategorized)").split("/")[0]
        counts = categories.setdefault(top, CategoryCount())
        if entry.is_archived:
            counts.archived += 1
            assert entry.archived_at is not None
            if retention > timedelta(0) and as_aware(entry.archived_at) <= now - retention:
                if floor.protects(entry):
                    kept += 1
                else:
                    due += 1
        elif entry.superseded_by:
            counts.superseded += 1
        else:
            counts.live += 1
            high_value += floor.protects(entry)
            reviewed += _reviewed_and_unchanged(entry)
        vector = store.load_embedding(entry.id)
        if vector is not None:
            dimensions[len(vector)] += 1
    embeddings_dir = store.root / EMBEDDINGS_DIR
    return StoreStats(
        memory_dir=str(store.root),
        entries=len(scan.entries),
        live=len(scan.live),
        archived=len(scan.archived),
        superseded=sum(c.superseded for c in categories.values()),
        malformed=[MalformedReport(path=str(m.path), error=m.error) for m in scan.malformed],
        duplicate_ids=sorted({d.id for d in scan.duplicates}),
        high_value_live=high_value,
        reviewed_live=reviewed,
        embeddings=sum(dimensions.values()) if embeddings_dir.is_dir() else 0,
        embedding_dimensions=sorted(dimensions),
        archived_due_for_purge=due,
        archived_kept_above_floor=kept,
        retention_days=retention.days,
        categories=dict(sorted(categories.items())),
    )


def _reviewed_and_unchanged(entry: Entry) -> bool:
    # Counted here; consolidation owns the gating itself.
    stamp = entry.meta(REVIEWED_HASH)
    return stamp is not None and stamp.upper() == review_hash(entry.content)
