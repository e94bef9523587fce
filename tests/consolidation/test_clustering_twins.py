"""Twin classes in near-duplicate clustering: entries with one token set and no embedding are scanned once and
split as a node, and the result must be exactly what the entry-level greedy gives on the explicit pair graph."""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from itertools import combinations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dreamkeeper.consolidation.clustering import Cluster, ClusterItem, Strategy, assembly, find_clusters, splitting
from dreamkeeper.consolidation.clustering.graph import SimilarPair
from dreamkeeper.consolidation.clustering.similarity import similarity
from tests.consolidation.test_clustering import clusters_with_stats, edges_of, item

Edges = dict[tuple[int, int], tuple[float, str]]

TEXT = "alpha bravo charlie delta echo foxtrot golf hotel"  # 8 tokens
NEAR = f"{TEXT} india"  # Jaccard 8/9 with TEXT


def _top(category: str | None) -> str | None:
    return None if category is None else category.strip().strip("/").split("/", 1)[0].strip().casefold()


def _oracle(items: Sequence[ClusterItem], threshold: float, scoped: bool) -> tuple[list[ClusterItem], Edges]:
    """Items in id order and every pair at or above the threshold, by pairwise ``similarity()``."""
    ordered = sorted(items, key=lambda it: it.id)
    edges: Edges = {}
    for i, j in combinations(range(len(ordered)), 2):
        if scoped and _top(ordered[i].category) != _top(ordered[j].category):
            continue
        value, measure = similarity(ordered[i], ordered[j])
        if value >= threshold:
            edges[(i, j)] = (value, measure)
    return ordered, edges


def _reference_split(adjacency: dict[int, dict[int, float]], max_size: int) -> list[list[int]]:
    """The entry-level greedy on an explicit graph (indices in id order; strengths in exact integer units)."""

    def units(weight: float) -> int:
        return int(weight * 2.0**64)

    remaining = set(adjacency)
    degree = {v: len(adjacency[v]) for v in adjacency}
    strength = {v: sum(units(w) for w in adjacency[v].values()) for v in adjacency}
    seeds = [(-degree[v], -strength[v], v) for v in adjacency]
    heapq.heapify(seeds)
    chunks: list[list[int]] = []
    chunk_of: dict[int, int] = {}
    stranded: list[int] = []
    while seeds:
        neg_degree, neg_strength, seed = heapq.heappop(seeds)
        if seed not in remaining or -neg_degree != degree[seed] or -neg_strength != strength[seed]:
            continue
        chunk = [seed]
        remaining.discard(seed)
        frontier = [(-w, v) for v, w in adjacency[seed].items() if v in remaining]
        heapq.heapify(frontier)
        while frontier and len(chunk) < max_size:
            _, node = heapq.heappop(frontier)
            if node not in remaining:
                continue
            chunk.append(node)
            remaining.discard(node)
            for v, w in adjacency[node].items():
                if v in remaining:
                    heapq.heappush(frontier, (-w, v))
        if len(chunk) == 1:
            stranded.append(seed)
            continue
        for node in chunk:
            chunk_of[node] = len(chunks)
            for v, w in adjacency[node].items():
                if v in remaining:
                    degree[v] -= 1
                    strength[v] -= units(w)
                    heapq.heappush(seeds, (-degree[v], -strength[v], v))
        chunks.append(chunk)
    for node in sorted(stranded):
        neighbour = min(adjacency[node], key=lambda v: (-adjacency[node][v], v))
        chunks[chunk_of[neighbour]].append(node)
    return chunks


def _reference_clusters(ordered: Sequence[ClusterItem], edges: Edges, max_size: int) -> list[Cluster]:
    """Components of the explicit graph, split by the entry-level greedy, as Clusters sorted by first id."""
    adjacency: dict[int, dict[int, float]] = {}
    for (i, j), (w, _) in edges.items():
        adjacency.setdefault(i, {})[j] = w
        adjacency.setdefault(j, {})[i] = w
    seen: set[int] = set()
    clusters: list[Cluster] = []
    for start in sorted(adjacency):
        if start in seen:
            continue
        component, stack = {start}, [start]
        while stack:
            for nxt in adjacency[stack.pop()]:
                if nxt not in component:
                    component.add(nxt)
                    stack.append(nxt)
        seen |= component
        sub = {v: adjacency[v] for v in component}
        chunks = [sorted(component)] if len(component) <= max_size else _reference_split(sub, max_size)
        for chunk in chunks:
            inside = [edges[pair] for pair in combinations(sorted(chunk), 2) if pair in edges]
            kinds = {m for _, m in inside}
            clusters.append(
                Cluster(
                    ids=tuple(sorted(ordered[k].id for k in chunk)),
                    min_similarity=min(w for w, _ in inside),
                    measure=kinds.pop() if len(kinds) == 1 else "mixed",
                )
            )
    return sorted(clusters, key=lambda c: c.ids[0])


