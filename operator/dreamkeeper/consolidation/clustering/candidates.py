"""LSH signatures: MinHash band keys over token sets, SimHash band keys (and the Hamming prefilter sketch)
over embeddings, each band handed to a :class:`.buckets.PairCollector`. What comes out is candidates only;
the exact check is :mod:`.jaccard` and :mod:`.cosine`."""

from __future__ import annotations

import itertools

import numpy as np
import numpy.typing as npt

from dreamkeeper.consolidation.clustering.arrays import mix64, ragged, seed_words
from dreamkeeper.consolidation.clustering.buckets import PairCollector, PairFilter
from dreamkeeper.consolidation.clustering.corpus import Corpus, normalised, rows_per_block
from dreamkeeper.consolidation.clustering.model import ClusteringError, IntArray, U64Array
from dreamkeeper.consolidation.clustering.plans import LshPlan

_TOKEN_BATCH = 1 << 20  # tokens per MinHash chunk (4 bytes of hash value each, one hash function at a time)


def minhash_candidates(
    corpus: Corpus, members: IntArray, plan: LshPlan, seed: int, accept: PairFilter | None = None
) -> tuple[IntArray, IntArray, int, int]:
    """Distinct pairs of members sharing a MinHash band and passing ``accept`` (local indices, left < right),
    with the bucket pairs emitted and the distinct pairs kept."""
    counts = corpus.token_counts[members]
    ptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    tokens = corpus.token_ids[ragged(corpus.token_ptr[members], counts)]
    salts = seed_words(seed, 1, plan.hashes)
    chunk_starts = _chunk_starts(ptr, _TOKEN_BATCH)
    collector = PairCollector(len(members), accept)
    for band in range(plan.bands):
        band_salts = salts[band * plan.rows : (band + 1) * plan.rows]
        # 32-bit hash values of every vocabulary token under this band's hash functions (one row per function;
        # two tokens sharing a value can only add a collision, never hide one), then per-entry minima.
        table = (mix64(np.bitwise_xor.outer(band_salts, corpus.token_hashes)) >> np.uint64(32)).astype(np.uint32)
        keys = np.empty(len(members), dtype=np.uint64)
        for lo, hi in itertools.pairwise(chunk_starts):
            segment = tokens[ptr[lo] : ptr[hi]]
            offsets = ptr[lo:hi] - ptr[lo]
            key: U64Array = np.minimum.reduceat(table[0][segment], offsets).astype(np.uint64)
            for row in table[1:]:
                key = mix64(key ^ np.minimum.reduceat(row[segment], offsets).astype(np.uint64))
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


def simhash_candidates(
    corpus: Corpus, members: IntArray, plan: LshPlan, seed: int, dim: int
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

    collector = PairCollector(n, near if words else None)
    bands_per_pass = max(1, 512 // plan.rows)  # project ~512 planes at a time to bound memory
    block_rows = min(8192, rows_per_block(dim, 4))
    key_type = np.uint16 if plan.rows <= 16 else np.uint32  # 16-bit keys sort by radix
    bit_offset = 0
    for first_band in range(0, plan.bands, bands_per_pass):
        bands = min(bands_per_pass, plan.bands - first_band)
        planes = rng.standard_normal((dim, bands * plan.rows)).astype(np.float32)
        keys = np.empty((bands, n), dtype=key_type)
        for start in range(0, n, block_rows):
            signs = (normalised(corpus, members[start : start + block_rows]) @ planes) >= 0
            if bit_offset < plan.filter_bits:
                # The prefilter sketch is the first filter_bits sign bits (all within the first pass).
                packed = np.packbits(signs[:, : plan.filter_bits], axis=1, bitorder="little")
                sketch[start : start + block_rows].view(np.uint8)[:, :] = packed
            shaped = signs.reshape(len(signs), bands, plan.rows)
            key = np.zeros((len(signs), bands), dtype=key_type)
            for row in range(plan.rows):  # shifts and ors: integer matmul has no BLAS and is slower
                key |= np.left_shift(shaped[:, :, row], row, dtype=key_type)
            keys[:, start : start + block_rows] = key.T
        bit_offset += bands * plan.rows
        if bit_offset < plan.filter_bits:
            raise ClusteringError(f"internal error: SimHash pass of {bit_offset} bits cannot hold the prefilter sketch")
        if first_band == 0:
            columns[:] = sketch.T
        for band in range(bands):
            collector.add_band(keys[band])
    left, right = collector.pairs()
    return left, right, collector.emitted, collector.distinct
