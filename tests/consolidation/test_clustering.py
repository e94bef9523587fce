"""Near-duplicate clustering: measures, thresholds, scoping, chunking, determinism, LSH recall vs brute force."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dreamkeeper.consolidation.clustering import (
    Cluster,
    ClusteringError,
    ClusteringStats,
    ClusterItem,
    Strategy,
    buckets,
    find,
    find_clusters,
)
from dreamkeeper.consolidation.clustering.graph import SimilarPair
from dreamkeeper.consolidation.clustering.plans import TARGET_RECALL, LshPlan, plan_minhash, plan_simhash
from dreamkeeper.consolidation.clustering.scan import edge_graph
from dreamkeeper.consolidation.clustering.similarity import jaccard_tokens, similarity

Vector = npt.NDArray[np.float64]


def item(
    entry_id: str, content: str, category: str | None = None, embedding: Sequence[float] | Vector | None = None
) -> ClusterItem:
    vector = None if embedding is None else np.asarray(embedding, dtype=np.float32)
    return ClusterItem(entry_id, content, category, vector)


def unit(rng: np.random.Generator, dim: int) -> Vector:
    v = rng.standard_normal(dim)
    return v / np.linalg.norm(v)


def at_cosine(rng: np.random.Generator, base: Vector, cosine: float) -> Vector:
    """A unit vector at exactly ``cosine`` (in float64) from unit ``base``."""
    noise = rng.standard_normal(len(base))
    noise -= noise.dot(base) * base
    noise /= np.linalg.norm(noise)
    return cosine * base + math.sqrt(1.0 - cosine * cosine) * noise


def id_sets(clusters: Sequence[Cluster]) -> list[tuple[str, ...]]:
    return [c.ids for c in clusters]


def clusters_with_stats(items: Sequence[ClusterItem], **options: Any) -> tuple[list[Cluster], ClusteringStats]:
    """``find_clusters`` and the stats it filled in."""
    stats = ClusteringStats()
    return find_clusters(items, stats=stats, **options), stats


def edges_of(
    items: Sequence[ClusterItem],
    *,
    threshold: float = 0.88,
    same_top_level_category: bool = False,
    strategy: Strategy = "auto",
    seed: int | None = None,
) -> list[SimilarPair]:
    """The accepted edges as entry pairs sorted by ids: the graph ``find_clusters`` assembles, twin classes expanded."""
    graph = edge_graph(
        items,
        threshold=threshold,
        same_top_level_category=same_top_level_category,
        strategy=strategy,
        seed=seed,
        stats=ClusteringStats(),
    )
    return graph.entry_pairs()


# --------------------------------------------------------------------------------------------- tokens, similarity


def test_tokens_follow_rockbot_rules() -> None:
    assert jaccard_tokens("Rocky prefers concise status") == {"rocky", "prefers", "concise", "status"}
    # three characters or fewer are dropped; apostrophes stay inside a token; punctuation splits
    assert jaccard_tokens("The cat's hat is on gpt-4o today!") == {"cat's", "today"}
    assert jaccard_tokens("") == frozenset()
    assert jaccard_tokens("a an the of 42 ok") == frozenset()


def test_tokens_are_unicode_aware_and_normalised() -> None:
    assert jaccard_tokens("Kraków café naïve Zürich") == {"kraków", "café", "naïve", "zürich"}
    decomposed = "Cafe\u0301 Zu\u0308rich"
    assert jaccard_tokens(decomposed) == {"café", "zürich"}
    assert jaccard_tokens("Rocky’s") == jaccard_tokens("Rocky's") == {"rocky's"}


def test_rockbot_jaccard_example() -> None:
    a = item("a", "Rocky prefers concise status")
    b = item("b", "Rocky prefers concise")
    # {rocky, prefers, concise, status} vs {rocky, prefers, concise}: 3 shared of 4 in the union
    assert similarity(a, b) == (0.75, "jaccard")
    assert id_sets(find_clusters([a, b], threshold=0.75)) == [("a", "b")]
    assert find_clusters([a, b], threshold=0.76) == []
    assert find_clusters([a, b]) == []  # default 0.88


def test_edge_graph_lists_the_accepted_edges() -> None:
    items = [
        item("c", "Rocky prefers concise"),
        item("a", "Rocky prefers concise status"),
        item("b", "unrelated words entirely"),
        item("d", "unrelated words entirely", embedding=[1.0, 0.0]),
        item("e", "something else", embedding=[1.0, 0.0]),
    ]
    assert edges_of(items, threshold=0.75) == [
        SimilarPair("a", "c", 0.75, "jaccard"),
        SimilarPair("b", "d", 1.0, "jaccard"),
        SimilarPair("d", "e", 1.0, "cosine"),
    ]
    assert edges_of([]) == [] and find_clusters([]) == [] and find_clusters(items[:1]) == []


def test_empty_token_sets_have_no_jaccard_neighbours() -> None:
    a, b = item("a", "is it on"), item("b", "is it on")
    assert similarity(a, b) == (0.0, "jaccard")
    assert find_clusters([a, b], threshold=0.01) == []


def test_cosine_when_both_have_same_dimension_embeddings() -> None:
    a = item("a", "completely different words here", embedding=[1.0, 0.0, 0.0])
    b = item("b", "nothing shared whatsoever", embedding=[1.0, 0.01, 0.0])
    value, measure = similarity(a, b)
    assert measure == "cosine" and value == pytest.approx(1.0 / math.sqrt(1.0001))
    assert id_sets(find_clusters([a, b])) == [("a", "b")]
    assert find_clusters([a, b])[0].measure == "cosine"


def test_cosine_governs_a_pair_even_when_the_texts_are_identical() -> None:
    # never mix scales within a pair: embedded on both sides means cosine, and these vectors are orthogonal
    a = item("a", "Rocky prefers concise status", embedding=[1.0, 0.0])
    b = item("b", "Rocky prefers concise status", embedding=[0.0, 1.0])
    assert similarity(a, b) == (0.0, "cosine")
    assert find_clusters([a, b], threshold=0.5) == []


@pytest.mark.parametrize(
    "embedding_b",
    [None, [1.0, 0.0, 0.0, 0.0], [0.0, 0.0], [float("nan"), 1.0, 0.0], [float("inf"), 1.0, 0.0], [1e30, 1.0, 0.0], []],
    ids=["missing", "other-dimension", "zero-vector", "nan", "inf", "norm-overflows", "empty"],
)
@pytest.mark.filterwarnings("error")  # an unusable vector is an answer, not a numpy RuntimeWarning in the log
def test_jaccard_fallback_for_mixed_or_unusable_embeddings(embedding_b: list[float] | None) -> None:
    a = item("a", "Rocky prefers concise status updates", embedding=[1.0, 0.0, 0.0])
    b = item("b", "Rocky prefers concise status updates", embedding=embedding_b)
    if embedding_b == [0.0, 0.0]:
        a = item("a", "Rocky prefers concise status updates", embedding=[1.0, 0.0])
    assert similarity(a, b) == (1.0, "jaccard")
    strategies: tuple[Strategy, ...] = ("brute", "lsh")
    for strategy in strategies:
        clusters = find_clusters([a, b], strategy=strategy)
        assert clusters == [Cluster(("a", "b"), 1.0, "jaccard")]


def test_mixed_cluster_reports_mixed_measure_and_weakest_edge() -> None:
    a = item("a", "alpha words only", embedding=[1.0, 0.0])
    b = item("b", "beta other tokens", embedding=[0.96, 0.28])  # cosine 0.96 with a
    c = item("c", "beta other tokens")  # Jaccard 1.0 with b, 0.0 with a
    (cluster,) = find_clusters([c, b, a], threshold=0.9)
    assert cluster.ids == ("a", "b", "c")
    assert cluster.measure == "mixed"
    assert cluster.min_similarity == similarity(a, b)[0]


def test_invalid_embedding_types_raise_clustering_error() -> None:
    bad_type = ClusterItem("x", "text here", None, [1.0, 2.0])  # type: ignore[arg-type]
    two_d = ClusterItem("y", "text here", None, np.ones((1, 3), dtype=np.float32))
    complex_ = ClusterItem("z", "text here", None, np.ones(3, dtype=np.complex64))
    for bad in (bad_type, two_d, complex_):
        with pytest.raises(ClusteringError, match=repr(bad.id)):
            find_clusters([bad, item("ok", "text here")])
        with pytest.raises(ClusteringError):
            similarity(bad, item("ok", "text here"))


def test_lsh_with_every_candidate_filtered_out_finds_nothing() -> None:
    # regression (found by the oracle property test): the Hamming prefilter rejecting every bucket pair
    items = [item(f"i{k:02d}", "") for k in range(13)]
    items[8] = item("i08", "", embedding=[0.0, 0.0, -1.0])
    items[12] = item("i12", "", embedding=[1.0, 0.0, 0.0])
    assert find_clusters(items, threshold=0.3, strategy="lsh") == []


# --------------------------------------------------------------------------------------------- thresholds


@pytest.mark.parametrize("strategy", ["brute", "lsh"])
def test_jaccard_threshold_is_inclusive(strategy: Strategy) -> None:
    shared = [f"word{k:02d}" for k in range(22)]
    a = item("a", " ".join([*shared, "onlya"]))
    b = item("b", " ".join([*shared, "onlyb", "extrab"]))
    assert similarity(a, b) == (22 / 25, "jaccard") and 22 / 25 == 0.88
    assert id_sets(find_clusters([a, b], threshold=0.88, strategy=strategy)) == [("a", "b")]
    above = float(np.nextafter(0.88, 1.0))
    assert find_clusters([a, b], threshold=above, strategy=strategy) == []


@pytest.mark.parametrize("strategy", ["brute", "lsh"])
def test_cosine_threshold_is_inclusive_and_matches_similarity(strategy: Strategy) -> None:
    rng = np.random.default_rng(7)
    base = unit(rng, 64)
    a = item("a", "first", embedding=base)
    b = item("b", "second", embedding=at_cosine(rng, base, 0.9))
    exact, measure = similarity(a, b)
    assert measure == "cosine"
    (cluster,) = find_clusters([a, b], threshold=exact, strategy=strategy, seed=1)
    assert cluster.min_similarity == exact  # batch verification and similarity() agree to the last bit
    above = float(np.nextafter(exact, 2.0))
    assert find_clusters([a, b], threshold=above, strategy=strategy, seed=1) == []


@pytest.mark.parametrize("threshold", [0.0, -0.5, 1.5, float("nan"), "high"])
def test_bad_threshold_is_a_value_error(threshold: object) -> None:
    with pytest.raises(ValueError, match="threshold"):
        find_clusters([item("a", "x")], threshold=threshold)  # type: ignore[arg-type]


def test_max_cluster_size_below_two_disables_clustering() -> None:
    items = [item("a", "same words here"), item("b", "same words here")]
    assert find_clusters(items, max_cluster_size=1) == []
    assert find_clusters(items, max_cluster_size=0) == []
    assert id_sets(find_clusters(items, max_cluster_size=2)) == [("a", "b")]


# --------------------------------------------------------------------------------------------- category scoping


def test_same_top_level_category_scoping() -> None:
    text = "Rocky prefers concise status updates"
    items = [
        item("p1", text, "user-preferences/communication"),
        item("p2", text, "User-Preferences/style"),  # same top level, other case and sub-path
        item("c1", text, "project-context/blazor"),
        item("n1", text, None),
        item("n2", text, None),
    ]
    assert id_sets(find_clusters(items)) == [("c1", "n1", "n2", "p1", "p2")]
    assert id_sets(find_clusters(items, same_top_level_category=True)) == [("n1", "n2"), ("p1", "p2")]


# --------------------------------------------------------------------------------------------- splitting


def _text_group(prefix: str, size: int, common: int = 12) -> list[str]:
    """``size`` texts sharing ``common`` tokens and one private token each (pairwise Jaccard common/(common+2))."""
    shared = " ".join(f"{prefix}shared{k:02d}" for k in range(common))
    return [f"{shared} {prefix}private{k:02d}" for k in range(size)]


def test_split_keeps_tight_groups_together_despite_interleaved_ids() -> None:
    # Two tight groups of four joined by one weaker bridge; ids interleave so id-order chunking would mix them.
    group_a = _text_group("alpha", 4)
    group_b = _text_group("bravo", 4)
    items = [item(f"e{2 * k}", text) for k, text in enumerate(group_a)]
    items += [item(f"e{2 * k + 1}", text) for k, text in enumerate(group_b)]
    bridge_vector = [1.0, 0.0]
    items[0] = item("e0", group_a[0], embedding=bridge_vector)
    items[4] = item("e1", group_b[0], embedding=[0.852, math.sqrt(1 - 0.852**2)])  # bridge weaker than 12/14
    clusters = find_clusters(items, threshold=0.85, max_cluster_size=4)
    assert id_sets(clusters) == [("e0", "e2", "e4", "e6"), ("e1", "e3", "e5", "e7")]
    assert all(c.measure == "jaccard" for c in clusters)


def test_clique_split_strands_no_member() -> None:
    items = [item(f"id{k:02d}", text) for k, text in enumerate(_text_group("x", 10))]
    clusters, stats = clusters_with_stats(items, threshold=0.8, max_cluster_size=3)
    sizes = sorted(len(c.ids) for c in clusters)
    assert sizes == [3, 3, 4]  # the tenth member, left alone, joins the chunk of its strongest neighbour
    assert sorted(i for c in clusters for i in c.ids) == [f"id{k:02d}" for k in range(10)]
    assert stats.oversize_clusters == 1


def test_star_component_keeps_every_leaf_with_the_hub() -> None:
    # Leaves are near-duplicates of the hub only, so every leaf must share a cluster with it.
    hub = " ".join(f"core{k:02d}" for k in range(8))
    leaves = [f"{hub} leaf{k:02d}" for k in range(6)]  # hub-leaf 8/9, leaf-leaf 8/10
    items = [item("hub", hub)] + [item(f"leaf{k}", text) for k, text in enumerate(leaves)]
    (cluster,) = find_clusters(items, threshold=0.85, max_cluster_size=3)
    assert len(cluster.ids) == 7
    assert cluster.min_similarity == pytest.approx(8 / 9)


def test_path_component_chunks_are_connected() -> None:
    # a chain: consecutive entries share 9 of 11 tokens (0.82), entries two apart 8 of 12 (0.67)
    words = [f"chain{k:02d}" for k in range(30)]
    items = [item(f"n{k:02d}", " ".join(words[k : k + 10])) for k in range(12)]
    clusters = find_clusters(items, threshold=0.8, max_cluster_size=3)
    assert sorted(i for c in clusters for i in c.ids) == [it.id for it in items]
    for cluster in clusters:
        assert 2 <= len(cluster.ids) <= 4
        members = [next(it for it in items if it.id == i) for i in cluster.ids]
        for m in members:
            assert any(similarity(m, o)[0] >= 0.8 for o in members if o is not m)


# --------------------------------------------------------------------------------------------- determinism


def test_output_is_independent_of_input_order_and_repeatable() -> None:
    items = _planted_corpus(600, seed=3, dim=0)
    expected = find_clusters(items, max_cluster_size=3, strategy="lsh")
    assert expected  # the corpus has near-duplicates
    assert [c.ids[0] for c in expected] == sorted(c.ids[0] for c in expected)
    for shuffle_seed in range(3):
        shuffled = list(items)
        random.Random(shuffle_seed).shuffle(shuffled)
        assert find_clusters(shuffled, max_cluster_size=3, strategy="lsh") == expected


# --------------------------------------------------------------------------------------------- errors


def test_duplicate_ids_raise() -> None:
    with pytest.raises(ClusteringError, match="'a' appears more than once"):
        find_clusters([item("a", "one"), item("b", "two"), item("a", "three")])


def test_internal_failure_becomes_clustering_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(*_: object, **__: object) -> None:
        raise MemoryError("simulated")

    monkeypatch.setattr(find, "assemble", explode)
    with pytest.raises(ClusteringError, match="MemoryError: simulated") as caught:
        find_clusters([item("a", "same text here"), item("b", "same text here")])
    assert isinstance(caught.value.__cause__, MemoryError)


def test_candidate_ceiling_raises_instead_of_exhausting_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(buckets, "MAX_EMITTED_PAIRS", 1000)
    shared = " ".join(f"common{k:02d}" for k in range(40))
    items = [item(f"e{k:03d}", f"{shared} own{k:03d}") for k in range(100)]  # pairwise 40/42: most bands collide
    with pytest.raises(ClusteringError, match="near-identical entries"):
        find_clusters(items, strategy="lsh")
    assert len(find_clusters(items, strategy="brute", max_cluster_size=200)[0].ids) == 100
    # identical entries are twins: one of them is hashed, so they never approach the ceiling
    twins = [item(f"t{k:03d}", shared) for k in range(1000)]
    clusters, stats = clusters_with_stats(twins, strategy="lsh", max_cluster_size=1000)
    assert [len(c.ids) for c in clusters] == [1000] and stats.scans[0].scanned == 1
    assert stats.edges == 1000 * 999 // 2 and stats.twin_entries == 1000


# --------------------------------------------------------------------------------------------- LSH plans


@pytest.mark.parametrize("threshold", [0.3, 0.5, 0.6, 0.75, 0.8, 0.85, 0.88, 0.9, 0.95, 0.99, 1.0])
def test_minhash_plan_meets_recall_by_formula(threshold: float) -> None:
    plan = plan_minhash(threshold)
    b, r = plan.bands, plan.rows
    assert 1.0 - (1.0 - threshold**r) ** b >= TARGET_RECALL
    assert plan.recall_at(threshold) == pytest.approx(1.0 - (1.0 - threshold**r) ** b)
    # more similar pairs are found at least as often
    assert plan.recall_at(min(1.0, threshold + 0.05)) >= plan.recall_at(threshold)


def test_default_minhash_plan() -> None:
    plan = plan_minhash(0.88)
    assert (plan.bands, plan.rows) == (16, 8)
    assert pytest.approx(0.99920, abs=1e-5) == 1.0 - (1.0 - 0.88**8) ** 16


def _simhash_recall(plan: LshPlan, cosine: float) -> float:
    """Independent statement of the formula: band collision times the Hamming prefilter's pass probability."""
    p = 1.0 - math.acos(cosine) / math.pi
    band = 1.0 - (1.0 - p**plan.rows) ** plan.bands
    q, n = 1.0 - p, plan.filter_bits
    passes = sum(math.comb(n, k) * q**k * p ** (n - k) for k in range(plan.filter_max_distance + 1)) if n else 1.0
    return band * passes