def _assert_matches_reference(
    items: Sequence[ClusterItem], threshold: float, max_size: int, scoped: bool, strategies: Sequence[Strategy]
) -> list[Cluster]:
    ordered, edges = _oracle(items, threshold, scoped)
    expected = _reference_clusters(ordered, edges, max_size)
    pairs = sorted(
        (SimilarPair(ordered[i].id, ordered[j].id, w, m) for (i, j), (w, m) in edges.items()),
        key=lambda p: (p.a, p.b),
    )
    for strategy in strategies:
        clusters, stats = clusters_with_stats(
            items, threshold=threshold, max_cluster_size=max_size, same_top_level_category=scoped, strategy=strategy
        )
        assert clusters == expected, strategy
        assert stats.edges == len(edges)
        assert stats.oversize_clusters == sum(1 for c in expected if len(c.ids) > max_size)
        assert edges_of(items, threshold=threshold, same_top_level_category=scoped, strategy=strategy) == pairs
    return expected


# --------------------------------------------------------------------------------------------- class sizes


def _neighbourhood(kind: str) -> list[ClusterItem]:
    """Entries around the twin class of TEXT (ids interleave with the twins')."""
    if kind == "none":
        return [item("m-other", "completely unrelated words here")]
    if kind == "near":  # non-embedded near-duplicates of the class (Jaccard 8/9), not twins of it
        return [item("m-near1", NEAR), item("m-near2", NEAR + " juliet"), item("t05x", NEAR)]
    if kind == "embedded":  # same text with embeddings: Jaccard 1.0 to every twin, cosine among themselves
        return [
            item("m-emb1", TEXT, embedding=[1.0, 0.0, 0.0]),
            item("t02x", TEXT, embedding=[0.99, 0.141, 0.0]),  # cosine ~0.99 with m-emb1
            item("m-emb3", TEXT, embedding=[0.0, 0.0, 1.0]),  # orthogonal to both
            item("m-emb4", NEAR, embedding=[0.0, 1.0, 0.0, 0.0]),  # another dimension: Jaccard with all
        ]
    raise AssertionError(kind)


@pytest.mark.parametrize("neighbours", ["none", "near", "embedded"])
@pytest.mark.parametrize("class_size", [1, 3, 4, 5, 9, 13])  # with max 4: 1, max-1, max, max+1, 2max+1, 3max+1
def test_twin_class_sizes_match_the_entry_level_greedy(class_size: int, neighbours: str) -> None:
    twins = [item(f"t{k:02d}", TEXT) for k in range(class_size)]
    _assert_matches_reference([*twins, *_neighbourhood(neighbours)], 0.88, 4, False, ("brute", "lsh"))


def test_pure_twin_class_chunks_are_consecutive_id_runs() -> None:
    for size, expected_sizes in [(17, [9, 8]), (16, [8, 8]), (15, [8, 7]), (2, [2])]:
        twins = [item(f"t{k:03d}", TEXT) for k in range(size)]
        clusters, stats = clusters_with_stats(twins, max_cluster_size=8)
        assert [len(c.ids) for c in clusters] == expected_sizes
        # lowest ids first; a lone remainder joins the chunk of its lowest-id twin (the first one)
        assert clusters[0].ids[:8] == tuple(f"t{k:03d}" for k in range(min(8, size)))
        assert all(c.min_similarity == 1.0 and c.measure == "jaccard" for c in clusters)
        assert stats.twin_entries == size and stats.edges == size * (size - 1) // 2
        assert stats.scans[0].scanned == 1 and stats.oversize_clusters == (1 if size == 17 else 0)


