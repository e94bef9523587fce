"""Near-duplicate clustering of memory entries: the "near-duplicate sibling" half of candidate gating.

A pair of entries is compared with **cosine** similarity when both carry a usable embedding of the same
dimension, otherwise with **Jaccard** similarity over RockBot's content tokens; one pair never mixes the two
scales. Pairs at or above the threshold are edges of a single-link graph (:func:`find_pairs`); its components of
two or more entries are the clusters (:func:`find_clusters`), split into chunks that keep every entry next to
one of its near-duplicates and hold at most ``max_cluster_size`` entries, unless an entry would otherwise be
stranded (:func:`_split_component`).

RockBot compared every pair (quadratic, and it capped the snapshot at 1000 entries). Here candidate pairs come
from locality-sensitive hashing and every candidate is verified with the exact similarity, so precision is
exact and the only approximation is recall, bounded per pair:

* Jaccard: MinHash signatures in ``bands`` x ``rows``; a pair at similarity s is a candidate with probability
  ``1 - (1 - s**rows)**bands``, chosen >= 0.999 at the threshold (:func:`plan_minhash`).
* cosine: random-hyperplane (SimHash) bands, sign agreement per plane ``p = 1 - angle/pi``; candidates then pass
  a Hamming prefilter on the same sketch before the exact check; recall of the two stages together >= 0.999 at
  the threshold (:func:`plan_simhash`, which also falls back to blocked brute force when that is cheaper).

Small groups (< 500 entries) use vectorised brute force, which is also the reference implementation in tests.
Everything is deterministic: entries are processed in id order and the hash seeds derive from the corpus.

**Twins.** Template facts that differ only in short numbers, hosts or IPs have identical token sets (RockBot's
tokens are runs longer than 3 characters). Entries of one scope group with the same token set and no usable
embedding are twins: every pair involving one of them is a Jaccard pair decided by the token set alone, so they
are pairwise at 1.0 and equally similar to every other entry. Each distinct token set is hashed and compared
once; a twin class stays one node of the edge graph (:class:`_Graph`) and :func:`_split_component` runs the
entry-level greedy on nodes, so a class of thousands costs its chunks, not its k^2 pairs, and the clusters are
exactly those of the explicit graph. :func:`find_pairs` expands the classes, since its answer is the pairs.
MinHash candidates also pass an exact upper bound on Jaccard from 256-bit token masks (:func:`_jaccard_bound`)
before they are stored, so the many template siblings at Jaccard 0.3-0.8 cost a few ns each, not an
intersection.
"""

from __future__ import annotations

import functools
import hashlib
import heapq
import itertools
import logging
import math
import re
import time
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

import numpy as np
import numpy.typing as npt

logger = logging.getLogger(__name__)

Measure = Literal["cosine", "jaccard"]
_T = TypeVar("_T")
Strategy = Literal["auto", "brute", "lsh"]

TARGET_RECALL = 0.999
"""Per-pair probability that LSH offers a pair at exactly the threshold (higher above it)."""
BRUTE_FORCE_BELOW = 500
"""Groups smaller than this are compared exhaustively (strategy ``auto``)."""
MAX_CANDIDATE_PAIRS = 20_000_000
"""Distinct LSH candidate pairs above which the scan gives up (ClusteringError) instead of exhausting memory."""
MAX_EMITTED_PAIRS = 200_000_000
"""Bucket pairs summed over bands (before dedupe) above which the scan gives up instead of running for minutes."""
MINHASH_MAX_HASHES = 128
SIMHASH_MAX_BITS = 4096
SIMHASH_FILTER_BITS = 256
SIMHASH_SAMPLE_PAIRS = 4096

_PAIR_BATCH = 262_144  # bucket pairs generated and filtered at a time (~60 bytes of temporaries each)
_COMPACT_AT = 4_000_000  # candidate codes held (8 bytes each) before duplicates are squeezed out
_PROBE_BATCH = 1_000_000  # token probes per batch of exact intersections
_TOKEN_BATCH = 1 << 20  # tokens per MinHash chunk (4 bytes of hash value each, one hash function at a time)
_ENTRY_BATCH = 4096  # entries tokenised and numbered together (their token strings are held only meanwhile)
_TOKEN_MASK_WORDS = 4  # 256-bit token masks per entry for the exact Jaccard bound (32 bytes per entry)
_COSINE_MARGIN = 1e-3  # float32 screening slack; pairs within it are decided in float64 like similarity()
# Runs of Unicode letters/digits/apostrophes longer than 3: that is [^\W_] or "'", but a single class repeats in
# sre's fast loop (2x faster than the alternation), so underscores are turned into spaces first.
_TOKEN_RE = re.compile(r"[\w']{4,}")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})
_MEASURE_CODES: tuple[Measure, Measure] = ("cosine", "jaccard")
_COSINE, _JACCARD = 0, 1

_U64 = np.uint64
_MIX1 = _U64(0xBF58476D1CE4E5B9)
_MIX2 = _U64(0x94D049BB133111EB)

IntArray = npt.NDArray[np.int64]
U64Array = npt.NDArray[np.uint64]
F32Array = npt.NDArray[np.float32]
F64Array = npt.NDArray[np.float64]


class ClusteringError(RuntimeError):
    """The near-duplicate scan could not run; callers degrade to unreviewed-only, never to the whole corpus."""


@dataclass(frozen=True, slots=True)
class ClusterItem:
    id: str
    content: str
    category: str | None
    embedding: npt.NDArray[np.floating] | None  # float32 vector as stored in .embeddings/<id>.bin, or None


@dataclass(frozen=True, slots=True)
class Cluster:
    ids: tuple[str, ...]  # >= 2 members, sorted by id (ordinal)
    min_similarity: float  # weakest accepted (>= threshold) edge inside the cluster
    measure: str  # "cosine" | "jaccard" | "mixed": the measures of the edges inside the cluster


@dataclass(frozen=True, slots=True)
class SimilarPair:
    """One accepted edge: two entries at or above the threshold (``a < b``)."""

    a: str
    b: str
    similarity: float
    measure: str  # "cosine" | "jaccard"


# --------------------------------------------------------------------------------------------- similarity


def jaccard_tokens(text: str) -> frozenset[str]:
    """RockBot's clustering tokens: lowercase runs of letters, digits and apostrophes, longer than 3 chars.

    Unicode-aware (RockBot's ``[a-z0-9']`` dropped accented and non-Latin words); NFC first so composed and
    decomposed accents agree, and typographic apostrophes count as ``'`` so "Rocky’s" matches "Rocky's".
    """
    return frozenset(_token_list(text))


def _token_list(text: str) -> list[str]:
    # A greedy {4,} run never starts mid-run (a shorter run fails at its first char), so this is exactly the
    # maximal runs longer than 3 chars, found in C rather than filtered in Python.
    if not text.isascii():
        text = unicodedata.normalize("NFC", text).translate(_APOSTROPHES)
    tokens: list[str] = _TOKEN_RE.findall(text.lower().replace("_", " "))
    return tokens


def similarity(a: ClusterItem, b: ClusterItem) -> tuple[float, str]:
    """Similarity of one pair and its measure: cosine when both have same-dimension usable embeddings."""
    va, vb = _usable_vector(a), _usable_vector(b)
    if va is not None and vb is not None and va.shape == vb.shape:
        rows_a = va.astype(np.float64)[None, :]
        rows_b = vb.astype(np.float64)[None, :]
        return float(_cosine_rows(rows_a, rows_b)[0]), "cosine"
    return _jaccard(jaccard_tokens(a.content), jaccard_tokens(b.content)), "jaccard"


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def _cosine_rows(a: F64Array, b: F64Array) -> F64Array:
    """Row-wise cosine in float64; the one formula behind every accepted cosine edge and :func:`similarity`.

    Row reductions over a contiguous axis give each row the same result whatever the batch size, so a
    batch-verified edge and a single ``similarity()`` call agree to the last bit at the threshold.
    """
    dots = (a * b).sum(axis=1)
    norms = np.sqrt((a * a).sum(axis=1)) * np.sqrt((b * b).sum(axis=1))
    result: F64Array = np.clip(dots / norms, -1.0, 1.0)
    return result


def _usable_vector(item: ClusterItem) -> npt.NDArray[np.floating] | None:
    """The item's embedding if cosine can use it; None if absent or degenerate (empty, non-finite, all zero).

    A degenerate vector (a truncated or corrupt .bin file) is data, so the entry falls back to Jaccard;
    a wrong *type* is a caller bug and raises.
    """
    emb = item.embedding
    if emb is None:
        return None
    if not isinstance(emb, np.ndarray):
        raise ClusteringError(
            f"entry {item.id!r}: embedding must be a numpy.ndarray or None, got {type(emb).__name__}; nothing was "
            "clustered"
        )
    if emb.ndim != 1:
        raise ClusteringError(
            f"entry {item.id!r}: embedding must be one-dimensional, got shape {emb.shape}; nothing was clustered"
        )
    kind = emb.dtype.kind
    if kind not in "fiu":
        raise ClusteringError(
            f"entry {item.id!r}: embedding must be real-valued, got dtype {emb.dtype}; nothing was clustered"
        )
    if emb.size == 0:
        return None
    # One reduction catches NaN, infinities, overflow of the squared norm and the all-zero vector.
    wide = emb if kind == "f" else emb.astype(np.float64)
    squared = float(np.dot(wide, wide))
    if not math.isfinite(squared) or squared <= 0.0:
        return None
    return emb