@pytest.mark.parametrize("threshold", [0.7, 0.8, 0.88, 0.9, 0.95, 0.99])
@pytest.mark.parametrize("items", [500, 10_000, 100_000])
@pytest.mark.parametrize("background", [0.0, 0.3, 0.5])
def test_simhash_plan_meets_recall_by_formula(threshold: float, items: int, background: float) -> None:
    sample = np.clip(np.random.default_rng(0).normal(background, 0.1, 2000), -1, 1)
    plan = plan_simhash(threshold, items=items, dim=384, sample_cosines=sample, allow_brute_force=False)
    assert plan is not None
    assert _simhash_recall(plan, threshold) >= TARGET_RECALL
    assert plan.recall_at(threshold) == pytest.approx(_simhash_recall(plan, threshold))
    assert _simhash_recall(plan, min(1.0, threshold + 0.03)) >= _simhash_recall(plan, threshold)


def test_simhash_plan_prefers_brute_force_when_cheaper() -> None:
    assert plan_simhash(0.88, items=300, dim=384, sample_cosines=[0.0]) is None
    assert plan_simhash(0.88, items=100_000, dim=384, sample_cosines=[0.0]) is not None


# --------------------------------------------------------------------------------------------- LSH vs brute force


def _planted_corpus(
    n: int,
    seed: int,
    dim: int | Sequence[int],
    *,
    planted: float = 0.15,
    categories: Sequence[str | None] = (None,),
) -> list[ClusterItem]:
    """Random entries over a Zipf vocabulary with planted near-duplicates (token edits, vector noise)."""
    rng = np.random.default_rng(seed)
    vocabulary = [f"w{k:04d}x" for k in range(3000)]
    weights = 1.0 / np.arange(1, len(vocabulary) + 1) ** 0.9
    weights /= weights.sum()
    dims = [dim] if isinstance(dim, int) else list(dim)
    topics = {d: rng.standard_normal((20, d)) for d in dims if d}
    texts: list[list[str]] = []
    vectors: list[Vector | None] = []
    cats: list[str | None] = []
    for k in range(n):
        if k and rng.random() < planted:
            source = int(rng.integers(0, k))
            tokens = list(texts[source])
            for _ in range(int(rng.integers(0, 3))):
                if rng.random() < 0.5 and len(tokens) > 4:
                    tokens.pop(int(rng.integers(0, len(tokens))))
                else:
                    tokens.append(vocabulary[int(rng.choice(len(vocabulary), p=weights))])
            base = vectors[source]
            vector = None if base is None else base + rng.standard_normal(len(base)) * float(rng.uniform(0.005, 0.03))
            category = cats[source] if rng.random() < 0.8 else categories[int(rng.integers(0, len(categories)))]
        else:
            tokens = [vocabulary[i] for i in rng.choice(len(vocabulary), int(rng.integers(5, 20)), p=weights)]
            d = dims[int(rng.integers(0, len(dims)))]
            if d:
                topic = topics[d][int(rng.integers(0, 20))]
                vector = 0.5 * topic / np.linalg.norm(topic) + rng.standard_normal(d) / math.sqrt(d)
            else:
                vector = None
            category = categories[int(rng.integers(0, len(categories)))]
        texts.append(tokens)
        vectors.append(vector)
        cats.append(category)
    return [
        ClusterItem(f"e{k:05d}", " ".join(t), c, None if v is None else v.astype(np.float32))
        for k, (t, v, c) in enumerate(zip(texts, vectors, cats, strict=True))
    ]


