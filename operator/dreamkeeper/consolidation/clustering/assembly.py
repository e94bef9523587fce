"""Components of the edge graph into clusters: union-find over nodes, each component whole when it fits in
``max_cluster_size`` and split (:mod:`.splitting`) when not, each chunk with its weakest edge and measure."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable

from dreamkeeper.consolidation.clustering.graph import Graph
from dreamkeeper.consolidation.clustering.model import JACCARD, MEASURE_CODES, Cluster, Split
from dreamkeeper.consolidation.clustering.splitting import Adjacency, rockbot_chunks, split_component
from dreamkeeper.consolidation.clustering.stats import ClusteringStats


def assemble(graph: Graph, max_cluster_size: int, stats: ClusteringStats, split: Split = "neighbours") -> list[Cluster]:
    """The clusters of ``graph``, sorted by first id; counts components, clusters and oversize chunks."""
    components = _components(graph)
    stats.components = len(components)
    clusters: list[Cluster] = []
    for index, adjacency in enumerate(_parts(components, graph, max_cluster_size)):
        members = {node: graph.members(node) for node in adjacency}
        if sum(len(entries) for entries in members.values()) <= max_cluster_size:
            chunks = [sorted(entry for entries in members.values() for entry in entries)]
        elif split == "rockbot":
            chunks = rockbot_chunks(members, max_cluster_size)
        else:
            chunks = split_component(adjacency, members, max_cluster_size)
        node_of = {entry: node for node, entries in members.items() for entry in entries}
        chunked = {entry for chunk in chunks for entry in chunk}
        leftover = tuple(sorted(graph.ids[k] for k in node_of if k not in chunked))
        for position, chunk in enumerate(chunks):
            cluster = _cluster_of(chunk, node_of, adjacency, graph.ids)
            last = position == len(chunks) - 1
            clusters.append(dataclasses.replace(cluster, component=index, leftover=leftover if last else ()))
            if len(chunk) > max_cluster_size:
                stats.oversize_clusters += 1
    clusters.sort(key=lambda cluster: cluster.ids[0])
    stats.clusters = len(clusters)
    return _numbered(clusters)


def _parts(components: list[Adjacency], graph: Graph, max_size: int) -> list[Adjacency]:
    """Each component, an over-large one cut first along its links (issue 23).

    An over-large component of a corpus with links (shared rare specifics, :mod:`.specifics_links`) is usually
    several facts joined by template wording ("Met X at KubeCon on ..." for many X): cut into fixed chunks, each
    chunk mixes facts and a request showing them asks about several at once. So such a component becomes the
    components of its links (entries naming the same things), each its own request, and what no link holds, the
    components of the remaining edges among the remaining entries; a part of one entry is dropped (offered again
    once its neighbours have been merged and its component is smaller). A part still too large is then split as
    before. Components that fit, and every component when there are no links, are kept whole.
    """
    if not graph.links:
        return components
    links = graph.links

    def named_alike(a: int, b: int) -> bool:
        return (min(a, b), max(a, b)) in links

    parts: list[Adjacency] = []
    for adjacency in components:
        if sum(len(graph.members(node)) for node in adjacency) <= max_size:
            parts.append(adjacency)
            continue
        linked = [part for part in _restricted(adjacency, named_alike) if len(part) >= 2]
        held = frozenset(node for part in linked for node in part)

        def outside(a: int, b: int, held: frozenset[int] = held) -> bool:
            return a not in held and b not in held

        rest = _restricted(adjacency, outside)
        parts.extend(linked)
        for part in rest:
            node = next(iter(part))
            if node not in held and (len(part) >= 2 or len(graph.members(node)) >= 2):
                parts.append(part)
    return parts


def _restricted(adjacency: Adjacency, keep: Callable[[int, int], bool]) -> list[Adjacency]:
    """The connected components of ``adjacency`` keeping only the edges ``keep`` accepts (every node appears)."""
    seen: set[int] = set()
    parts: list[Adjacency] = []
    for start in sorted(adjacency):
        if start in seen:
            continue
        part: Adjacency = {}
        stack = [start]
        seen.add(start)
        while stack:
            node = stack.pop()
            part[node] = {}
            for other, edge in adjacency[node].items():
                if keep(node, other):
                    part[node][other] = edge
                    if other not in seen:
                        seen.add(other)
                        stack.append(other)
        parts.append(part)
    return parts


def _numbered(clusters: list[Cluster]) -> list[Cluster]:
    """Each cluster with its component's number, components numbered in the order their first chunk appears (so
    the numbers depend only on the clusters, not on the scan's internal order)."""
    numbers: dict[int, int] = {}
    return [dataclasses.replace(c, component=numbers.setdefault(c.component, len(numbers))) for c in clusters]


def _components(graph: Graph) -> list[Adjacency]:
    """The adjacency of each connected component (nodes with at least one edge, and every twin class)."""
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        root = parent.setdefault(x, x)
        while root != parent[root]:
            parent[root] = parent[parent[root]]
            root = parent[root]
        return root

    edge_list = graph.edge_list()
    for a, b, _, _ in edge_list:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    for node in graph.twins:
        find(node)  # a twin class is a component even with no other neighbour
    adjacencies: dict[int, Adjacency] = defaultdict(dict)
    for node in parent:
        adjacencies[find(node)][node] = {}
    for a, b, w, m in edge_list:
        adjacency = adjacencies[find(a)]
        adjacency[a][b] = (w, m)
        adjacency[b][a] = (w, m)
    return list(adjacencies.values())


def _cluster_of(chunk: list[int], node_of: dict[int, int], adjacency: Adjacency, ids: list[str]) -> Cluster:
    present: dict[int, int] = defaultdict(int)
    for entry in chunk:
        present[node_of[entry]] += 1
    weights: list[float] = []
    measures: set[int] = set()
    nodes = list(present)
    for position, node in enumerate(nodes):
        if present[node] >= 2:  # twins of one class: Jaccard 1.0
            weights.append(1.0)
            measures.add(JACCARD)
        near = adjacency[node]
        for other in nodes[position + 1 :]:  # a chunk holds a handful of nodes; a twin class may have 1000s of edges
            edge = near.get(other)
            if edge is not None:
                weights.append(edge[0])
                measures.add(edge[1])
    if not weights:
        # A fixed RockBot chunk can hold entries linked only through members of other chunks.
        return Cluster(ids=tuple(sorted(ids[k] for k in chunk)), min_similarity=0.0, measure="linked")
    kind = MEASURE_CODES[measures.pop()] if len(measures) == 1 else "mixed"
    return Cluster(ids=tuple(sorted(ids[k] for k in chunk)), min_similarity=min(weights), measure=kind)
