"""The values the clustering package exchanges: an entry to compare, a cluster found, the error that stops
a scan, and the array shapes every module passes around."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, TypeAlias

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

Measure = Literal["cosine", "jaccard", "specifics"]
Strategy = Literal["auto", "brute", "lsh"]
# Jaccard tokens: RockBot's ASCII ones ("rockbot", its cluster identities) or Unicode-aware ones ("unicode").
Tokens = Literal["rockbot", "unicode"]
# Splitting an over-large component: RockBot's fixed id-order chunks ("rockbot") or neighbour-keeping ("neighbours").
Split = Literal["rockbot", "neighbours"]

MEASURE_CODES: tuple[Measure, Measure, Measure] = ("cosine", "jaccard", "specifics")
# Measure codes in the edge arrays (index into MEASURE_CODES); SPECIFICS marks a link by shared rare specifics
# (:mod:`.specifics_links`), which offers two entries together but is no similarity.
COSINE, JACCARD, SPECIFICS = 0, 1, 2

# The array shapes, named for annotations only: this module (the values a cluster cache holds) loads no numpy, which a
# steady cycle, reading its clusters from the cache and scanning nothing, never needs (~0.08 s of its process's CPU).
IntArray: TypeAlias = "npt.NDArray[np.int64]"
U64Array: TypeAlias = "npt.NDArray[np.uint64]"
F32Array: TypeAlias = "npt.NDArray[np.float32]"
F64Array: TypeAlias = "npt.NDArray[np.float64]"


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
    # Which connected component of the near-duplicate graph the cluster is a chunk of (chunks of one component share
    # it; numbered in cluster order): a request must show every chunk of a component together, or the pairs that
    # straddle two chunks are never put side by side (gating.make_batches). Not part of the cluster's identity.
    component: int = field(default=-1, compare=False)
    # Entries of the component that RockBot's chunking left in no cluster (a last chunk of one is dropped): not
    # members (no stamp, no hash), but shown in the component's request so their pairs are not lost to it.
    leftover: tuple[str, ...] = field(default=(), compare=False)