def _above_threshold_pairs(items: Sequence[ClusterItem], threshold: float) -> int:
    return sum(1 for a, b in combinations(items, 2) if similarity(a, b)[0] >= threshold)


@pytest.mark.parametrize(
    ("label", "dim", "categories"),
    [
        ("jaccard", 0, (None,)),
        ("cosine", 384, (None,)),
        ("mixed-dims-and-missing", (0, 64, 128), (None,)),
        ("scoped", (0, 64), ("user-preferences/a", "project-context/b", None)),
    ],
)
def test_lsh_agrees_with_brute_force_on_planted_corpora(
    label: str, dim: int | Sequence[int], categories: Sequence[str | None]
) -> None:
    items = _planted_corpus(2000, seed=11, dim=dim, categories=categories)
    scoped = label == "scoped"
    brute, brute_stats = clusters_with_stats(
        items, max_cluster_size=10_000, same_top_level_category=scoped, strategy="brute"
    )
    lsh, lsh_stats = clusters_with_stats(items, max_cluster_size=10_000, same_top_level_category=scoped, strategy="lsh")
    assert all(scan.strategy == "lsh" for scan in lsh_stats.scans)
    assert brute_stats.edges > 100  # plenty of planted near-duplicates at >= 0.88
    # LSH edges are a subset of brute-force edges (exact verification), so equal counts mean equal edge sets.
    assert lsh_stats.edges == brute_stats.edges
    assert lsh == brute
    # the brute-force reference itself agrees with pairwise similarity()
    if label == "cosine":
        assert (
            _above_threshold_pairs(items[:400], 0.88)
            == clusters_with_stats(items[:400], max_cluster_size=10_000, strategy="brute")[1].edges
        )


