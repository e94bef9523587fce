"""The Jaccard scan of one scope group: token classes, candidates (brute force or MinHash with an exact
token-mask bound), exact intersections, and the accepted pairs as edges."""

from __future__ import annotations

import itertools

import numpy as np
import numpy.typing as npt

from dreamkeeper.consolidation.clustering.arrays import mix64, ragged, seed_words
from dreamkeeper.consolidation.clustering.buckets import PairFilter
from dreamkeeper.consolidation.clustering.candidates import minhash_candidates
from dreamkeeper.consolidation.clustering.corpus import Corpus
from dreamkeeper.consolidation.clustering.graph import Edges
from dreamkeeper.consolidation.clustering.model import IntArray, Strategy
from dreamkeeper.consolidation.clustering.plans import BRUTE_FORCE_BELOW, plan_minhash
from dreamkeeper.consolidation.clustering.stats import ClusteringStats, ScanRecord
from dreamkeeper.consolidation.clustering.twins import across_classes, inside_classes, token_classes

_PROBE_BATCH = 1_000_000  # token probes per batch of exact intersections
_TOKEN_MASK_WORDS = 4  # 256-bit token masks per entry for the exact Jaccard bound (32 bytes per entry)


def scan_jaccard(
    corpus: Corpus,
    group: IntArray,
    threshold: float,
    strategy: Strategy,
    seed: int,
    edges: Edges,
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
    classes = token_classes(corpus, members, twins)
    reps = classes.reps
    logical = inside_classes(classes, corpus.dims, edges)
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

        left, right, emitted, distinct = minhash_candidates(corpus, reps, plan, seed, jaccard_pair)
        verified = len(left)
        inter, union = _intersections(corpus, reps[left], reps[right])
    weight = inter.astype(np.float64) / union.astype(np.float64)  # same division as similarity()
    accept = weight >= threshold
    logical += across_classes(classes, corpus.dims, left[accept], right[accept], weight[accept], edges)
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


def _jaccard_bound(corpus: Corpus, members: IntArray, threshold: float) -> PairFilter:
    """Exact pre-check for MinHash candidates (local indices): False only for pairs that cannot reach ``threshold``.

    Each member's tokens are hashed into a small bit mask. A bucket that A occupies and B does not holds at least
    one token of A missing from B, so ``|A & B| <= |A| - popcount(mask_A & ~mask_B)`` (and symmetrically); Jaccard
    grows with the intersection, so the bound on it bounds Jaccard. Template facts that share most words but
    differ in one are the bulk of LSH candidates, and almost all of them fail this check at a few ns per pair,
    so they are never stored or intersected exactly.
    """
    counts = corpus.token_counts[members]
    tokens = corpus.token_ids[ragged(corpus.token_ptr[members], counts)]
    bits = _TOKEN_MASK_WORDS * 64
    bucket = (mix64(corpus.token_hashes ^ seed_words(0x7A11, 5, 1)[0]) % np.uint64(bits)).astype(np.int64)[tokens]
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


def _jaccard_all_pairs(corpus: Corpus, members: IntArray) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """Brute force: intersections of every pair via blocked products of the token incidence matrix.

    Returns only pairs sharing at least one token (the rest have Jaccard 0 and can never pass a threshold > 0).
    """
    counts = corpus.token_counts[members]
    local = np.repeat(np.arange(len(members)), counts)
    tokens = corpus.token_ids[ragged(corpus.token_ptr[members], counts)]
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


def _intersections(corpus: Corpus, left: IntArray, right: IntArray) -> tuple[IntArray, IntArray]:
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
        probes = np.repeat(g * vocabulary, lengths) + corpus.token_ids[ragged(corpus.token_ptr[s], lengths)]
        found = np.minimum(np.searchsorted(keys, probes), len(keys) - 1)
        hit = keys[found] == probes
        pair = np.repeat(np.arange(stop - start), lengths)
        inter[start:stop] = np.bincount(pair[hit], minlength=stop - start)
    union = counts[left] + counts[right] - inter
    return inter, union