# --------------------------------------------------------------------------------------------- LSH plans


@dataclass(frozen=True, slots=True)
class LshPlan:
    """Banding parameters of one LSH scan and the recall they guarantee."""

    measure: Measure
    bands: int
    rows: int
    filter_bits: int = 0  # cosine only: width of the Hamming prefilter sketch (0 = no prefilter)
    filter_max_distance: int = 0  # cosine only: pairs differing in more sketch bits are dropped

    @property
    def hashes(self) -> int:
        return self.bands * self.rows

    def hash_agreement(self, similarity: float) -> float:
        """Probability that one hash (MinHash value / hyperplane sign) agrees for a pair at ``similarity``."""
        if self.measure == "jaccard":
            return min(max(similarity, 0.0), 1.0)
        return 1.0 - math.acos(min(max(similarity, -1.0), 1.0)) / math.pi

    def recall_at(self, similarity: float) -> float:
        """Probability that a pair at ``similarity`` reaches exact verification (monotone in similarity)."""
        p = self.hash_agreement(similarity)
        found = 1.0 - (1.0 - p**self.rows) ** self.bands
        if self.filter_bits:
            # Band collisions and a small Hamming distance are both increasing events of the independent
            # per-plane agreements, so by Harris' inequality P(both) >= P(collide) * P(pass).
            found *= _binomial_cdf(self.filter_max_distance, self.filter_bits, 1.0 - p)
        return found


def _binomial_cdf(k: int, n: int, q: float) -> float:
    """P(X <= k) for X ~ Binomial(n, q)."""
    if k >= n:
        return 1.0
    if q <= 0.0:
        return 1.0
    if q >= 1.0:
        return 0.0
    return min(1.0, sum(math.comb(n, i) * q**i * (1.0 - q) ** (n - i) for i in range(k + 1)))


def _bands_needed(p: float, rows: int, recall: float) -> int | None:
    """Fewest bands of ``rows`` hashes that find a pair with per-hash agreement ``p`` with prob >= recall."""
    per_band = p**rows
    if per_band >= 1.0:
        return 1
    if per_band <= 0.0:
        return None
    bands = max(1, math.ceil(math.log(1.0 - recall) / math.log1p(-per_band)))
    while 1.0 - (1.0 - per_band) ** bands < recall:  # guard the float rounding of the closed form
        bands += 1
    return bands


def plan_minhash(threshold: float, *, recall: float = TARGET_RECALL, max_hashes: int = MINHASH_MAX_HASHES) -> LshPlan:
    """Most selective banding (largest ``rows``) within ``max_hashes`` that keeps recall at the threshold.

    More rows per band means fewer dissimilar pairs collide; more hashes cost signature time. Jaccard between
    unrelated memory entries is low, so a fixed budget is enough (0.88 -> 16 bands x 8 rows).
    """
    best: LshPlan | None = None
    for rows in range(1, 33):
        bands = _bands_needed(threshold, rows, recall)
        if bands is None or bands * rows > max_hashes:
            break
        best = LshPlan("jaccard", bands=bands, rows=rows)
    if best is None:  # a threshold so low that even single-hash bands exceed the budget: correctness first
        bands = _bands_needed(threshold, 1, recall)
        if bands is None:
            raise ValueError(f"threshold {threshold} admits no MinHash plan")
        best = LshPlan("jaccard", bands=bands, rows=1)
    return best


@dataclass(frozen=True, slots=True)
class _Costs:
    """Seconds per unit on the 2-core x86 runner (measured), used only to *choose* a plan, never for correctness."""

    projection: float = 2.5e-11  # per item x bit x dimension (float32 GEMM on two threads)
    band: float = 2e-8  # per item x band (key radix sort, bucket boundaries)
    emitted_pair: float = 9e-8  # per emitted candidate pair (pair generation and the Hamming prefilter)
    brute_pair_dim: float = 2.5e-11  # per pair x dimension (blocked GEMM)
    brute_pair: float = 2e-9  # per pair (thresholding the block)


_COSTS = _Costs()


