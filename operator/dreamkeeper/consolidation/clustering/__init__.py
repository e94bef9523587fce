"""Near-duplicate clustering of memory entries: the "near-duplicate sibling" half of candidate gating.

One entry point, :func:`find_clusters`. A pair of entries is compared with **cosine** similarity when both carry
a usable embedding of the same dimension, otherwise with **Jaccard** similarity over RockBot's content tokens;
one pair never mixes the two scales (:mod:`.similarity`). Pairs at or above the threshold are edges of a
single-link graph (:mod:`.scan`); its components of two or more entries are the clusters (:mod:`.assembly`),
split into chunks of at most ``max_cluster_size`` entries (:mod:`.splitting`): RockBot's fixed chunks in id order,
or chunks that keep every entry next to one of its near-duplicates. The Jaccard tokens are RockBot's ASCII ones or
Unicode-aware ones (``tokens``); the engine defaults to RockBot's on both counts, so its cluster identities are
RockBot's.

RockBot compared every pair (quadratic, and it capped the snapshot at 1000 entries). Here candidate pairs come
from locality-sensitive hashing (:mod:`.candidates`, :mod:`.buckets`) and every candidate is verified with the
exact similarity (:mod:`.jaccard`, :mod:`.cosine`), so precision is exact and the only approximation is recall,
bounded per pair (:mod:`.plans`):

* Jaccard: MinHash signatures in ``bands`` x ``rows``; a pair at similarity s is a candidate with probability
  ``1 - (1 - s**rows)**bands``, chosen >= 0.999 at the threshold (:func:`.plans.plan_minhash`).
* cosine: random-hyperplane (SimHash) bands, sign agreement per plane ``p = 1 - angle/pi``; candidates then pass
  a Hamming prefilter on the same sketch before the exact check; recall of the two stages together >= 0.999 at
  the threshold (:func:`.plans.plan_simhash`, which also falls back to blocked brute force when that is cheaper).

Small groups (< 500 entries) use vectorised brute force, which is also the reference implementation in tests.
Everything is deterministic: entries are processed in id order and the hash seeds derive from the corpus.

**Twins.** Template facts that differ only in short numbers, hosts or IPs have identical token sets (RockBot's
tokens are runs longer than 3 characters). Entries of one scope group with the same token set and no usable
embedding are twins: every pair involving one of them is a Jaccard pair decided by the token set alone, so they
are pairwise at 1.0 and equally similar to every other entry. Each distinct token set is hashed and compared
once (:mod:`.twins`); a twin class stays one node of the edge graph (:class:`.graph.Graph`) and
:func:`.splitting.split_component` runs the entry-level greedy on nodes, so a class of thousands costs its
chunks, not its k^2 pairs, and the clusters are exactly those of the explicit graph.
:meth:`.graph.Graph.entry_pairs` expands the classes when the pairs themselves are wanted (tests, benchmarks).
MinHash candidates also pass an exact upper bound on Jaccard from 256-bit token masks
(:func:`.jaccard._jaccard_bound`) before they are stored, so the many template siblings at Jaccard 0.3-0.8 cost a
few ns each, not an intersection.

Modules, in the order a scan uses them: ``model`` (the values exchanged), ``similarity`` (the two measures),
``corpus`` (entries flattened into arrays), ``plans`` (LSH banding and its recall), ``buckets`` and ``candidates``
(LSH candidate pairs), ``twins``, ``jaccard`` and ``cosine`` (exact verification into edges), ``graph`` and
``scan`` (the edge graph), ``splitting`` and ``assembly`` (components into clusters), ``stats``, ``find``.
"""

from typing import TYPE_CHECKING, Any

from dreamkeeper.consolidation.clustering.model import Cluster, ClusteringError, ClusterItem, Strategy

if TYPE_CHECKING:
    from dreamkeeper.consolidation.clustering.find import find_clusters
    from dreamkeeper.consolidation.clustering.stats import ClusteringStats


def __getattr__(name: str) -> Any:
    # The scan and its statistics load numpy: imported when first asked for, so that what only holds clusters (the
    # cluster cache, gating's bookkeeping, a steady cycle that scans nothing) loads neither.
    if name == "find_clusters":
        from dreamkeeper.consolidation.clustering.find import find_clusters

        return find_clusters
    if name == "ClusteringStats":
        from dreamkeeper.consolidation.clustering.stats import ClusteringStats

        return ClusteringStats
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Cluster", "ClusterItem", "ClusteringError", "ClusteringStats", "Strategy", "find_clusters"]
