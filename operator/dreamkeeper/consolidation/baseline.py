"""What a cycle saw of an entry it changed: its content hash and the counters an agent's later write can move.

A journal's archive steps carry it (``Step.baseline``), so that a later cycle can tell an agent's stale cached copy
(same content) from a new fact (changed content), and carry only what the agent changed since into the successor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dreamkeeper.memory import BOOKKEEPING_KEYS, Entry, format_timestamp, review_hash


@dataclass(frozen=True)
class Counters:
    """The fields a caching agent's own writes change (RockBot's Reinforce: count, lastSeenAt, importance, tags,
    metadata it fills in), as one image of an entry had them."""

    rc: int
    seen: str
    importance: float
    tags: tuple[str, ...] = ()
    meta: tuple[str, ...] = ()  # non-bookkeeping metadata keys

    @classmethod
    def of(cls, entry: Entry) -> Counters:
        return cls(
            rc=entry.reinforcement_count,
            seen=format_timestamp(entry.seen_at),
            importance=entry.importance_score,
            tags=tuple(entry.tags),
            meta=tuple(k for k in (entry.metadata or {}) if k not in BOOKKEEPING_KEYS),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "rc": self.rc,
            "seen": self.seen,
            "imp": self.importance,
            "tags": list(self.tags),
            "meta": list(self.meta),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Counters:
        return cls(
            rc=int(data["rc"]),
            seen=str(data["seen"]),
            importance=float(data["imp"]),
            tags=tuple(str(t) for t in data.get("tags") or ()),
            meta=tuple(str(k) for k in data.get("meta") or ()),
        )


def baseline_of(entry: Entry) -> dict[str, Any]:
    """An archive step's baseline: the content's review hash and the counters, as the cycle read them."""
    return {"h": review_hash(entry.content), **Counters.of(entry).to_json()}
