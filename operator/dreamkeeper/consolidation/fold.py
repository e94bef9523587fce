"""Exact-duplicate fold (RockBot #569): byte-identical restatements are folded with no LLM involved.

The oldest copy survives with its text untouched (so its review stamp stays valid); the copies are archived
``merged into <survivor>`` only after the survivor's updated counters are saved.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime

from dreamkeeper.consolidation.plan import FoldAction
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.memory import BOOKKEEPING_KEYS, FOLDED_AT, FOLDED_FROM, Entry, StoredEntry, fold_key, format_timestamp


def plan_folds(live: Sequence[StoredEntry], settings: CycleSettings, now: datetime) -> list[FoldAction]:
    if not settings.exact_fold:
        return []
    groups: dict[tuple[str, str], list[StoredEntry]] = defaultdict(list)
    for stored in live:
        entry = stored.entry
        if not entry.content.strip() or settings.is_fold_excluded(entry.category):
            continue
        groups[fold_key(entry.category, entry.content)].append(stored)
    actions = []
    for members in groups.values():
        if len(members) < 2:
            continue
        ordered = sorted(members, key=lambda s: (s.entry.created_at, s.id))
        survivor, copies = ordered[0], ordered[1:]
        actions.append(FoldAction(survivor=survivor, updated=fold_into(survivor.entry, copies, now), copies=copies))
    actions.sort(key=lambda a: a.survivor.id)
    return actions


def fold_into(survivor: Entry, copies: Sequence[StoredEntry], now: datetime) -> Entry:
    entries = [survivor, *(c.entry for c in copies)]
    tags = list(survivor.tags)
    for copy in copies:
        tags += [t for t in copy.entry.tags if t not in tags]
    metadata = dict(survivor.metadata or {})
    for copy in copies:
        for key, value in (copy.entry.metadata or {}).items():
            if key not in BOOKKEEPING_KEYS and key not in metadata:
                metadata[key] = value
    folded = [x for x in (metadata.get(FOLDED_FROM) or "").split(",") if x]
    folded += [c.id for c in copies if c.id not in folded]
    metadata[FOLDED_FROM] = ",".join(folded)
    metadata[FOLDED_AT] = format_timestamp(now)
    return survivor.evolve(
        tags=tags,
        metadata=metadata,
        created_at=min(e.created_at for e in entries),
        importance_score=max(e.importance_score for e in entries),
        last_seen_at=max(e.seen_at for e in entries),
        reinforcement_count=sum(max(1, e.reinforcement_count) for e in entries),
    )