def test_minhash_detection_rate_at_exactly_the_threshold() -> None:
    # 3000 disjoint pairs, each at Jaccard exactly 22/25 = 0.88: every one is a pair LSH must find with
    # probability >= 0.999, so more than a dozen misses would contradict the plan (P < 1e-6 if it holds).
    pairs = 3000
    items: list[ClusterItem] = []
    for k in range(pairs):
        shared = [f"p{k}s{j}" for j in range(22)]
        items.append(item(f"a{k:05d}", " ".join([*shared, f"p{k}a0"])))
        items.append(item(f"b{k:05d}", " ".join([*shared, f"p{k}b0", f"p{k}b1"])))
    assert similarity(items[0], items[1])[0] == 0.88
    _, stats = clusters_with_stats(items, threshold=0.88, strategy="lsh")
    misses = pairs - stats.edges
    assert misses <= 12, f"{misses} of {pairs} threshold pairs missed"


def test_simhash_detection_rate_at_the_threshold() -> None:
    rng = np.random.default_rng(5)
    pairs = 2000
    items: list[ClusterItem] = []
    for k in range(pairs):
        base = unit(rng, 128)
        items.append(item(f"a{k:05d}", "x", embedding=base))
        items.append(item(f"b{k:05d}", "x", embedding=at_cosine(rng, base, 0.8801)))
    _, stats = clusters_with_stats(items, threshold=0.88, strategy="lsh")
    assert stats.scans[0].plan is not None
    misses = pairs - stats.edges
    assert misses <= 10, f"{misses} of {pairs} threshold pairs missed"


