"""LSH banding plans: how many bands of how many hashes keep per-pair recall >= 0.999 at the threshold.

Pure arithmetic (no corpus): the scans ask for a plan, and the recall formula is what tests check it against.
Cosine plans also weigh their cost against blocked brute force and return None when brute force is cheaper."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dreamkeeper.consolidation.clustering.buckets import MAX_EMITTED_PAIRS
from dreamkeeper.consolidation.clustering.model import Measure

TARGET_RECALL = 0.999
"""Per-pair probability that LSH offers a pair at exactly the threshold (higher above it)."""
BRUTE_FORCE_BELOW = 500
"""Groups smaller than this are compared exhaustively (strategy ``auto``)."""
MINHASH_MAX_HASHES = 128
SIMHASH_MAX_BITS = 4096
SIMHASH_FILTER_BITS = 256
SIMHASH_SAMPLE_PAIRS = 4096


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
