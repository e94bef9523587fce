"""Candidate gating: only new or changed entries, their near-duplicate siblings, and settled clusters that are
due to reopen are ever offered. Nothing else can be named by a proposer, because nothing else is in the map."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING

from dreamkeeper.consolidation.backoff import is_held
from dreamkeeper.consolidation.cluster_cache import ClusterCache
from dreamkeeper.consolidation.clustering import Cluster, ClusterItem
from dreamkeeper.consolidation.declines import days, due_at, reopen_at
from dreamkeeper.consolidation.proposal import Batch, BatchShape, OfferedEntry, OfferGroup
from dreamkeeper.consolidation.quiet import GATING, QuietMemo
from dreamkeeper.consolidation.settings import CycleSettings, OfferShape
from dreamkeeper.memory import REVIEWED_HASH, StoredEntry, review_hash

if TYPE_CHECKING:
    import numpy as np

    from dreamkeeper.consolidation.clustering.find import find_clusters
else:

    def find_clusters(*args, **kwargs):
        # The scan, loaded on its first call: it loads numpy, which a cycle served by the cluster cache never needs.
        from dreamkeeper.consolidation.clustering.find import find_clusters as scan

        return scan(*args, **kwargs)


log = logging.getLogger(__name__)

EmbeddingLoader = Callable[[str], "np.ndarray | None"]


def is_reviewed(stored: StoredEntry) -> bool:
    stamp = stored.entry.meta(REVIEWED_HASH)
    return stamp is not None and stamp.upper() == review_hash(stored.entry.content)


def unreviewed_ids(pool: Iterable[StoredEntry]) -> set[str]:
    """``{s.id for s in pool if not is_reviewed(s)}``, with the entry's accessors inline: gating asks it of every
    live entry of every cycle (tests/consolidation/test_gating_fast.py checks it against that definition)."""
    out: set[str] = set()
    for stored in pool:
        entry = stored.entry
        metadata = entry.metadata
        stamp = metadata.get(REVIEWED_HASH) if metadata else None
        if stamp is None or stamp.upper() != review_hash(entry.content):
            out.add(entry.id)
    return out


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
    # What the clustering compared, for the clustered entries: subsumption asks whether two members of a component
    # are near-duplicates of each other (not only linked through a third).
    items: dict[str, ClusterItem] = field(default_factory=dict)

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
    cache: ClusterCache | None = None,
    generation: str | None = None,
    quiet: QuietMemo | None = None,
) -> GatingResult:
    """``cache`` (cluster_cache.py): the clusters of an unchanged corpus are taken from it, a changed one's saved
    in it. ``in_scope`` (``scope: rockbot``, scope.py): clusters are found over all of ``live``, as RockBot's are, but
    only entries in scope are offered, and a cluster is offered by its members in scope (two or more).
    ``generation``: ``live`` is the live part of the scan of that corpus-index generation, as scanned (the cache's
    key is then taken from what it saved for it, ``ClusterCache.key``). ``quiet`` (quiet.py), given with it: when
    the last cycle over this corpus, these clusters and settings found every entry reviewed and no cluster due before
    now, the offer is empty without asking each entry and each cluster again; when this one finds so, it is kept."""
    result = GatingResult()
    by_id: dict[str, StoredEntry] = {}  # asked only when not settled (held, due): a map of the whole corpus
    pool = live if in_scope is None else [s for s in live if s.id in in_scope]
    items: list[ClusterItem] | None = None
    key: str | None = None
    try:
        key = cache.key(live, settings, generation) if cache is not None else None
        settled = quiet is not None and key is not None and quiet.unchanged(GATING, generation, now, {"clusters": key})
    except Exception:  # the guarded clustering below says what failed
        settled = False
    if settled:
        unreviewed: set[str] = set()
        held: set[str] = set()
    else:
        by_id = {s.id: s for s in live}
        unreviewed = unreviewed_ids(pool)
        # Held after unusable replies: neither offered for themselves nor reopened with their cluster until their
        # back-off ends; a new sibling still brings them along (its cluster is offered whole).
        held = {i for i in unreviewed if is_held(by_id[i], settings, now)}
        unreviewed -= held
    result.unreviewed = len(unreviewed)
    result.held = len(held)
    try:
        key = cache.key(live, settings, generation) if cache is not None and key is None else key
        cached = cache.get(key) if cache is not None and key is not None else None
        if cached is not None:
            clusters = cached  # vectors are loaded below, for the offered clusters only (subsumption's)
        else:
            items = [_item(s, embeddings) for s in live]
            clusters = find_clusters(
                items,
                threshold=settings.similarity_threshold,
                max_cluster_size=settings.max_cluster_size,
                same_top_level_category=settings.same_category_clusters,
                tokens=settings.cluster_tokens,
                split=settings.cluster_split,
                specifics=settings.specifics_links,
            )
            if cache is not None and key is not None:
                cache.put(key, clusters)
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
    interval, max_interval = days(settings.reopen_interval_days), days(settings.reopen_max_interval_days)
    due: list[tuple[datetime, Cluster]] = []
    next_due: datetime | None = None
    for cluster in clusters if not settled else ():
        if any(i in unreviewed for i in cluster.ids):
            result.clusters.append(cluster)
            eligible_ids.update(cluster.ids)
            continue
        if any(i in held for i in cluster.ids):
            continue
        # With offer_new_clusters, reviewed entries that now form a cluster they were never shown (and left intact)
        # as are due at once: a merge took out a neighbour that held them apart, or a link is new. RockBot waits the
        # review interval (7 days) before asking; a family whose other copy was merged elsewhere would sit
        # duplicated for a week (issue 23).
        when = due_at([by_id[i].entry for i in cluster.ids], interval, max_interval, settings.offer_new_clusters)
        if when is not None and when <= now:
            due.append((when, cluster))
        elif when is not None and (next_due is None or when < next_due):
            next_due = when
    due.sort(key=lambda pair: (pair[0], pair[1].ids))
    for _, cluster in due[: settings.reopen_max_per_cycle]:
        result.reopened.append(cluster)
        result.clusters.append(cluster)
        eligible_ids.update(cluster.ids)
        result.merge_only.update(cluster.ids)
    if items is None and result.clusters:
        # Clusters from the cache: only the offered clusters' vectors are loaded (subsumption compares their members;
        # a settled cycle offers none and loads none), inside a guard: a loader failing here degrades the offer
        # exactly as a failing clustering does.
        try:
            wanted = {i for c in result.clusters for i in (*c.ids, *c.leftover)}
            items = [_item(s, embeddings) for s in live if s.id in wanted]
        except Exception as exc:  # any failure narrows the offer, never widens it
            log.warning("near-duplicate scan failed (%s); consolidating unreviewed entries only", exc)
            result.degraded, result.degraded_reason = True, str(exc)
            result.all_clusters, result.clusters, result.reopened, result.merge_only = [], [], [], set()
            clusters, eligible_ids = [], set(unreviewed)
    if clusters and items:
        clustered = {i for c in clusters for i in (*c.ids, *c.leftover)}
        result.items = {item.id: item for item in items if item.id in clustered}
    else:
        result.items = {}  # a settled cycle: no items, and no set of every clustered id to build
    # Store order is kept so prompts are stable from cycle to cycle.
    result.eligible = [s for s in pool if s.id in eligible_ids] if eligible_ids else []  # a settled cycle: none
    result.withheld = len(pool) - len(result.eligible)
    if quiet is not None and not settled and key is not None and not (unreviewed or held or due or result.degraded):
        # Nothing offered, every entry reviewed: the same until the first settled cluster is due (declines.py).
        quiet.found_nothing(GATING, generation, {"clusters": key}, next_due)
    return result


def _item(stored: StoredEntry, embeddings: EmbeddingLoader | None) -> ClusterItem:
    entry = stored.entry
    return ClusterItem(stored.id, entry.content, entry.category, embeddings(stored.id) if embeddings else None)


def near_duplicates(gating: GatingResult, settings: CycleSettings) -> Callable[[str, str], bool]:
    """Whether two clustered entries are near-duplicates of each other, by the clustering's own measure."""
    from dreamkeeper.consolidation.clustering.similarity import similarity  # (loads numpy: see ``select_candidates``)

    items = gating.items

    def near(a: str, b: str) -> bool:
        first, second = items.get(a), items.get(b)
        if first is None or second is None:
            return False
        if settings.same_category_clusters and _top(first.category) != _top(second.category):
            return False
        value, _ = similarity(first, second, settings.cluster_tokens)
        return value >= settings.similarity_threshold

    return near