def test_a_2071_twin_class_is_split_without_materialising_its_pairs(monkeypatch: pytest.MonkeyPatch) -> None:
    size, max_size = 2071, 8
    twins = [item(f"t{k:04d}", TEXT) for k in range(size)]
    others = [
        item("n-near", NEAR),
        item("n-emb1", TEXT, embedding=[1.0, 0.0]),
        item("n-emb2", TEXT, embedding=[0.0, 1.0]),
        item("n-emb3", "unrelated words but a similar vector", embedding=[0.999, 0.0447]),
        item("n-far", "nothing in common at all"),
    ]
    seen_nodes: list[int] = []
    split = splitting.split_component

    def spy(adjacency: dict[int, dict[int, tuple[float, int]]], members: dict[int, list[int]], max_size: int) -> object:
        seen_nodes.append(len(adjacency))
        return split(adjacency, members, max_size)

    monkeypatch.setattr(assembly, "split_component", spy)
    items = [*twins, *others]
    clusters, stats = clusters_with_stats(items, max_cluster_size=max_size)
    assert seen_nodes == [5]  # the class is one node next to its four neighbours, not 2071 entries
    # one entry per distinct token set is hashed: TEXT (the twins, emb1, emb2), NEAR, emb3's and far's
    assert stats.twin_entries == size and stats.scans[0].scanned == 4
    # every twin pair, twin x near / emb1 / emb2, near x emb1 / emb2 (Jaccard 8/9), the cosine pair emb1-emb3
    assert stats.edges == size * (size - 1) // 2 + 3 * size + 2 + 1
    by_id = {it.id: it for it in items}
    placed = [i for c in clusters for i in c.ids]
    assert len(placed) == len(set(placed))
    assert set(placed) == {it.id for it in items} - {"n-far"}
    for cluster in clusters:
        members = [by_id[i] for i in cluster.ids]
        inside = [similarity(a, b) for a, b in combinations(members, 2)]
        inside = [(w, m) for w, m in inside if w >= 0.88]
        for member in members:  # every member next to a near-duplicate
            assert any(similarity(member, o)[0] >= 0.88 for o in members if o is not member)
        assert cluster.min_similarity == min(w for w, _ in inside)
        kinds = {m for _, m in inside}
        assert cluster.measure == (kinds.pop() if len(kinds) == 1 else "mixed")
    assert sum(1 for c in clusters if len(c.ids) > max_size) == stats.oversize_clusters <= 1
    # the same result as expanding the class: brute force and LSH agree
    assert find_clusters(items, max_cluster_size=max_size, strategy="brute") == clusters
    assert find_clusters(items, max_cluster_size=max_size, strategy="lsh") == clusters


# --------------------------------------------------------------------------------------------- scopes, mixes


def test_twins_never_span_scope_groups() -> None:
    items = [item(f"p{k}", TEXT, "prefs/a") for k in range(5)]
    items += [item(f"q{k}", TEXT, "Prefs/b") for k in range(3)]  # same top level: twins of the p's
    items += [item(f"c{k}", TEXT, "context") for k in range(6)]
    items += [item(f"n{k}", TEXT, None) for k in range(2)]
    scoped = _assert_matches_reference(items, 0.88, 4, True, ("brute", "lsh"))
    groups = [set("pq"), set("c"), set("n")]
    assert all(any({i[0] for i in c.ids} <= group for group in groups) for c in scoped)  # no mixing of scopes
    assert sum(len(c.ids) for c in scoped) == len(items)
    _, stats = clusters_with_stats(items, same_top_level_category=True)
    assert stats.twin_entries == 16 and [scan.scanned for scan in stats.scans] == [1, 1, 1]
    _assert_matches_reference(items, 0.88, 4, False, ("brute", "lsh"))


def test_embedded_entries_with_identical_text_are_not_twins() -> None:
    # cosine decides between them: orthogonal vectors are no pair even though the texts are identical
    items = [item(f"e{k}", TEXT, embedding=np.eye(6)[k]) for k in range(6)]
    assert find_clusters(items) == [] and edges_of(items) == []
    # one entry without an embedding links all of them (Jaccard 1.0 each) into one component
    with_plain = [*items, item("plain", TEXT)]
    _assert_matches_reference(with_plain, 0.88, 3, False, ("brute", "lsh"))
    assert len(edges_of(with_plain)) == 6


def test_degenerate_embeddings_make_twins() -> None:
    # a zero vector is unusable: that entry is compared by Jaccard everywhere, so it is a twin of plain ones
    items = [item("a", TEXT, embedding=[0.0, 0.0]), item("b", TEXT), item("c", TEXT, embedding=[1.0, 0.0])]
    _, stats = clusters_with_stats(items)
    assert stats.twin_entries == 2
    _assert_matches_reference(items, 0.88, 8, False, ("brute", "lsh"))


def test_twin_classes_linked_to_each_other() -> None:
    # classes A and B at Jaccard 8/9, B and C at 9/10: one component of 3 nodes and 15 entries
    items = [item(f"a{k:02d}", TEXT) for k in range(5)]
    items += [item(f"b{k:02d}", NEAR) for k in range(6)]
    items += [item(f"c{k:02d}", f"{NEAR} juliet") for k in range(4)]
    items += [item("z-bridge", f"{NEAR} juliet", embedding=[1.0, 0.0])]
    for max_size in (2, 3, 4, 8, 16):
        _assert_matches_reference(items, 0.88, max_size, False, ("brute", "lsh"))


# --------------------------------------------------------------------------------------------- properties

POOL = [
    TEXT,
    NEAR,
    f"{NEAR} juliet",
    "rocky prefers concise status",
    "rocky prefers concise",
    "the build server",  # one token of 4+ chars ("build", "server"): two tokens
    "is it on",  # no tokens
]


