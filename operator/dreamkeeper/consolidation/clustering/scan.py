"""The edge graph of a corpus: every accepted edge, per scope group and measure (the module that computes
edges; :func:`.find.find_clusters` assembles them into clusters)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from dreamkeeper.consolidation.clustering.corpus import prepare
from dreamkeeper.consolidation.clustering.cosine import scan_cosine
from dreamkeeper.consolidation.clustering.graph import Edges, Graph
from dreamkeeper.consolidation.clustering.jaccard import scan_jaccard
from dreamkeeper.consolidation.clustering.model import ClusterItem, Strategy, Tokens
from dreamkeeper.consolidation.clustering.specifics_links import specifics_links
from dreamkeeper.consolidation.clustering.stats import ClusteringStats


def edge_graph(
    items: Sequence[ClusterItem],
    *,
    threshold: float,
    same_top_level_category: bool,
    strategy: Strategy,
    seed: int | None,
    stats: ClusteringStats,
    tokens: Tokens = "unicode",
    specifics: float = 0.0,
) -> Graph:
    """Every accepted edge between nodes (see :class:`.graph.Graph`), per scope group and measure.

    Options as :func:`.find.find_clusters` takes them, already checked; ``stats`` is filled in. ``specifics`` > 0
    adds the links of entries naming the same rare specifics (:mod:`.specifics_links`), inside a scope group.
    """
    scoped = same_top_level_category
    corpus = prepare(items, stats, tokens)
    if seed is None:
        seed = corpus.seed
    edges = Edges()
    twins: dict[int, list[int]] = {}
    groups: dict[str | None, list[int]] = defaultdict(list)
    for index, scope in enumerate(corpus.scopes):
        groups[scope if scoped else None].append(index)
    for scope, members in sorted(groups.items(), key=lambda kv: (kv[0] is not None, kv[0] or "")):
        group = np.asarray(members, dtype=np.int64)
        label = scope if scoped else None
        scan_jaccard(corpus, group, threshold, strategy, seed, edges, twins, stats, label)
        group_dims = corpus.dims[group]
        for dim in np.unique(group_dims[group_dims >= 0]).tolist():
            embedded = group[group_dims == dim]
            if len(embedded) >= 2:
                scan_cosine(corpus, embedded, int(dim), threshold, strategy, seed, edges, stats, label)
    graph = Graph(corpus.ids, *edges.arrays(), twins=twins)
    if specifics > 0.0:
        ordered = sorted(items, key=lambda item: item.id)  # the corpus's order: indices are entry numbers
        links = [
            link
            for link in specifics_links(ordered, specifics)
            if not scoped or corpus.scopes[link[0]] == corpus.scopes[link[1]]
        ]
        graph = graph.with_links(links)
        stats.specifics_links = len(links)
    stats.twin_entries = sum(len(members) for members in twins.values())
    stats.edges = sum(record.edges for record in stats.scans)
    return graph
