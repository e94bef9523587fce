"""Small hand-made corpora for engine tests, written in RockBot's on-disk format."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from dreamkeeper.memory import Entry, MemoryStore

BASE_TIME = datetime(2026, 9, 1, 12, 0, tzinfo=UTC)
# RockBot's batch layout with every cluster shown to the proposer (no subsumption): the settings for tests of how
# replies are validated, which a cluster settled before any model is asked would bypass.
ROCKBOT_SHAPE: dict[str, Any] = {"offer_shape": "batches", "subsume": False}
# Every cluster asked about on its own (the default shape), none settled before: a reply that changes nothing
# declines the cluster, as RockBot's empty reply does.
ASK_EVERY_CLUSTER: dict[str, Any] = {"subsume": False}


@dataclass
class Seed:
    id: str
    content: str
    category: str | None = "project-context"
    importance: float = 0.5
    reinforcement: int = 1
    metadata: dict[str, str] | None = None
    age_days: int = 10


def write_corpus(agent_dir: Path, seeds: list[Seed]) -> MemoryStore:
    store = MemoryStore(agent_dir / "memory")
    (agent_dir / "memory").mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        created = BASE_TIME - timedelta(days=seed.age_days)
        store.create(
            Entry(
                id=seed.id,
                content=seed.content,
                category=seed.category,
                created_at=created,
                updated_at=created,
                last_seen_at=created,
                importance_score=seed.importance,
                reinforcement_count=seed.reinforcement,
                metadata=seed.metadata,
            )
        )
    return store


def entry_files(agent_dir: Path) -> set[str]:
    return {p.stem for p in (agent_dir / "memory").rglob("*.json") if not p.name.startswith(".")}
