"""Candidate gating: only new or changed entries, their near-duplicate siblings, and settled clusters that are
due to reopen are ever offered. Nothing else can be named by a proposer, because nothing else is in the map."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

import numpy as np

from dreamkeeper.consolidation.backoff import is_held
from dreamkeeper.consolidation.clustering import Cluster, ClusterItem, find_clusters
from dreamkeeper.consolidation.declines import days, reopen_at
from dreamkeeper.consolidation.proposal import Batch, OfferedEntry, OfferGroup
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.memory import REVIEWED_HASH, StoredEntry, review_hash

log = logging.getLogger(__name__)

EmbeddingLoader = Callable[[str], "np.ndarray | None"]


def is_reviewed(stored: StoredEntry) -> bool:
    stamp = stored.entry.meta(REVIEWED_HASH)
    return stamp is not None and stamp.upper() == review_hash(stored.entry.content)


@dataclass
class GatingResult:
    eligible: list[StoredEntry] = field(default_factory=list)
    merge_only: set[str] = field(default_factory=set)
    clusters: list[Cluster] = field(default_factory=list)  # offered clusters
    reopened: list[Cluster] = field(default_factory=list)
    all_clusters: list[Cluster] = field(default_factory=list)
    withheld: int = 0
    held: int = 0  # unreviewed entries waiting out a back-off after unusable replies (backoff.py)
    unreviewed: int = 0
    degraded: bool = False
    degraded_reason: str | None = None

    @property
    def eligible_ids(self) -> set[str]:
        return {s.id for s in self.eligible}


def reopen_time(members: Sequence[StoredEntry], settings: CycleSettings) -> datetime | None:
    """When a settled cluster is offered again (RockBot #571): declines back off 7 → 14 → 28 → 56 days."""
    return reopen_at(
        [m.entry for m in members], days(settings.reopen_interval_days), days(settings.reopen_max_interval_days)
    )


def select_candidates(
    live: Sequence[StoredEntry],
    settings: CycleSettings,
    now: datetime,
    embeddings: EmbeddingLoader | None = None,
    in_scope: frozenset[str] | None = None,
) -> GatingResult:
    """``in_scope`` (``scope: rockbot``, scope.py): clusters are found over all of ``live``, as RockBot's are, but
    only entries in scope are offered, and a cluster is offered by its members in scope (two or more)."""
    result = GatingResult()
    by_id = {s.id: s for s in live}
    pool = live if in_scope is None else [s for s in live if s.id in in_scope]
    unreviewed = {s.id for s in pool if not is_reviewed(s)}
    # Held after unusable replies: neither offered for themselves nor reopened with their cluster until their
    # back-off ends; a new sibling still brings them along (its cluster is offered whole).
    held = {i for i in unreviewed if is_held(by_id[i], settings, now)}
    unreviewed -= held
    result.unreviewed = len(unreviewed)
    result.held = len(held)
    try:
        items = [
            ClusterItem(s.id, s.entry.content, s.entry.category, embeddings(s.id) if embeddings else None) for s in live
        ]
        clusters = find_clusters(
            items,
            threshold=settings.similarity_threshold,
            max_cluster_size=settings.max_cluster_size,
            same_top_level_category=settings.same_category_clusters,
            tokens=settings.cluster_tokens,
            split=settings.cluster_split,
        )
    except Exception as exc:  # any failure narrows the offer, never widens it
        log.warning("near-duplicate scan failed (%s); consolidating unreviewed entries only", exc)
        result.degraded = True
        result.degraded_reason = str(exc)
        clusters = []
    if in_scope is not None:
        trimmed = (replace(c, ids=tuple(i for i in c.ids if i in in_scope)) for c in clusters)
        clusters = [c for c in trimmed if len(c.ids) >= 2]
    result.all_clusters = clusters
    eligible_ids = set(unreviewed)
    due: list[tuple[datetime, Cluster]] = []
    for cluster in clusters:
        if any(i in unreviewed for i in cluster.ids):
            result.clusters.append(cluster)
            eligible_ids.update(cluster.ids)
            continue
        if any(i in held for i in cluster.ids):
            continue
        when = reopen_time([by_id[i] for i in cluster.ids], settings)
        if when is not None and when <= now:
            due.append((when, cluster))
    due.sort(key=lambda pair: (pair[0], pair[1].ids))
    for _, cluster in due[: settings.reopen_max_per_cycle]:
        result.reopened.append(cluster)
        result.clusters.append(cluster)
        eligible_ids.update(cluster.ids)
        result.merge_only.update(cluster.ids)
    # Store order is kept so prompts are stable from cycle to cycle.
    result.eligible = [s for s in pool if s.id in eligible_ids]
    result.withheld = len(pool) - len(result.eligible)
    return result


def make_batches(gating: GatingResult, max_entries: int) -> list[Batch]:
    """Clusters first (never split), then singletons, packed into bounded batches."""
    by_id = {s.id: s for s in gating.eligible}
    reopened = {c.ids for c in gating.reopened}
    groups: list[OfferGroup] = [OfferGroup(c.ids, True, c.ids in reopened) for c in gating.clusters]
    in_cluster = {i for c in gating.clusters for i in c.ids}
    groups += [OfferGroup((s.id,), False) for s in gating.eligible if s.id not in in_cluster]
    batches: list[Batch] = []
    current: list[OfferGroup] = []
    size = 0

    def flush() -> None:
        nonlocal current, size
        if current:
            entries = tuple(OfferedEntry(by_id[i].entry, i in gating.merge_only) for g in current for i in g.ids)
            batches.append(Batch(len(batches), tuple(current), entries))
        current, size = [], 0

    for group in groups:
        if current and size + len(group.ids) > max_entries:
            flush()
        current.append(group)
        size += len(group.ids)
    flush()
    return batches