def test_lsh_recall_on_planted_pairs_is_complete() -> None:
    rng = np.random.default_rng(9)
    items = _planted_corpus(1700, seed=9, dim=0, planted=0.0)
    planted: list[tuple[str, str]] = []
    for k in range(300):
        source = items[int(rng.integers(0, 1700))]
        tokens = sorted(jaccard_tokens(source.content))
        if len(tokens) > 8 and rng.random() < 0.5:
            tokens = tokens[1:]
        twin = item(f"z{k:04d}", " ".join([*tokens, f"fresh{k}"]) if rng.random() < 0.5 else " ".join(tokens))
        items.append(twin)
        if similarity(source, twin)[0] >= 0.88:
            planted.append((source.id, twin.id))
    assert len(planted) > 100
    clusters = find_clusters(items, max_cluster_size=10_000, strategy="lsh")
    home = {i: c.ids for c in clusters for i in c.ids}
    missed = [pair for pair in planted if pair[1] not in home.get(pair[0], ())]
    assert missed == []


# --------------------------------------------------------------------------------------------- properties


def _oracle(items: Sequence[ClusterItem], threshold: float, scoped: bool) -> dict[tuple[int, int], tuple[float, str]]:
    def top(category: str | None) -> str | None:
        return None if category is None else category.strip().strip("/").split("/", 1)[0].strip().casefold()

    edges = {}
    for i, j in combinations(range(len(items)), 2):
        if scoped and top(items[i].category) != top(items[j].category):
            continue
        value, measure = similarity(items[i], items[j])
        if value >= threshold:
            edges[(i, j)] = (value, measure)
    return edges