@st.composite
def duplicated_corpora(draw: st.DrawFn) -> list[ClusterItem]:
    """Corpora drawn from a few texts, vectors and categories, so twin classes and mixed classes are common."""
    n = draw(st.integers(2, 24))
    vectors: list[list[float] | None] = [None, None, [1.0, 0.0], [0.96, 0.28], [0.0, 1.0], [1.0, 0.0, 0.0], []]
    items = []
    for k in range(n):
        text = draw(st.sampled_from(POOL))
        vector = draw(st.sampled_from(vectors))
        category = draw(st.sampled_from([None, "a/x", "a/y", "b"]))
        items.append(item(f"i{k:02d}", text, category, vector))
    return items


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    items=duplicated_corpora(),
    threshold=st.sampled_from([0.5, 0.75, 0.88, 0.95, 1.0]),
    max_size=st.integers(2, 6),
    scoped=st.booleans(),
)
def test_twin_collapse_matches_the_entry_level_greedy(
    items: list[ClusterItem], threshold: float, max_size: int, scoped: bool
) -> None:
    expected = _assert_matches_reference(items, threshold, max_size, scoped, ("brute",))
    # LSH may miss a pair near the threshold (recall 0.999 per pair, random corpora here), never a wrong one;
    # identical token sets collide in every band, so every Jaccard pair at 1.0 is always found.
    ordered, edges = _oracle(items, threshold, scoped)
    oracle = {(ordered[i].id, ordered[j].id): value for (i, j), value in edges.items()}
    found = {(p.a, p.b): (p.similarity, p.measure) for p in edges_of(
        items, threshold=threshold, same_top_level_category=scoped, strategy="lsh")}  # fmt: skip
    assert found.items() <= oracle.items()
    assert {pair for pair, (w, m) in oracle.items() if (w, m) == (1.0, "jaccard")} <= set(found)
    if found == oracle:
        lsh = find_clusters(
            items, threshold=threshold, max_cluster_size=max_size, same_top_level_category=scoped, strategy="lsh"
        )
        assert lsh == expected


# --------------------------------------------------------------------------------------------- LSH vs brute


def _templated_corpus(n: int, seed: int) -> list[ClusterItem]:
    """Template facts: a few dozen templates, many copies differing only in short numbers (identical token sets),
    some with a word changed, half of the families embedded."""
    rng = np.random.default_rng(seed)
    words = [f"word{k:03d}" for k in range(400)]
    templates = [list(rng.choice(words, int(rng.integers(6, 14)), replace=False)) for _ in range(60)]
    embedded = {t: rng.standard_normal(16) if rng.random() < 0.5 else None for t in range(60)}
    items: list[ClusterItem] = []
    for k in range(n):
        t = int(rng.integers(0, 60) if rng.random() < 0.5 else rng.integers(0, 6))  # a few very large classes
        tokens = list(templates[t])
        if rng.random() < 0.2:
            tokens[int(rng.integers(0, len(tokens)))] = str(rng.choice(words))
        base = embedded[t]
        vector = None if base is None else (base + rng.standard_normal(16) * 0.05).astype(np.float32)
        text = " ".join(tokens) + f" v{int(rng.integers(0, 99))} 10.0.{int(rng.integers(0, 9))}.1"
        items.append(ClusterItem(f"x{k:05d}", text, None, vector))
    return items


def test_lsh_and_brute_agree_on_templated_corpora() -> None:
    items = _templated_corpus(3000, seed=4)
    brute, brute_stats = clusters_with_stats(items, strategy="brute")
    lsh, lsh_stats = clusters_with_stats(items, strategy="lsh")
    assert brute_stats.twin_entries > 500  # the copies differing only in short numbers
    assert lsh_stats.edges == brute_stats.edges > 100_000
    assert lsh == brute
    pairs = edges_of(items[:400], strategy="lsh")
    assert pairs == edges_of(items[:400], strategy="brute")
    assert len(pairs) == sum(1 for a, b in combinations(items[:400], 2) if similarity(a, b)[0] >= 0.88)


def test_strength_units_are_exact_and_order_free() -> None:
    a, b, c = 0.88, 0.89, 0.97
    assert (a + b) + c != a + (b + c)  # a float strength would depend on the order edges are summed in
    units = splitting.strength_units
    assert (units(a) + units(b)) + units(c) == units(a) + (units(b) + units(c))
    assert units(0.9) * 3 == units(0.9) + units(0.9) + units(0.9)  # a twin class's n edges = n x one edge
    assert splitting.strength_units(1.0) == 2**64 and math.isclose(splitting.strength_units(0.5) / 2**64, 0.5)
