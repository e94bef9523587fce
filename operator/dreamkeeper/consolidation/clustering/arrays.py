"""Vectorised helpers shared by the scans: ragged ranges, a 64-bit mixer standing in for random
permutations, and seeded salt words."""

from __future__ import annotations

import numpy as np

from dreamkeeper.consolidation.clustering.model import IntArray, U64Array

_U64 = np.uint64
_MIX1 = _U64(0xBF58476D1CE4E5B9)
_MIX2 = _U64(0x94D049BB133111EB)


def ragged(starts: IntArray, lengths: IntArray) -> IntArray:
    """Concatenation of ranges [starts[k], starts[k] + lengths[k])."""
    total = int(lengths.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64)
    exclusive = np.cumsum(lengths) - lengths
    result: IntArray = np.arange(total, dtype=np.int64) + np.repeat(starts - exclusive, lengths)
    return result


def mix64(values: U64Array) -> U64Array:
    """splitmix64 finaliser: a fast bijective mixer standing in for a random permutation of 64-bit hashes."""
    x = values.copy()
    x ^= x >> _U64(30)
    x *= _MIX1
    x ^= x >> _U64(27)
    x *= _MIX2
    x ^= x >> _U64(31)
    return x


def seed_words(seed: int, purpose: int, count: int) -> U64Array:
    rng = np.random.default_rng([seed & 0xFFFFFFFFFFFFFFFF, purpose])
    words: U64Array = rng.integers(0, np.iinfo(np.uint64).max, size=count, dtype=np.uint64, endpoint=True)
    return words
