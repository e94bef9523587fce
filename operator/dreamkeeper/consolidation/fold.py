"""Exact-duplicate fold (RockBot #569): byte-identical restatements are folded with no LLM involved.

The oldest copy survives with its text untouched (so its review stamp stays valid); the copies are archived
``merged into <survivor>`` only after the survivor's updated counters are saved.

A merge whose text equals a live entry's is folded into that entry at once, in the same cycle (RockBot #580,
``FindExactDuplicateAsync`` + ``FoldMergeIntoExisting``, DreamService.cs @05346ff0): :class:`LiveTexts` finds the
entry, :func:`fold_merge_into` computes what it becomes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Container, Sequence
from datetime import datetime

from dreamkeeper.consolidation.declines import INT32_MAX
from dreamkeeper.consolidation.plan import FoldAction
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.memory import (
    BOOKKEEPING_KEYS,
    FOLDED_AT,
    FOLDED_FROM,
    MERGED_AT,
    MERGED_FROM,
    Entry,
    StoredEntry,
    dotnet_collapse,
    fold_key,
    format_timestamp,
    ordinal_key,
)


def plan_folds(live: Sequence[StoredEntry], settings: CycleSettings, now: datetime) -> list[FoldAction]:
    if not settings.exact_fold:
        return []
    groups: dict[tuple[str, str], list[StoredEntry]] = defaultdict(list)
    excluded = _memo(settings.is_fold_excluded)
    # ``fold_key``, its category half asked once per category (a corpus has few), its content half the content's
    # collapse (``fold_key``'s own, tests/memory/test_fingerprints.py): this runs over every live entry of every cycle.
    categories: dict[str | None, str] = {}
    for stored in live:
        entry = stored.entry
        content, category = entry.content, entry.category
        if not content.strip() or excluded(category):
            continue
        folded = categories.get(category)
        if folded is None:
            folded = categories[category] = fold_key(category, "")[0]
        groups[(folded, dotnet_collapse(content))].append(stored)
    actions = []
    for members in groups.values():
        if len(members) < 2:
            continue
        ordered = sorted(members, key=lambda s: (s.entry.created_at, ordinal_key(s.id)))
        survivor, copies = ordered[0], ordered[1:]
        actions.append(FoldAction(survivor=survivor, updated=fold_into(survivor.entry, copies, now), copies=copies))
    actions.sort(key=lambda a: a.survivor.id)
    return actions


def _memo(rule: Callable[[str | None], bool]) -> Callable[[str | None], bool]:
    """``rule`` asked once per category: a corpus has few categories and many entries."""
    answers: dict[str | None, bool] = {}

    def answer(category: str | None) -> bool:
        found = answers.get(category)
        if found is None:
            found = answers[category] = rule(category)
        return found

    return answer


def tag_union(first: Sequence[str], *more: Sequence[str]) -> list[str]:
    """Tags in order, the first spelling of each kept: RockBot unions them case-insensitively."""
    tags = list(first)
    seen = {t.casefold() for t in tags}
    for group in more:
        for tag in group:
            if tag.casefold() not in seen:
                seen.add(tag.casefold())
                tags.append(tag)
    return tags


def _fill_missing(metadata: dict[str, str], other: dict[str, str] | None) -> None:
    """Keys ``other`` has and ``metadata`` lacks, bookkeeping keys excepted (never copied between entries)."""
    for key, value in (other or {}).items():
        if key not in BOOKKEEPING_KEYS and key not in metadata:
            metadata[key] = value


def reinforcement_sum(entries: Sequence[Entry]) -> int:
    """The sources' reinforcement added up (each at least 1), saturated at int32: RockBot reads the count as an
    int, so a larger number would make the entry unreadable to the agent (RockBot's own unchecked sum wraps)."""
    return min(sum(max(1, e.reinforcement_count) for e in entries), INT32_MAX)


def fold_into(survivor: Entry, copies: Sequence[StoredEntry], now: datetime) -> Entry:
    entries = [survivor, *(c.entry for c in copies)]
    tags = tag_union(survivor.tags, *(c.entry.tags for c in copies))
    metadata = dict(survivor.metadata or {})
    for copy in copies:
        _fill_missing(metadata, copy.entry.metadata)
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
        reinforcement_count=reinforcement_sum(entries),
    )


def fold_merge_into(target: Entry, merged: Entry, source_ids: Sequence[str], now: datetime) -> Entry:
    """What ``target`` becomes when a merge restating it verbatim is folded into it (RockBot's
    ``FoldMergeIntoExisting``): its text and ``updatedAt`` kept, the merge's evidence added — tags and metadata
    filled in, ``mergedFrom`` extended by the sources, counters combined."""
    metadata = dict(target.metadata or {})
    _fill_missing(metadata, merged.metadata)
    provenance = [x for x in (metadata.get(MERGED_FROM) or "").split(",") if x]
    known = {x.casefold() for x in provenance}
    for source in source_ids:
        if source.casefold() not in known:
            known.add(source.casefold())
            provenance.append(source)
    metadata[MERGED_FROM] = ",".join(provenance)
    metadata[MERGED_AT] = format_timestamp(now)
    return target.evolve(
        tags=tag_union(target.tags, merged.tags),
        metadata=metadata,
        created_at=min(target.created_at, merged.created_at),
        importance_score=max(target.importance_score, merged.importance_score),
        last_seen_at=max(target.seen_at, merged.seen_at),
        reinforcement_count=min(max(1, target.reinforcement_count) + max(1, merged.reinforcement_count), INT32_MAX),
    )


class LiveTexts:
    """The live corpus by exact-duplicate key, built the first time a merge is looked up (RockBot searches the whole
    live store, not only what was offered)."""

    def __init__(self, live: Sequence[StoredEntry], settings: CycleSettings) -> None:
        self._live = live
        self._settings = settings
        self._by_key: dict[tuple[str, str], list[StoredEntry]] | None = None
        self._excluded = _memo(settings.is_fold_excluded)

    def eligible(self, entry: Entry) -> bool:
        """RockBot's ``IsExactDuplicateEligible``: live, not superseded, not blank, not a category a pass owns."""
        return entry.is_live and bool(entry.content.strip()) and not self._excluded(entry.category)

    def find(self, merged: Entry, exclude: Container[str]) -> StoredEntry | None:
        """The oldest live entry (created, then id in ordinal order) saying exactly what ``merged`` says in the same
        category; ``exclude`` (lower-cased ids: the merge's own sources, entries already leaving) never matches."""
        if not self._settings.exact_fold or not self.eligible(merged):
            return None
        if self._by_key is None:
            self._by_key = defaultdict(list)
            for stored in self._live:
                if self.eligible(stored.entry):
                    self._by_key[fold_key(stored.entry.category, stored.entry.content)].append(stored)
        matches = [
            s
            for s in self._by_key.get(fold_key(merged.category, merged.content), ())
            if s.id.lower() not in exclude and s.id.lower() != merged.id.lower()
        ]
        return min(matches, key=lambda s: (s.entry.created_at, ordinal_key(s.id)), default=None)