def _top(category: str | None) -> str | None:
    return category.split("/")[0].casefold() if category is not None else None


def make_batches(
    gating: GatingResult,
    max_entries: int,
    shape: OfferShape = "batches",
    settled: frozenset[str] = frozenset(),
) -> list[Batch]:
    """The offer cut into requests; a near-duplicate component is never split across two (issue 24 item 5).

    RockBot chunks a component of more than ``max_cluster_size`` entries into clusters; each chunk stays a cluster
    of its own (its hash, its decline stamps), but all chunks of one component go into the same request, so every
    near-duplicate pair is shown side by side. Only a component larger than ``max_entries`` is cut, at chunk
    boundaries. ``shape`` "clusters": one request per component, then the lone entries in batches of their own
    (prune review); "batches": components whole, then lone entries, packed into batches of ``max_entries``.
    ``settled``: entries settled without a model (subsumption) are not offered; what is left of their component,
    when two or more entries are, is; a single one left is reviewed with the lone entries.
    """
    by_id = {s.id: s for s in gating.eligible}
    reopened = {c.ids for c in gating.reopened}
    components: dict[int, list[OfferGroup]] = {}
    for index, cluster in enumerate(gating.clusters):
        key = cluster.component if cluster.component >= 0 else -1 - index  # a cluster made by hand: its own
        left = tuple(i for i in cluster.ids if i not in settled)
        if left:
            components.setdefault(key, []).append(OfferGroup(left, True, cluster.ids in reopened))
    # RockBot's chunking drops a last chunk of one: that entry is shown with its component, as a lone entry beside
    # the clusters, not in a prune review of its own (it would never meet its near-duplicates).
    companions = {c.component: c.leftover for c in gating.clusters if c.leftover}
    for key, groups in components.items():
        groups += [OfferGroup((i,), False) for i in companions.get(key, ()) if i in by_id and i not in settled]
    for key in [k for k, groups in components.items() if sum(len(g.ids) for g in groups) < 2]:
        del components[key]  # one entry left of a component: nothing to merge it with, reviewed alone
    shown_with = {i for groups in components.values() for g in groups for i in g.ids}
    not_single = shown_with | settled  # once: inside the comprehension the union was rebuilt per entry (O(n^2))
    singles = [OfferGroup((s.id,), False) for s in gating.eligible if s.id not in not_single]
    units = [_cut(groups, max_entries) for groups in components.values()]
    batches: list[Batch] = []

    def emit(groups: list[OfferGroup], kind: BatchShape) -> None:
        entries = tuple(OfferedEntry(by_id[i].entry, i in gating.merge_only) for g in groups for i in g.ids)
        batches.append(Batch(len(batches), tuple(groups), entries, kind))

    if shape == "clusters":
        for parts in units:
            for part in parts:
                emit(part, "cluster")
        for part in _packed([[g] for g in singles], max_entries):
            emit(part, "review")
        return batches
    for part in _packed([part for parts in units for part in parts] + [[g] for g in singles], max_entries):
        emit(part, "batch")
    return batches


def _size(groups: list[OfferGroup]) -> int:
    return sum(len(g.ids) for g in groups)


def _cut(groups: list[OfferGroup], max_entries: int) -> list[list[OfferGroup]]:
    """A component's chunks in as few parts as fit ``max_entries`` (one part unless the component is larger)."""
    return _packed([[g] for g in groups], max_entries)


def _packed(units: list[list[OfferGroup]], max_entries: int) -> list[list[OfferGroup]]:
    """Units (each kept whole) packed in order into parts of at most ``max_entries`` (a larger unit alone)."""
    parts: list[list[OfferGroup]] = []
    current: list[OfferGroup] = []
    for unit in units:
        if current and _size(current) + _size(unit) > max_entries:
            parts.append(current)
            current = []
        current.extend(unit)
    if current:
        parts.append(current)
    return parts