WORDS = ["rocky", "prefers", "concise", "status", "blazor", "xebia", "lhotka", "duane"]


@st.composite
def corpora(draw: st.DrawFn) -> list[ClusterItem]:
    n = draw(st.integers(2, 18))
    items = []
    for k in range(n):
        words = draw(st.lists(st.sampled_from(WORDS), max_size=5))
        dim = draw(st.sampled_from([None, 2, 3]))
        vector = None if dim is None else draw(st.lists(st.integers(-1, 2), min_size=dim, max_size=dim))
        category = draw(st.sampled_from([None, "a/x", "a/y", "b"]))
        items.append(item(f"i{k:02d}", " ".join(words), category, vector))
    return items


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    items=corpora(),
    threshold=st.sampled_from([0.3, 0.5, 0.75, 0.88, 1.0]),
    max_size=st.integers(2, 6),
    scoped=st.booleans(),
)
def test_clusters_match_the_pairwise_oracle(
    items: list[ClusterItem], threshold: float, max_size: int, scoped: bool
) -> None:
    edges = _oracle(items, threshold, scoped)
    index = {it.id: k for k, it in enumerate(items)}
    # ids are i00, i01, ... in item order, so i < j means items[i].id < items[j].id
    expected_pairs = [
        SimilarPair(items[i].id, items[j].id, value, measure) for (i, j), (value, measure) in edges.items()
    ]
    expected_pairs.sort(key=lambda pair: (pair.a, pair.b))
    assert edges_of(items, threshold=threshold, same_top_level_category=scoped, strategy="brute") == expected_pairs
    lsh_pairs = edges_of(items, threshold=threshold, same_top_level_category=scoped, strategy="lsh")
    assert set(lsh_pairs) <= set(expected_pairs)  # precision is exact
    neighbours: dict[int, set[int]] = {k: set() for k in range(len(items))}
    for i, j in edges:
        neighbours[i].add(j)
        neighbours[j].add(i)

    whole = find_clusters(items, threshold=threshold, max_cluster_size=10_000, same_top_level_category=scoped,
                          strategy="brute")  # fmt: skip
    # unsplit: clusters are exactly the connected components of the oracle graph with >= 2 members
    components: dict[int, set[int]] = {}
    for start in range(len(items)):
        if start in components or not neighbours[start]:
            continue
        seen, stack = {start}, [start]
        while stack:
            for nxt in neighbours[stack.pop()] - seen:
                seen.add(nxt)
                stack.append(nxt)
        for member in seen:
            components[member] = seen
    expected = sorted({tuple(sorted(items[m].id for m in comp)) for comp in components.values()})
    assert sorted(c.ids for c in whole) == expected

    split, stats = clusters_with_stats(
        items, threshold=threshold, max_cluster_size=max_size, same_top_level_category=scoped, strategy="brute"
    )
    placed = [index[i] for c in split for i in c.ids]
    assert len(placed) == len(set(placed))  # disjoint
    assert set(placed) == {k for k in neighbours if neighbours[k]}  # nobody with a neighbour is dropped
    assert stats.oversize_clusters == sum(1 for c in split if len(c.ids) > max_size)
    for cluster in split:
        members = [index[i] for i in cluster.ids]
        assert list(cluster.ids) == sorted(cluster.ids)
        assert len({id(components[m]) for m in members}) == 1  # within one component
        inside = [edges[(a, b)] for a, b in combinations(sorted(members), 2) if (a, b) in edges]
        for m in members:  # every member sits next to one of its near-duplicates
            assert neighbours[m] & set(members)
        assert cluster.min_similarity == min(value for value, _ in inside)
        kinds = {measure for _, measure in inside}
        assert cluster.measure == (kinds.pop() if len(kinds) == 1 else "mixed")

    # LSH precision is exact: every LSH edge is an oracle edge
    lsh = find_clusters(items, threshold=threshold, max_cluster_size=10_000, same_top_level_category=scoped,
                        strategy="lsh")  # fmt: skip
    for cluster in lsh:
        members = [index[i] for i in cluster.ids]
        assert all(neighbours[m] & set(members) for m in members)


# --------------------------------------------------------------------------------------------- bench pipeline


def test_clustering_bench_quick_pipeline(tmp_path: Path) -> None:
    from bench.clustering_bench import main

    assert main(["--quick", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "clustering-quick.json").read_text())
    assert result["command"].startswith("python -m bench clustering --quick")
    assert {run["corpus"] for run in result["runs"]} == {"jaccard", "embedded", "mixed", "realistic"}
    for run in result["runs"]:
        assert run["auto"]["edges"] > 0
        assert run["lshEdgeRecall"] == 1.0 and run["sameClustersAsBrute"] is True
        assert run["plantedRecall"]["atThreshold"] > 0
        assert run["plantedRecall"]["found"] == run["plantedRecall"]["atThreshold"]
        assert run["lsh"]["scans"] and all(scan["strategy"] == "lsh" for scan in run["lsh"]["scans"])
    assert (tmp_path / "clustering-quick.md").read_text().startswith("# Near-duplicate clustering benchmark")