def plan_simhash(
    threshold: float,
    *,
    items: int,
    dim: int,
    sample_cosines: Sequence[float] | npt.NDArray[np.floating] = (),
    recall: float = TARGET_RECALL,
    max_bits: int = SIMHASH_MAX_BITS,
    allow_brute_force: bool = True,
) -> LshPlan | None:
    """Cheapest SimHash banding with recall >= ``recall`` at ``threshold``; None when brute force is cheaper.

    How many unrelated pairs collide depends on the embedding model (anisotropic models put unrelated texts at
    cosine 0.3-0.5), so the expected number of emitted candidate pairs is estimated from ``sample_cosines``, the
    cosines of random pairs of this corpus, and traded against the projection cost of more bits. When unrelated
    pairs sit near cosine 0.5 or above, hyperplane LSH cannot separate them cheaply and blocked brute force
    (quadratic, exact) is chosen instead.
    """
    p_t = 1.0 - math.acos(min(max(threshold, -1.0), 1.0)) / math.pi
    q_t = 1.0 - p_t
    sample = np.asarray(sample_cosines, dtype=np.float64)
    agreement = 1.0 - np.arccos(np.clip(sample, -1.0, 1.0)) / math.pi if sample.size else np.array([0.5])
    pairs = items * (items - 1) / 2
    stage_miss = (1.0 - recall) / 2  # split the miss budget between banding and the prefilter
    best: LshPlan | None = None
    best_cost = math.inf
    for rows in range(4, 25):
        first = _bands_needed(p_t, rows, 1.0 - stage_miss)
        if first is None or first * rows > max_bits:
            break
        filter_bits = min(SIMHASH_FILTER_BITS, (first * rows) // 64 * 64)
        if filter_bits:
            max_distance = _hamming_bound(filter_bits, q_t, stage_miss)
            passes = _binomial_cdf(max_distance, filter_bits, q_t)
            bands = _bands_needed(p_t, rows, recall / passes)
        else:
            max_distance, bands = 0, _bands_needed(p_t, rows, recall)
        if bands is None:
            continue
        plan = LshPlan("cosine", bands=bands, rows=rows, filter_bits=filter_bits, filter_max_distance=max_distance)
        emitted = pairs * float(np.mean(bands * agreement**rows))
        if allow_brute_force and emitted > MAX_EMITTED_PAIRS / 4:
            continue  # the sample is only an estimate: keep well clear of the ceiling that aborts the scan
        cost = (
            _COSTS.projection * items * dim * plan.hashes + _COSTS.band * items * bands + _COSTS.emitted_pair * emitted
        )
        if cost < best_cost:
            best, best_cost = plan, cost
    brute_cost = pairs * (_COSTS.brute_pair_dim * dim + _COSTS.brute_pair)
    if allow_brute_force and (best is None or brute_cost <= best_cost):
        return None
    return best


@functools.lru_cache(maxsize=256)
def _hamming_bound(bits: int, q: float, miss: float) -> int:
    """Smallest distance d with P(Binomial(bits, q) > d) <= miss."""
    cumulative = 0.0
    for distance in range(bits + 1):
        cumulative += math.comb(bits, distance) * q**distance * (1.0 - q) ** (bits - distance)
        if 1.0 - cumulative <= miss:
            return distance
    return bits


# --------------------------------------------------------------------------------------------- statistics


@dataclass(frozen=True, slots=True)
class ScanRecord:
    """How one group of entries was scanned (for logs and benchmarks)."""

    scope: str | None  # top-level category when scoped, else None
    measure: Measure
    dim: int  # embedding dimension for cosine, 0 for Jaccard
    items: int
    strategy: Literal["brute", "lsh"]
    plan: LshPlan | None
    emitted_pairs: int  # LSH: bucket pairs summed over bands (duplicates included); brute force: all pairs
    candidate_pairs: int  # distinct pairs kept (after the cosine Hamming prefilter / the Jaccard token-mask
    # bound; brute force: all pairs)
    verified_pairs: int  # pairs whose exact similarity was computed (after the cosine Hamming prefilter)
    edges: int  # entry pairs at or above the threshold (twin classes counted pair by pair)
    scanned: int = 0  # entries hashed / compared: Jaccard scans one entry per distinct token set, cosine all items


@dataclass(slots=True)
class ClusteringStats:
    items: int = 0
    empty_token_items: int = 0  # no token longer than 3 chars: no Jaccard neighbours
    embedded_items: int = 0
    degenerate_embeddings: int = 0  # present but empty/non-finite/all-zero: fell back to Jaccard
    edges: int = 0
    components: int = 0
    clusters: int = 0
    oversize_clusters: int = 0  # exceeded max_cluster_size by absorbing a stranded neighbour
    twin_entries: int = 0  # entries scanned through a twin (same token set, no embedding, same scope group)
    seconds: float = 0.0
    scans: list[ScanRecord] = field(default_factory=list)


# --------------------------------------------------------------------------------------------- entry point


def find_clusters(
    items: Sequence[ClusterItem],
    *,
    threshold: float = 0.88,
    max_cluster_size: int = 8,
    same_top_level_category: bool = False,
    strategy: Strategy = "auto",
    seed: int | None = None,
) -> list[Cluster]:
    """Near-duplicate clusters of ``items``, sorted by first id.

    Single-link over every pair with similarity >= ``threshold``; components larger than ``max_cluster_size``
    are split by :func:`_split_component`; ``max_cluster_size < 2`` disables clustering. With
    ``same_top_level_category`` only entries whose first category segment matches (case-insensitively; None
    only with None) are linked. ``strategy`` forces brute force or LSH (tests, benchmarks); ``seed`` overrides
    the corpus-derived hash seed.

    Raises ValueError for options out of range (a configuration bug) and ClusteringError for anything that
    stops the scan itself (bad items, resource exhaustion, internal failure).
    """
    clusters, _ = find_clusters_with_stats(
        items,
        threshold=threshold,
        max_cluster_size=max_cluster_size,
        same_top_level_category=same_top_level_category,
        strategy=strategy,
        seed=seed,
    )
    return clusters


def find_clusters_with_stats(
    items: Sequence[ClusterItem],
    *,
    threshold: float = 0.88,
    max_cluster_size: int = 8,
    same_top_level_category: bool = False,
    strategy: Strategy = "auto",
    seed: int | None = None,
) -> tuple[list[Cluster], ClusteringStats]:
    """:func:`find_clusters` plus how the scan went."""
    threshold = _checked_options(threshold, strategy)
    if not isinstance(max_cluster_size, int) or isinstance(max_cluster_size, bool):
        raise ValueError(f"max_cluster_size must be an integer, got {max_cluster_size!r}")
    stats = ClusteringStats(items=len(items))
    if max_cluster_size < 2:
        return [], stats

    def run() -> list[Cluster]:
        graph = _scan(items, threshold, same_top_level_category, strategy, seed, stats)
        return _assemble(graph, max_cluster_size, stats)

    return _guarded(run, stats), stats


def find_pairs(
    items: Sequence[ClusterItem],
    *,
    threshold: float = 0.88,
    same_top_level_category: bool = False,
    strategy: Strategy = "auto",
    seed: int | None = None,
) -> list[SimilarPair]:
    """Every pair at or above ``threshold`` (the edges :func:`find_clusters` links), sorted by ``(a, b)``.

    For callers that need the near-duplicate *pairs* themselves, e.g. to fold one entry into its duplicate.
    """
    pairs, _ = find_pairs_with_stats(
        items, threshold=threshold, same_top_level_category=same_top_level_category, strategy=strategy, seed=seed
    )
    return pairs


def find_pairs_with_stats(
    items: Sequence[ClusterItem],
    *,
    threshold: float = 0.88,
    same_top_level_category: bool = False,
    strategy: Strategy = "auto",
    seed: int | None = None,
) -> tuple[list[SimilarPair], ClusteringStats]:
    """:func:`find_pairs` plus how the scan went."""
    threshold = _checked_options(threshold, strategy)
    stats = ClusteringStats(items=len(items))

    def run() -> list[SimilarPair]:
        graph = _scan(items, threshold, same_top_level_category, strategy, seed, stats)
        ids = graph.ids
        # Entries are in id order, so the lower index holds the lower id. Twin classes are expanded here: the
        # caller asked for every pair.
        pairs = [
            SimilarPair(ids[min(a, b)], ids[max(a, b)], w, _MEASURE_CODES[m])
            for u, v, w, m in graph.edge_list()
            for a in graph.members(u)
            for b in graph.members(v)
        ]
        for twins in graph.twins.values():
            pairs.extend(SimilarPair(ids[a], ids[b], 1.0, "jaccard") for a, b in itertools.combinations(twins, 2))
        pairs.sort(key=lambda pair: (pair.a, pair.b))
        return pairs

    return _guarded(run, stats), stats


def _checked_options(threshold: float, strategy: Strategy) -> float:
    try:
        value = float(threshold)
    except (TypeError, ValueError):
        raise ValueError(f"clustering threshold must be a number in (0, 1], got {threshold!r}") from None
    if not math.isfinite(value) or not 0.0 < value <= 1.0:
        raise ValueError(f"clustering threshold must be in (0, 1], got {threshold!r}")
    if strategy not in ("auto", "brute", "lsh"):
        raise ValueError(f"clustering strategy must be auto, brute or lsh, got {strategy!r}")
    return value


def _guarded(run: Callable[[], _T], stats: ClusteringStats) -> _T:
    """Run a scan; anything but a ClusteringError becomes one (the caller degrades, the cycle goes on)."""
    started = time.perf_counter()
    try:
        result = run()
    except ClusteringError:
        raise
    except Exception as exc:  # MemoryError, numpy errors, bugs
        raise ClusteringError(
            f"near-duplicate scan of {stats.items} entries failed: {type(exc).__name__}: {exc}; no clusters produced"
        ) from exc
    stats.seconds = time.perf_counter() - started
    logger.debug(
        "near-duplicate scan — %d entries, %d edge(s), %d cluster(s) (%d oversize) in %.2fs",
        stats.items,
        stats.edges,
        stats.clusters,
        stats.oversize_clusters,
        stats.seconds,
    )
    return result


# --------------------------------------------------------------------------------------------- preparation


@dataclass(slots=True)
class _Corpus:
    """Entries in id order, flattened into arrays."""

    ids: list[str]
    token_ptr: IntArray  # CSR offsets into token_ids, length n + 1
    token_ids: IntArray  # vocabulary ids, ascending within each entry
    token_hashes: U64Array  # 64-bit content hash per vocabulary id (input-order independent)
    dims: IntArray  # embedding dimension, -1 when absent or degenerate
    vectors: list[npt.NDArray[np.floating] | None]
    scopes: list[str | None]
    seed: int  # hash seed derived from ids and contents

    def vector(self, index: int) -> npt.NDArray[np.floating]:
        vector = self.vectors[index]
        if vector is None:  # only called for entries with dims >= 0
            raise ClusteringError(f"internal error: entry {self.ids[index]!r} has no usable embedding")
        return vector

    @property
    def token_counts(self) -> IntArray:
        counts: IntArray = np.diff(self.token_ptr)
        return counts

    @property
    def vocabulary(self) -> int:
        return len(self.token_hashes)


def _prepare(items: Sequence[ClusterItem], stats: ClusteringStats) -> _Corpus:
    for item in items:
        if not isinstance(item, ClusterItem):
            raise ClusteringError(f"expected ClusterItem, got {type(item).__name__}; nothing was clustered")
        if not isinstance(item.id, str) or not item.id:
            raise ClusteringError(f"entry id must be a non-empty string, got {item.id!r}; nothing was clustered")
        if not isinstance(item.content, str):
            raise ClusteringError(f"entry {item.id!r}: content must be a string; nothing was clustered")
    ordered = sorted(items, key=lambda item: item.id)
    for before, after in itertools.pairwise(ordered):
        if before.id == after.id:
            raise ClusteringError(f"entry id {after.id!r} appears more than once; nothing was clustered")

    vectors = [_usable_vector(item) for item in ordered]
    dims = np.fromiter((-1 if v is None else v.shape[0] for v in vectors), dtype=np.int64, count=len(ordered))
    stats.degenerate_embeddings = sum(
        1 for v, item in zip(vectors, ordered, strict=True) if v is None and item.embedding is not None
    )
    # Tokens only matter for Jaccard pairs; a corpus embedded throughout with one model has none. Tokens become
    # vocabulary numbers a batch of entries at a time, so beyond a batch only one string per distinct token is held.
    vocabulary: dict[str, int] = {}
    numbered: list[IntArray] = []
    sized: list[IntArray] = []
    if len(ordered) and (dims.min() < 0 or dims.min() != dims.max()):
        for lo in range(0, len(ordered), _ENTRY_BATCH):
            token_lists = [_token_list(item.content) for item in ordered[lo : lo + _ENTRY_BATCH]]
            flat = list(itertools.chain.from_iterable(token_lists))
            fresh = [token for token in dict.fromkeys(flat) if token not in vocabulary]
            vocabulary.update(zip(fresh, range(len(vocabulary), len(vocabulary) + len(fresh)), strict=True))
            numbers = np.fromiter(map(vocabulary.__getitem__, flat), dtype=np.int64, count=len(flat))
            lengths = np.fromiter(map(len, token_lists), dtype=np.int64, count=len(token_lists))
            owners = np.repeat(np.arange(len(token_lists), dtype=np.int64), lengths)
            order = np.lexsort((numbers, owners))  # each entry's token numbers ascending, repeats adjacent
            numbers, owners = numbers[order], owners[order]
            distinct = np.ones(len(numbers), dtype=bool)
            distinct[1:] = (numbers[1:] != numbers[:-1]) | (owners[1:] != owners[:-1])
            numbered.append(numbers[distinct])
            sized.append(np.bincount(owners[distinct], minlength=len(token_lists)).astype(np.int64))
    counts: IntArray = np.concatenate(sized) if sized else np.zeros(len(ordered), np.int64)
    if stats.degenerate_embeddings:
        logger.warning(
            "near-duplicate scan: %d embedding(s) empty, non-finite or all-zero — those entries are compared by "
            "Jaccard; the vectors were left as they are",
            stats.degenerate_embeddings,
        )
    token_ids: IntArray = np.concatenate(numbered) if numbered else np.empty(0, np.int64)
    del numbered
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    hashes = np.fromiter(
        (int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little") for token in vocabulary),
        dtype=np.uint64,
        count=len(vocabulary),
    )
    del vocabulary
    corpus = _Corpus(
        ids=[item.id for item in ordered],
        token_ptr=offsets,
        token_ids=token_ids,
        token_hashes=hashes,
        dims=dims,
        vectors=vectors,
        scopes=list(map(functools.lru_cache(maxsize=None)(_top_level), (item.category for item in ordered))),
        seed=_corpus_seed(ordered),
    )
    stats.empty_token_items = int(np.count_nonzero(corpus.token_counts == 0))
    stats.embedded_items = int(np.count_nonzero(dims >= 0))
    return corpus


def _top_level(category: str | None) -> str | None:
    if category is None:
        return None
    return category.strip().strip("/").split("/", 1)[0].strip().casefold()


def _corpus_seed(ordered: Sequence[ClusterItem]) -> int:
    """Hash seed from ids and contents: fixed for a given corpus, fresh when it changes.

    A pair LSH happens to miss (probability <= 0.001) is thereby not missed forever: any edit re-draws it.
    """
    digest = hashlib.blake2b(digest_size=8)
    digest.update("\x00".join(item.id for item in ordered).encode(errors="surrogatepass"))
    digest.update(b"\x01")
    digest.update("\x00".join(item.content for item in ordered).encode(errors="surrogatepass"))
    return int.from_bytes(digest.digest(), "little")


# --------------------------------------------------------------------------------------------- the scan


@dataclass(slots=True)
class _Edges:
    left: list[IntArray] = field(default_factory=list)
    right: list[IntArray] = field(default_factory=list)
    weight: list[F64Array] = field(default_factory=list)
    measure: list[npt.NDArray[np.int8]] = field(default_factory=list)

    def add(self, left: IntArray, right: IntArray, weight: F64Array, measure: int) -> None:
        if len(left):
            self.left.append(left)
            self.right.append(right)
            self.weight.append(weight)
            self.measure.append(np.full(len(left), measure, dtype=np.int8))

    def arrays(self) -> tuple[IntArray, IntArray, F64Array, npt.NDArray[np.int8]]:
        if not self.left:
            return (
                np.empty(0, np.int64),
                np.empty(0, np.int64),
                np.empty(0, np.float64),
                np.empty(0, np.int8),
            )
        return (
            np.concatenate(self.left),
            np.concatenate(self.right),
            np.concatenate(self.weight),
            np.concatenate(self.measure),
        )


@dataclass(slots=True)
class _Graph:
    """The accepted edges, with twin classes kept whole.

    A node is one entry or a twin class: entries of one scope group with the same non-empty token set and no
    usable embedding. Every pair involving a twin is a Jaccard pair decided by the token set alone, so twins
    are pairwise at 1.0 and equally similar to everything else; one edge between nodes stands for every entry
    pair across them, and a twin class is an implicit clique at 1.0. A node is named by its lowest entry index.
    """

    ids: list[str]
    left: IntArray  # node pairs (each pair once)
    right: IntArray
    weight: F64Array
    measure: npt.NDArray[np.int8]
    twins: dict[int, list[int]]  # twin class node -> its entries (>= 2, ascending)

    def members(self, node: int) -> list[int]:
        return self.twins.get(node) or [node]

    def edge_list(self) -> list[tuple[int, int, float, int]]:
        return list(
            zip(self.left.tolist(), self.right.tolist(), self.weight.tolist(), self.measure.tolist(), strict=True)
        )


def _scan(
    items: Sequence[ClusterItem],
    threshold: float,
    scoped: bool,
    strategy: Strategy,
    seed: int | None,
    stats: ClusteringStats,
) -> _Graph:
    """Every accepted edge between nodes (see :class:`_Graph`), per scope group and measure."""
    corpus = _prepare(items, stats)
    if seed is None:
        seed = corpus.seed
    edges = _Edges()
    twins: dict[int, list[int]] = {}
    groups: dict[str | None, list[int]] = defaultdict(list)
    for index, scope in enumerate(corpus.scopes):
        groups[scope if scoped else None].append(index)
    for scope, members in sorted(groups.items(), key=lambda kv: (kv[0] is not None, kv[0] or "")):
        group = np.asarray(members, dtype=np.int64)
        label = scope if scoped else None
        _scan_jaccard(corpus, group, threshold, strategy, seed, edges, twins, stats, label)
        group_dims = corpus.dims[group]
        for dim in np.unique(group_dims[group_dims >= 0]).tolist():
            embedded = group[group_dims == dim]
            if len(embedded) >= 2:
                _scan_cosine(corpus, embedded, int(dim), threshold, strategy, seed, edges, stats, label)
    graph = _Graph(corpus.ids, *edges.arrays(), twins=twins)
    stats.twin_entries = sum(len(members) for members in twins.values())
    stats.edges = sum(scan.edges for scan in stats.scans)
    return graph


@dataclass(slots=True)
class _TokenClasses:
    """Members of one scope group grouped by identical token set; classes in order of their first member.

    Within a class, the entries without a usable embedding form one node (a twin class when >= 2); each
    embedded entry is its own node, because its pairs with other embedded entries may be cosine pairs.
    """

    reps: IntArray  # first (lowest) entry of each class: the one that is hashed and compared
    twin_node: IntArray  # node of the class's non-embedded entries, -1 when it has none
    twin_size: IntArray  # how many non-embedded entries that node holds
    embedded_ptr: IntArray  # CSR offsets into embedded (per class)
    embedded: IntArray  # the class's embedded entries, ascending
    embedded_dim: IntArray  # one dimension shared by all of the class's embedded entries, -1 if they differ
    pure_dim: IntArray  # dimension when every entry of the class is embedded with it (no Jaccard pair inside)


def _token_classes(corpus: _Corpus, members: IntArray, twins: dict[int, list[int]]) -> _TokenClasses:
    """Group ``members`` (ascending, non-empty token sets) by token set; registers twin classes in ``twins``.

    Sets are matched by a 128-bit order-free hash and then compared exactly; a (vanishingly rare) collision
    only leaves the colliding entries in classes of their own, which is still correct: identical sets in two
    classes are found by the scan as a pair at Jaccard 1.0.
    """
    counts = corpus.token_counts[members]
    tokens = corpus.token_ids[_ragged(corpus.token_ptr[members], counts)]
    starts = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
    salt = _seed_words(0x7A11, 4, 1)[0]
    first = np.add.reduceat(_mix64(corpus.token_hashes[tokens]), starts)
    second = np.add.reduceat(_mix64(corpus.token_hashes[tokens] ^ salt), starts)
    order = np.lexsort((second, first, counts))  # stable: equal sets stay in ascending entry order
    s_first, s_second, s_counts = first[order], second[order], counts[order]
    new_key = np.ones(len(order), dtype=bool)
    new_key[1:] = (s_first[1:] != s_first[:-1]) | (s_second[1:] != s_second[:-1]) | (s_counts[1:] != s_counts[:-1])
    head = order[np.maximum.accumulate(np.where(new_key, np.arange(len(order)), 0))]  # first member of the key
    # Exact check of every member against the head of its key.
    check = np.flatnonzero(~new_key)
    if len(check):
        mine = tokens[_ragged(starts[order[check]], s_counts[check])]
        theirs = tokens[_ragged(starts[head[check]], s_counts[check])]
        mismatched = np.bincount(np.repeat(np.arange(len(check)), s_counts[check]), weights=mine != theirs)
        head[check[mismatched > 0]] = order[check[mismatched > 0]]
    class_of = np.empty(len(order), dtype=np.int64)
    class_of[order] = head  # class label = local position of its first member
    labels, class_index = np.unique(class_of, return_inverse=True)  # ascending first member = ascending entry
    n_classes = len(labels)
    dims = corpus.dims[members]
    plain = dims < 0
    twin_size = np.bincount(class_index[plain], minlength=n_classes).astype(np.int64)
    twin_node = np.full(n_classes, -1, dtype=np.int64)
    plain_positions = np.flatnonzero(plain)  # ascending, so the first of each class is its lowest entry
    plain_classes = class_index[plain_positions]
    _, first_plain = np.unique(plain_classes, return_index=True)
    twin_node[plain_classes[first_plain]] = members[plain_positions[first_plain]]
    # Twin lists in one pass: plain members sorted by class (stable, so ascending within each class).
    by_plain_class = plain_positions[np.argsort(plain_classes, kind="stable")]
    bounds = np.concatenate(([0], np.cumsum(twin_size))).astype(np.int64)
    for label in np.flatnonzero(twin_size >= 2).tolist():
        twins[int(twin_node[label])] = members[by_plain_class[bounds[label] : bounds[label + 1]]].tolist()
    embedded_positions = np.flatnonzero(~plain)
    embedded_classes = class_index[embedded_positions]
    by_class = np.argsort(embedded_classes, kind="stable")
    embedded_count = np.bincount(embedded_classes, minlength=n_classes).astype(np.int64)
    embedded_ptr = np.concatenate(([0], np.cumsum(embedded_count))).astype(np.int64)
    embedded_dims = dims[embedded_positions[by_class]]
    low = np.full(n_classes, np.iinfo(np.int64).max, dtype=np.int64)
    high = np.full(n_classes, -1, dtype=np.int64)
    np.minimum.at(low, embedded_classes[by_class], embedded_dims)
    np.maximum.at(high, embedded_classes[by_class], embedded_dims)
    embedded_dim = np.where((embedded_count > 0) & (low == high), high, -1)
    return _TokenClasses(
        reps=members[labels],
        twin_node=twin_node,
        twin_size=twin_size,
        embedded_ptr=embedded_ptr,
        embedded=members[embedded_positions[by_class]],
        embedded_dim=embedded_dim,
        pure_dim=np.where(twin_size == 0, embedded_dim, -1),
    )


def _scan_jaccard(
    corpus: _Corpus,
    group: IntArray,
    threshold: float,
    strategy: Strategy,
    seed: int,
    edges: _Edges,
    twins: dict[int, list[int]],
    stats: ClusteringStats,
    scope: str | None,
) -> None:
    members = group[corpus.token_counts[group] > 0]
    if len(members) < 2:
        return
    member_dims = corpus.dims[members]
    if member_dims.min() >= 0 and member_dims.min() == member_dims.max():
        return  # every pair here is a cosine pair
    classes = _token_classes(corpus, members, twins)
    reps = classes.reps
    logical = _inside_classes(classes, corpus.dims, edges)
    use_brute = strategy == "brute" or (strategy == "auto" and len(reps) < BRUTE_FORCE_BELOW)
    plan = None if use_brute else plan_minhash(threshold)
    if plan is None:
        left, right, inter, union = _jaccard_all_pairs(corpus, reps)
        emitted = distinct = verified = len(reps) * (len(reps) - 1) // 2
        left, right = np.searchsorted(reps, left), np.searchsorted(reps, right)
    else:
        pure = classes.pure_dim

        may_reach = _jaccard_bound(corpus, reps, threshold)

        def jaccard_pair(a: IntArray, b: IntArray) -> npt.NDArray[np.bool_]:
            keep: npt.NDArray[np.bool_] = (pure[a] < 0) | (pure[a] != pure[b])
            keep[keep] = may_reach(a[keep], b[keep])
            return keep

        left, right, emitted, distinct = _minhash_candidates(corpus, reps, plan, seed, jaccard_pair)
        verified = len(left)
        inter, union = _intersections(corpus, reps[left], reps[right])
    weight = inter.astype(np.float64) / union.astype(np.float64)  # same division as similarity()
    accept = weight >= threshold
    logical += _across_classes(classes, corpus.dims, left[accept], right[accept], weight[accept], edges)
    stats.scans.append(
        ScanRecord(
            scope=scope,
            measure="jaccard",
            dim=0,
            items=len(members),
            strategy="brute" if plan is None else "lsh",
            plan=plan,
            emitted_pairs=emitted,
            candidate_pairs=distinct,
            verified_pairs=verified,
            edges=logical,
            scanned=len(reps),
        )
    )


def _jaccard_bound(corpus: _Corpus, members: IntArray, threshold: float) -> PairFilter:
    """Exact pre-check for MinHash candidates (local indices): False only for pairs that cannot reach ``threshold``.

    Each member's tokens are hashed into a small bit mask. A bucket that A occupies and B does not holds at least
    one token of A missing from B, so ``|A & B| <= |A| - popcount(mask_A & ~mask_B)`` (and symmetrically); Jaccard
    grows with the intersection, so the bound on it bounds Jaccard. Template facts that share most words but
    differ in one are the bulk of LSH candidates, and almost all of them fail this check at a few ns per pair,
    so they are never stored or intersected exactly.
    """
    counts = corpus.token_counts[members]
    tokens = corpus.token_ids[_ragged(corpus.token_ptr[members], counts)]
    bits = _TOKEN_MASK_WORDS * 64
    bucket = (_mix64(corpus.token_hashes ^ _seed_words(0x7A11, 5, 1)[0]) % np.uint64(bits)).astype(np.int64)[tokens]
    owner = np.repeat(np.arange(len(members), dtype=np.int64), counts)
    masks = np.zeros(_TOKEN_MASK_WORDS * len(members), dtype=np.uint64)  # word-major: word w of member m at w*n+m
    np.bitwise_or.at(
        masks, (bucket >> 6) * len(members) + owner, np.left_shift(np.uint64(1), (bucket & 63).astype(np.uint64))
    )
    words = masks.reshape(_TOKEN_MASK_WORDS, len(members))

    def may_reach(a: IntArray, b: IntArray) -> npt.NDArray[np.bool_]:
        only_a = np.zeros(len(a), dtype=np.int64)
        only_b = np.zeros(len(a), dtype=np.int64)
        for word in words:  # one word at a time keeps the temporaries at 8 bytes per pair
            wa, wb = word[a], word[b]
            only_a += np.bitwise_count(wa & ~wb)
            only_b += np.bitwise_count(wb & ~wa)
        size_a, size_b = counts[a], counts[b]
        inter = np.minimum(size_a - only_a, size_b - only_b)
        union = size_a + size_b - inter  # >= the larger set, never 0
        result: npt.NDArray[np.bool_] = inter.astype(np.float64) / union.astype(np.float64) >= threshold
        return result

    return may_reach


def _inside_classes(classes: _TokenClasses, dims: IntArray, edges: _Edges) -> int:
    """Edges inside each token class (Jaccard 1.0); returns the entry pairs they stand for, twin cliques included.

    Twin node to each embedded entry of its class, and embedded entries of different dimensions to each other.
    """
    sizes = classes.twin_size
    logical = int((sizes * (sizes - 1) // 2).sum())
    counts = np.diff(classes.embedded_ptr)
    with_twins = np.repeat(classes.twin_node, counts)
    keep = with_twins >= 0
    edges.add(with_twins[keep], classes.embedded[keep], np.ones(int(keep.sum())), _JACCARD)
    logical += int(np.repeat(sizes, counts)[keep].sum())
    lefts: list[int] = []
    rights: list[int] = []
    for label in np.flatnonzero((counts >= 2) & (classes.embedded_dim < 0)).tolist():
        inside = classes.embedded[classes.embedded_ptr[label] : classes.embedded_ptr[label + 1]].tolist()
        for a, b in itertools.combinations(inside, 2):
            if dims[a] != dims[b]:
                lefts.append(a)
                rights.append(b)
    edges.add(np.asarray(lefts, np.int64), np.asarray(rights, np.int64), np.ones(len(lefts)), _JACCARD)
    return logical + len(lefts)


def _across_classes(
    classes: _TokenClasses, dims: IntArray, left: IntArray, right: IntArray, weight: F64Array, edges: _Edges
) -> int:
    """Edges for accepted pairs of classes (local class numbers) at ``weight``; returns the entry pairs they stand for.

    Twin node to twin node, twin node to each embedded entry of the other class, and embedded entries of the two
    classes to each other where their dimensions differ (same-dimension pairs are cosine pairs).
    """
    twin_node, twin_size = classes.twin_node, classes.twin_size
    counts = np.diff(classes.embedded_ptr)
    both = (twin_node[left] >= 0) & (twin_node[right] >= 0)
    edges.add(twin_node[left][both], twin_node[right][both], weight[both], _JACCARD)
    logical = int((twin_size[left][both] * twin_size[right][both]).sum())
    for source, target in ((left, right), (right, left)):
        has = twin_node[source] >= 0
        source, target, with_weight = source[has], target[has], weight[has]
        spread = counts[target]
        others = classes.embedded[_ragged(classes.embedded_ptr[target], spread)]
        edges.add(np.repeat(twin_node[source], spread), others, np.repeat(with_weight, spread), _JACCARD)
        logical += int((twin_size[source] * spread).sum())
    same = (classes.embedded_dim[left] >= 0) & (classes.embedded_dim[left] == classes.embedded_dim[right])
    need = (counts[left] > 0) & (counts[right] > 0) & ~same
    lefts: list[int] = []
    rights: list[int] = []
    weights: list[float] = []
    for a_class, b_class, w in zip(left[need].tolist(), right[need].tolist(), weight[need].tolist(), strict=True):
        ptr = classes.embedded_ptr
        for a in classes.embedded[ptr[a_class] : ptr[a_class + 1]].tolist():
            for b in classes.embedded[ptr[b_class] : ptr[b_class + 1]].tolist():
                if dims[a] != dims[b]:
                    lefts.append(a)
                    rights.append(b)
                    weights.append(w)
    edges.add(np.asarray(lefts, np.int64), np.asarray(rights, np.int64), np.asarray(weights, np.float64), _JACCARD)
    return logical + len(lefts)


def _jaccard_all_pairs(corpus: _Corpus, members: IntArray) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """Brute force: intersections of every pair via blocked products of the token incidence matrix.

    Returns only pairs sharing at least one token (the rest have Jaccard 0 and can never pass a threshold > 0).
    """
    counts = corpus.token_counts[members]
    local = np.repeat(np.arange(len(members)), counts)
    tokens = corpus.token_ids[_ragged(corpus.token_ptr[members], counts)]
    # Tokens held by a single member cannot be shared; dropping them keeps the dense matrix narrow.
    _, inverse, frequency = np.unique(tokens, return_inverse=True, return_counts=True)
    shared = frequency[inverse] >= 2
    columns = np.cumsum(frequency >= 2) - 1
    incidence = np.zeros((len(members), max(1, int(np.count_nonzero(frequency >= 2)))), dtype=np.float32)
    incidence[local[shared], columns[inverse[shared]]] = 1.0
    lefts: list[IntArray] = [np.empty(0, np.int64)]
    rights: list[IntArray] = [np.empty(0, np.int64)]
    inters: list[IntArray] = [np.empty(0, np.int64)]
    block = max(1, (1 << 22) // max(1, len(members)))
    for start in range(0, len(members), block):
        stop = min(start + block, len(members))
        product = incidence[start:stop] @ incidence[start:].T  # exact small integers in float32
        rows, cols = np.nonzero(product > 0.5)
        upper = cols > rows  # row r is member start + r, column c is member start + c
        rows, cols = rows[upper], cols[upper]
        lefts.append(rows.astype(np.int64) + start)
        rights.append(cols.astype(np.int64) + start)
        inters.append(np.rint(product[rows, cols]).astype(np.int64))
    left = np.concatenate(lefts)
    right = np.concatenate(rights)
    inter = np.concatenate(inters)
    union = counts[left] + counts[right] - inter
    return members[left], members[right], inter, union


def _intersections(corpus: _Corpus, left: IntArray, right: IntArray) -> tuple[IntArray, IntArray]:
    """Exact token-set intersection and union sizes for pairs (vectorised, batched)."""
    counts = corpus.token_counts
    vocabulary = max(1, corpus.vocabulary)
    # (entry, token) keys of the whole corpus, ascending because token ids ascend within each entry.
    owners = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    keys = owners * vocabulary + corpus.token_ids
    inter = np.zeros(len(left), dtype=np.int64)
    small = np.where(counts[left] <= counts[right], left, right)
    large = np.where(counts[left] <= counts[right], right, left)
    # Probe the smaller set of each pair into the larger one, in batches of about a million probes.
    cumulative = np.cumsum(counts[small])
    cuts = np.searchsorted(cumulative, np.arange(_PROBE_BATCH, int(cumulative[-1]) if len(small) else 0, _PROBE_BATCH))
    bounds = sorted({0, len(left), *(int(c) + 1 for c in cuts)})
    for start, stop in itertools.pairwise(bounds):
        s, g = small[start:stop], large[start:stop]
        lengths = counts[s]
        probes = np.repeat(g * vocabulary, lengths) + corpus.token_ids[_ragged(corpus.token_ptr[s], lengths)]
        found = np.minimum(np.searchsorted(keys, probes), len(keys) - 1)
        hit = keys[found] == probes
        pair = np.repeat(np.arange(stop - start), lengths)
        inter[start:stop] = np.bincount(pair[hit], minlength=stop - start)
    union = counts[left] + counts[right] - inter
    return inter, union


def _ragged(starts: IntArray, lengths: IntArray) -> IntArray:
    """Concatenation of ranges [starts[k], starts[k] + lengths[k])."""
    total = int(lengths.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64)
    exclusive = np.cumsum(lengths) - lengths
    result: IntArray = np.arange(total, dtype=np.int64) + np.repeat(starts - exclusive, lengths)
    return result


def _mix64(values: U64Array) -> U64Array:
    """splitmix64 finaliser: a fast bijective mixer standing in for a random permutation of 64-bit hashes."""
    x = values.copy()
    x ^= x >> _U64(30)
    x *= _MIX1
    x ^= x >> _U64(27)
    x *= _MIX2
    x ^= x >> _U64(31)
    return x


def _seed_words(seed: int, purpose: int, count: int) -> U64Array:
    rng = np.random.default_rng([seed & 0xFFFFFFFFFFFFFFFF, purpose])
    words: U64Array = rng.integers(0, np.iinfo(np.uint64).max, size=count, dtype=np.uint64, endpoint=True)
    return words


def _minhash_candidates(
    corpus: _Corpus, members: IntArray, plan: LshPlan, seed: int, accept: PairFilter | None = None
) -> tuple[IntArray, IntArray, int, int]:
    """Distinct pairs of members sharing a MinHash band and passing ``accept`` (local indices, left < right),
    with the bucket pairs emitted and the distinct pairs kept."""
    counts = corpus.token_counts[members]
    ptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    tokens = corpus.token_ids[_ragged(corpus.token_ptr[members], counts)]
    salts = _seed_words(seed, 1, plan.hashes)
    chunk_starts = _chunk_starts(ptr, _TOKEN_BATCH)
    collector = _PairCollector(len(members), accept)
    for band in range(plan.bands):
        band_salts = salts[band * plan.rows : (band + 1) * plan.rows]
        # 32-bit hash values of every vocabulary token under this band's hash functions (one row per function;
        # two tokens sharing a value can only add a collision, never hide one), then per-entry minima.
        table = (_mix64(np.bitwise_xor.outer(band_salts, corpus.token_hashes)) >> _U64(32)).astype(np.uint32)
        keys = np.empty(len(members), dtype=np.uint64)
        for lo, hi in itertools.pairwise(chunk_starts):
            segment = tokens[ptr[lo] : ptr[hi]]
            offsets = ptr[lo:hi] - ptr[lo]
            key: U64Array = np.minimum.reduceat(table[0][segment], offsets).astype(np.uint64)
            for row in table[1:]:
                key = _mix64(key ^ np.minimum.reduceat(row[segment], offsets).astype(np.uint64))
            keys[lo:hi] = key
        collector.add_band(keys)
    left, right = collector.pairs()
    return left, right, collector.emitted, collector.distinct


def _chunk_starts(ptr: IntArray, budget: int) -> list[int]:
    """Entry boundaries so each chunk holds about ``budget`` tokens (at least one entry per chunk)."""
    bounds = [0]
    n = len(ptr) - 1
    while bounds[-1] < n:
        lo = bounds[-1]
        hi = int(np.searchsorted(ptr, ptr[lo] + budget, side="right")) - 1
        bounds.append(min(n, max(lo + 1, hi)))
    return bounds


PairFilter = Callable[[IntArray, IntArray], npt.NDArray[np.bool_]]


def _bucket_order(keys: npt.NDArray[np.unsignedinteger]) -> IntArray:
    """An order that makes equal keys adjacent: numpy radix-sorts 16-bit keys, so 32-bit keys take two passes."""
    if keys.dtype == np.uint32:
        order: IntArray = np.argsort(keys.astype(np.uint16), kind="stable")  # low half (astype wraps)
        high = (keys[order] >> np.uint32(16)).astype(np.uint16)
        result: IntArray = order[np.argsort(high, kind="stable")]
        return result
    plain: IntArray = np.argsort(keys, kind="stable")
    return plain


class _PairCollector:
    """Pairs of items sharing a bucket in any band, deduplicated, with hard ceilings on the work.

    ``accept`` (the cosine Hamming prefilter) runs on each band's pairs as they are generated, so the
    millions of chance collisions of unrelated vectors are never stored or sorted.
    """

    def __init__(self, size: int, accept: PairFilter | None = None) -> None:
        self.size = size
        self.accept = accept
        self.codes: list[IntArray] = []
        self.emitted = 0  # bucket pairs over all bands, duplicates included
        self.pending = 0  # codes held, duplicates included
        self.distinct = 0  # distinct codes after the last compaction

    def add_band(self, keys: npt.NDArray[np.unsignedinteger]) -> None:
        order = _bucket_order(keys)
        ordered = keys[order]
        breaks = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1
        starts = np.concatenate(([0], breaks)).astype(np.int64)
        sizes = np.diff(np.concatenate((starts, [len(ordered)]))).astype(np.int64)
        starts, sizes = starts[sizes >= 2], sizes[sizes >= 2]
        if not len(starts):
            return
        self.emitted += int((sizes * (sizes - 1) // 2).sum())
        if self.emitted > MAX_EMITTED_PAIRS:
            self._give_up(f"{self.emitted} bucket pairs", int(sizes.max()))
        # Each sorted position pairs with the later positions of its bucket; generate a few million at a time.
        positions = _ragged(starts, sizes)
        later = np.repeat(starts + sizes, sizes) - positions - 1
        cumulative = np.cumsum(later)
        cuts = np.searchsorted(cumulative, np.arange(_PAIR_BATCH, int(cumulative[-1]), _PAIR_BATCH), side="right")
        bounds = sorted({0, len(positions), *cuts.tolist()})
        for lo, hi in itertools.pairwise(bounds):
            count = later[lo:hi]
            first = np.repeat(positions[lo:hi], count)
            offset = np.arange(len(first), dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)
            a, b = order[first], order[first + 1 + offset]
            if self.accept is not None:
                keep = self.accept(a, b)
                a, b = a[keep], b[keep]
            self.codes.append(np.minimum(a, b) * self.size + np.maximum(a, b))
            self.pending += len(a)
        # Compact when duplicates could have doubled the held codes: amortised O(total log total), bounded memory.
        if self.pending > max(_COMPACT_AT, 2 * self.distinct):
            self._compact()
            if self.distinct > MAX_CANDIDATE_PAIRS:
                self._give_up(f"{self.distinct} distinct candidate pairs", int(sizes.max()))

    def _compact(self) -> None:
        codes = np.concatenate(self.codes)
        codes.sort()  # sort-based distinct: numpy's hash-based unique is far slower on int64 codes
        if len(codes):
            codes = codes[np.concatenate(([True], codes[1:] != codes[:-1]))]
        self.codes = [codes]
        self.distinct = self.pending = len(self.codes[0])

    def _give_up(self, what: str, largest: int) -> None:
        raise ClusteringError(
            f"near-duplicate scan stopped at {what} among {self.size} entries (a band bucket held {largest}): the "
            "corpus holds a very large group of near-identical entries; no clusters produced, every entry kept"
        )

    def pairs(self) -> tuple[IntArray, IntArray]:
        if not self.codes:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        self._compact()
        if self.distinct > MAX_CANDIDATE_PAIRS:
            self._give_up(f"{self.distinct} distinct candidate pairs", 0)
        codes = self.codes[0]
        return codes // self.size, codes % self.size


def _rows_per_block(dim: int, bytes_per_value: int) -> int:
    """Rows per block so a block of vectors takes about 16 MB whatever the embedding dimension."""
    return max(64, (16 << 20) // max(1, dim * bytes_per_value))


def _normalised(corpus: _Corpus, members: IntArray) -> F32Array:
    """Unit rows in float32 for screening; normalised blockwise in float64 so huge components cannot overflow."""
    result: F32Array = np.empty((len(members), corpus.dims[members[0]]), dtype=np.float32)
    indices = members.tolist()
    step = _rows_per_block(result.shape[1], 8)
    for start in range(0, len(indices), step):
        block = np.stack([corpus.vector(k) for k in indices[start : start + step]]).astype(np.float64)
        block /= np.sqrt(np.einsum("ij,ij->i", block, block))[:, None]
        result[start : start + step] = block
    return result


def _scan_cosine(
    corpus: _Corpus,
    members: IntArray,
    dim: int,
    threshold: float,
    strategy: Strategy,
    seed: int,
    edges: _Edges,
    stats: ClusteringStats,
    scope: str | None,
) -> None:
    # Unit rows are made where they are used (sample, SimHash blocks, candidate ends): a float32 copy of every
    # vector would cost n x dim x 4 bytes (300 MB for 50k 1536-dim vectors); only brute force needs them all.
    plan: LshPlan | None = None
    if strategy == "lsh" or (strategy == "auto" and len(members) >= BRUTE_FORCE_BELOW):
        rng = np.random.default_rng([seed & 0xFFFFFFFFFFFFFFFF, 2, dim])
        a = rng.integers(0, len(members), SIMHASH_SAMPLE_PAIRS)
        b = rng.integers(0, len(members), SIMHASH_SAMPLE_PAIRS)
        distinct = a != b
        sample = _rowwise_dot_of(corpus, members, a[distinct], b[distinct])
        plan = plan_simhash(
            threshold, items=len(members), dim=dim, sample_cosines=sample, allow_brute_force=strategy == "auto"
        )
    if plan is None:
        left, right, _ = _cosine_all_pairs(_normalised(corpus, members), threshold - _COSINE_MARGIN)
        emitted = distinct = verified = len(members) * (len(members) - 1) // 2
    else:
        left, right, emitted, distinct = _simhash_candidates(corpus, members, plan, seed, dim)
        verified = len(left)
        close = _rowwise_dot_of(corpus, members, left, right) >= threshold - _COSINE_MARGIN
        left, right = left[close], right[close]
    # float32 screened; the decision and the weight come from float64, exactly as similarity() computes them
    left, right = members[left], members[right]
    weight = _exact_cosines(corpus, left, right)
    accept = weight >= threshold
    edges.add(left[accept], right[accept], weight[accept], _COSINE)
    stats.scans.append(
        ScanRecord(
            scope=scope,
            measure="cosine",
            dim=dim,
            items=len(members),
            strategy="brute" if plan is None else "lsh",
            plan=plan,
            emitted_pairs=emitted,
            candidate_pairs=distinct,
            verified_pairs=verified,
            edges=int(np.count_nonzero(accept)),
            scanned=len(members),
        )
    )


def _cosine_all_pairs(unit: F32Array, floor: float) -> tuple[IntArray, IntArray, F32Array]:
    """Brute force: every pair i < j with float32 cosine >= floor, by blocked matrix products."""
    lefts: list[IntArray] = []
    rights: list[IntArray] = []
    values: list[F32Array] = []
    n = len(unit)
    block = max(1, (1 << 22) // max(1, n))
    for start in range(0, n, block):
        stop = min(start + block, n)
        product = unit[start:stop] @ unit[start:].T
        rows, cols = np.nonzero(product >= floor)
        upper = cols > rows  # column c is item start + c; row r is item start + r
        rows, cols = rows[upper], cols[upper]
        lefts.append(rows.astype(np.int64) + start)
        rights.append(cols.astype(np.int64) + start)
        values.append(product[rows, cols])
    return np.concatenate(lefts), np.concatenate(rights), np.concatenate(values)


def _rowwise_dot_of(corpus: _Corpus, members: IntArray, left: IntArray, right: IntArray) -> F32Array:
    """Float32 cosines of pairs of ``members`` (local indices), normalising only the rows the pairs touch."""
    ends = np.unique(np.concatenate((left, right)))
    if not len(ends):
        return np.empty(0, dtype=np.float32)
    rows = _normalised(corpus, members[ends])
    return _rowwise_dot(rows, np.searchsorted(ends, left), np.searchsorted(ends, right))


def _rowwise_dot(unit: F32Array, left: IntArray, right: IntArray) -> F32Array:
    out = np.empty(len(left), dtype=np.float32)
    step = _rows_per_block(unit.shape[1], 4 * 2)
    for start in range(0, len(left), step):
        stop = start + step
        out[start:stop] = np.einsum("ij,ij->i", unit[left[start:stop]], unit[right[start:stop]])
    return out


def _exact_cosines(corpus: _Corpus, left: IntArray, right: IntArray) -> F64Array:
    out = np.empty(len(left), dtype=np.float64)
    step = _rows_per_block(len(corpus.vector(int(left[0]))) if len(left) else 1, 8 * 2)
    for start in range(0, len(left), step):
        a = np.stack([corpus.vector(k) for k in left[start : start + step].tolist()])
        b = np.stack([corpus.vector(k) for k in right[start : start + step].tolist()])
        out[start : start + step] = _cosine_rows(a.astype(np.float64), b.astype(np.float64))
    return out


def _simhash_candidates(
    corpus: _Corpus, members: IntArray, plan: LshPlan, seed: int, dim: int
) -> tuple[IntArray, IntArray, int, int]:
    """Pairs of members sharing a SimHash band and within the Hamming prefilter distance (local indices,
    left < right). Also returns the bucket pairs emitted over all bands and the distinct pairs that passed the
    prefilter. Unit rows are rebuilt per block and pass, never held for all members at once.
    """
    n = len(members)
    rng = np.random.default_rng([seed & 0xFFFFFFFFFFFFFFFF, 3, dim])
    words = plan.filter_bits // 64
    sketch = np.zeros((n, max(1, words)), dtype=np.uint64)
    columns = np.zeros((max(1, words), n), dtype=np.uint64)  # word-major copy: one gather per word per pair

    def near(a: IntArray, b: IntArray) -> npt.NDArray[np.bool_]:
        distance = np.zeros(len(a), dtype=np.uint16)
        for column in columns:
            distance += np.bitwise_count(column[a] ^ column[b])
        result: npt.NDArray[np.bool_] = distance <= plan.filter_max_distance
        return result

    collector = _PairCollector(n, near if words else None)
    bands_per_pass = max(1, 512 // plan.rows)  # project ~512 planes at a time to bound memory
    rows_per_block = min(8192, _rows_per_block(dim, 4))
    key_type = np.uint16 if plan.rows <= 16 else np.uint32  # 16-bit keys sort by radix
    bit_offset = 0
    for first_band in range(0, plan.bands, bands_per_pass):
        bands = min(bands_per_pass, plan.bands - first_band)
        planes = rng.standard_normal((dim, bands * plan.rows)).astype(np.float32)
        keys = np.empty((bands, n), dtype=key_type)
        for start in range(0, n, rows_per_block):
            signs = (_normalised(corpus, members[start : start + rows_per_block]) @ planes) >= 0
            if bit_offset < plan.filter_bits:
                # The prefilter sketch is the first filter_bits sign bits (all within the first pass).
                packed = np.packbits(signs[:, : plan.filter_bits], axis=1, bitorder="little")
                sketch[start : start + rows_per_block].view(np.uint8)[:, :] = packed
            shaped = signs.reshape(len(signs), bands, plan.rows)
            key = np.zeros((len(signs), bands), dtype=key_type)
            for row in range(plan.rows):  # shifts and ors: integer matmul has no BLAS and is slower
                key |= np.left_shift(shaped[:, :, row], row, dtype=key_type)
            keys[:, start : start + rows_per_block] = key.T
        bit_offset += bands * plan.rows
        if bit_offset < plan.filter_bits:
            raise ClusteringError(f"internal error: SimHash pass of {bit_offset} bits cannot hold the prefilter sketch")
        if first_band == 0:
            columns[:] = sketch.T
        for band in range(bands):
            collector.add_band(keys[band])
    left, right = collector.pairs()
    return left, right, collector.emitted, collector.distinct


# --------------------------------------------------------------------------------------------- assembly

_Adjacency = dict[int, dict[int, tuple[float, int]]]  # node -> neighbour node -> (weight, measure code)


def _assemble(graph: _Graph, max_cluster_size: int, stats: ClusteringStats) -> list[Cluster]:
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
    adjacencies: dict[int, _Adjacency] = defaultdict(dict)
    for node in parent:
        adjacencies[find(node)][node] = {}
    for a, b, w, m in edge_list:
        adjacency = adjacencies[find(a)]
        adjacency[a][b] = (w, m)
        adjacency[b][a] = (w, m)
    stats.components = len(adjacencies)
    clusters: list[Cluster] = []
    for adjacency in adjacencies.values():
        members = {node: graph.members(node) for node in adjacency}
        if sum(len(entries) for entries in members.values()) <= max_cluster_size:
            chunks = [sorted(entry for entries in members.values() for entry in entries)]
        else:
            chunks = _split_component(adjacency, members, max_cluster_size)
        node_of = {entry: node for node, entries in members.items() for entry in entries}
        for chunk in chunks:
            clusters.append(_cluster_of(chunk, node_of, adjacency, graph.ids))
            if len(chunk) > max_cluster_size:
                stats.oversize_clusters += 1
    clusters.sort(key=lambda cluster: cluster.ids[0])
    stats.clusters = len(clusters)
    return clusters


def _cluster_of(chunk: list[int], node_of: dict[int, int], adjacency: _Adjacency, ids: list[str]) -> Cluster:
    present: dict[int, int] = defaultdict(int)
    for entry in chunk:
        present[node_of[entry]] += 1
    weights: list[float] = []
    measures: set[int] = set()
    nodes = list(present)
    for position, node in enumerate(nodes):
        if present[node] >= 2:  # twins of one class: Jaccard 1.0
            weights.append(1.0)
            measures.add(_JACCARD)
        near = adjacency[node]
        for other in nodes[position + 1 :]:  # a chunk holds a handful of nodes; a twin class may have 1000s of edges
            edge = near.get(other)
            if edge is not None:
                weights.append(edge[0])
                measures.add(edge[1])
    kind = _MEASURE_CODES[measures.pop()] if len(measures) == 1 else "mixed"
    return Cluster(ids=tuple(sorted(ids[k] for k in chunk)), min_similarity=min(weights), measure=kind)


def _strength_units(weight: float) -> int:
    """A weight as an exact integer, so a node's strength is the same whatever order its edges are summed in.

    Multiplying by a power of two is exact and every double above 2**-12 becomes an integer; smaller weights
    (never near a real threshold) are truncated, which still gives one order-free value.
    """
    return int(weight * 2.0**64)


_FULL_STRENGTH = _strength_units(1.0)


def _split_component(adjacency: _Adjacency, members: dict[int, list[int]], max_size: int) -> list[list[int]]:
    """Split an over-large component into chunks that keep each entry next to a near-duplicate.

    Greedy over entries: seed = remaining entry with most remaining neighbours (then strongest total similarity,
    then id); grow by the strongest edge into the chunk (Prim's order, ties by id) up to ``max_size``. An entry
    left with no remaining neighbour would be a singleton; instead it joins the chunk holding its strongest
    neighbour, so a new entry is always offered together with a duplicate. That is the only way a chunk exceeds
    ``max_size`` (by one per stranded entry; a star-shaped component can strand many on its hub's chunk).

    It runs on nodes (``members``: a node's entries, ascending; >= 2 means a twin class, an implicit clique at
    1.0). Twins are interchangeable, so they are taken lowest id first and every remaining twin has the same
    degree and strength: one heap entry per node stands for all its remaining entries, and a class of thousands
    of twins costs as much as its chunks, not its pairs. The chunks are those of the entry-level greedy.
    Entry indices follow id order, so they stand in for ids in every tie-break.
    """
    size = {node: len(entries) for node, entries in members.items()}
    taken = dict.fromkeys(members, 0)  # a node's entries are taken in ascending order
    head = {node: entries[0] for node, entries in members.items()}  # lowest remaining entry, -1 when none left
    units = {node: {other: _strength_units(w) for other, (w, _) in near.items()} for node, near in adjacency.items()}
    # a node's neighbours with the frontier weight, the node itself first when it is a twin class
    offers = {
        node: ([(-1.0, node)] if size[node] >= 2 else []) + [(-w, other) for other, (w, _) in near.items()]
        for node, near in adjacency.items()
    }
    degree: dict[int, int] = {}
    strength: dict[int, int] = {}
    for node, near in units.items():
        degree[node] = size[node] - 1 + sum(size[other] for other in near)
        strength[node] = (size[node] - 1) * _FULL_STRENGTH + sum(size[other] * u for other, u in near.items())

    def take(node: int) -> None:
        taken[node] += 1
        head[node] = members[node][taken[node]] if taken[node] < size[node] else -1

    seeds = [(-degree[v], -strength[v], head[v], v) for v in adjacency]
    heapq.heapify(seeds)
    chunks: list[list[int]] = []
    chunk_of: dict[int, int] = {}
    stranded: list[tuple[int, int]] = []
    # One seed entry per node. Degree and strength only fall and the head only rises, so a stored key never
    # exceeds the node's current one: a stale entry is re-pushed when it surfaces, and an entry that surfaces
    # current is the true best seed (lazy decrease-key; no push per neighbour per chunk).
    while seeds:
        neg_degree, neg_strength, entry, node = heapq.heappop(seeds)
        if head[node] < 0:
            continue
        if entry != head[node] or -neg_degree != degree[node] or -neg_strength != strength[node]:
            heapq.heappush(seeds, (-degree[node], -strength[node], head[node], node))
            continue
        take(node)
        chunk = [entry]
        placed = {node: 1}
        # One frontier entry per neighbour node stands for all its remaining entries at that weight.
        frontier = [(neg_w, head[other], other) for neg_w, other in offers[node] if head[other] >= 0]
        heapq.heapify(frontier)
        while frontier and len(chunk) < max_size:
            neg_w, candidate, other = heapq.heappop(frontier)
            current = head[other]
            if current < 0:
                continue
            if candidate != current:  # that entry was taken; the node's next one has the same weight
                heapq.heappush(frontier, (neg_w, current, other))
                continue
            take(other)
            chunk.append(candidate)
            if other in placed:
                placed[other] += 1
            else:
                placed[other] = 1
                for offer_w, neighbour in offers[other]:
                    if head[neighbour] >= 0:
                        heapq.heappush(frontier, (offer_w, head[neighbour], neighbour))
            if head[other] >= 0:
                heapq.heappush(frontier, (neg_w, head[other], other))
        if len(chunk) == 1:
            stranded.append((entry, node))
            continue
        for source, count in placed.items():
            if size[source] >= 2 and head[source] >= 0:
                degree[source] -= count
                strength[source] -= count * _FULL_STRENGTH
            for other, unit in units[source].items():
                if head[other] >= 0:
                    degree[other] -= count
                    strength[other] -= count * unit
        if head[node] >= 0:  # the seed's own entry was consumed; its remaining twins need one
            heapq.heappush(seeds, (-degree[node], -strength[node], head[node], node))
        for member in chunk:
            chunk_of[member] = len(chunks)
        chunks.append(chunk)
    # A stranded entry's neighbours were all taken by earlier chunks (seeds go by descending degree, so once
    # one entry is stranded every later one is too, and none of them neighbour each other).
    for entry, node in sorted(stranded):
        options = [(-w, members[other][0]) for other, (w, _) in adjacency[node].items()]
        if size[node] >= 2:
            options.append((-1.0, members[node][0] if members[node][0] != entry else members[node][1]))
        chunks[chunk_of[min(options)[1]]].append(entry)
    return chunks
