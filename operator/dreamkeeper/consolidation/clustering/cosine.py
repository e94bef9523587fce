"""The cosine scan of one group of same-dimension embeddings: a sampled plan (SimHash or blocked brute
force), float32 screening, and the decision exactly as :func:`.similarity.similarity` makes it (in float32, as
RockBot)."""

from __future__ import annotations

import numpy as np

from dreamkeeper.consolidation.clustering.candidates import simhash_candidates
from dreamkeeper.consolidation.clustering.corpus import Corpus, normalised, rows_per_block
from dreamkeeper.consolidation.clustering.graph import Edges
from dreamkeeper.consolidation.clustering.model import COSINE, F32Array, F64Array, IntArray, Strategy
from dreamkeeper.consolidation.clustering.plans import BRUTE_FORCE_BELOW, SIMHASH_SAMPLE_PAIRS, LshPlan, plan_simhash
from dreamkeeper.consolidation.clustering.similarity import cosine_rows
from dreamkeeper.consolidation.clustering.stats import ClusteringStats, ScanRecord

_COSINE_MARGIN = 1e-3  # float32 screening slack; pairs within it are decided in float64 like similarity()


def scan_cosine(
    corpus: Corpus,
    members: IntArray,
    dim: int,
    threshold: float,
    strategy: Strategy,
    seed: int,
    edges: Edges,
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
        left, right, _ = _cosine_all_pairs(normalised(corpus, members), threshold - _COSINE_MARGIN)
        emitted = distinct = verified = len(members) * (len(members) - 1) // 2
    else:
        left, right, emitted, distinct = simhash_candidates(corpus, members, plan, seed, dim)
        verified = len(left)
        close = _rowwise_dot_of(corpus, members, left, right) >= threshold - _COSINE_MARGIN
        left, right = left[close], right[close]
    # screened; the decision and the weight come from cosine_rows, exactly as similarity() computes them
    left, right = members[left], members[right]
    weight = _exact_cosines(corpus, left, right)
    accept = weight >= threshold
    edges.add(left[accept], right[accept], weight[accept], COSINE)
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


def _rowwise_dot_of(corpus: Corpus, members: IntArray, left: IntArray, right: IntArray) -> F32Array:
    """Float32 cosines of pairs of ``members`` (local indices), normalising only the rows the pairs touch."""
    ends = np.unique(np.concatenate((left, right)))
    if not len(ends):
        return np.empty(0, dtype=np.float32)
    rows = normalised(corpus, members[ends])
    return _rowwise_dot(rows, np.searchsorted(ends, left), np.searchsorted(ends, right))


def _rowwise_dot(unit: F32Array, left: IntArray, right: IntArray) -> F32Array:
    out = np.empty(len(left), dtype=np.float32)
    step = rows_per_block(unit.shape[1], 4 * 2)
    for start in range(0, len(left), step):
        stop = start + step
        out[start:stop] = np.einsum("ij,ij->i", unit[left[start:stop]], unit[right[start:stop]])
    return out


def _exact_cosines(corpus: Corpus, left: IntArray, right: IntArray) -> F64Array:
    out = np.empty(len(left), dtype=np.float64)
    step = rows_per_block(len(corpus.vector(int(left[0]))) if len(left) else 1, 8 * 2)
    for start in range(0, len(left), step):
        a = np.stack([corpus.vector(k) for k in left[start : start + step].tolist()])
        b = np.stack([corpus.vector(k) for k in right[start : start + step].tolist()])
        out[start : start + step] = cosine_rows(a, b)
    return out
