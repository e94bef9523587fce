"""Candidate pairs from LSH bands: items sharing a bucket in any band, deduplicated, with hard ceilings.

Measure-agnostic (MinHash and SimHash keys alike); the ceilings turn a corpus of very many near-identical
entries into a ClusteringError instead of minutes of work or exhausted memory."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from dreamkeeper.consolidation.clustering.arrays import ragged
from dreamkeeper.consolidation.clustering.model import ClusteringError, IntArray

MAX_CANDIDATE_PAIRS = 20_000_000
"""Distinct LSH candidate pairs above which the scan gives up (ClusteringError) instead of exhausting memory."""
MAX_EMITTED_PAIRS = 200_000_000
"""Bucket pairs summed over bands (before dedupe) above which the scan gives up instead of running for minutes."""

_PAIR_BATCH = 262_144  # bucket pairs generated and filtered at a time (~60 bytes of temporaries each)
_COMPACT_AT = 4_000_000  # candidate codes held (8 bytes each) before duplicates are squeezed out


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


class PairCollector:
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
        positions = ragged(starts, sizes)
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
