"""The entry point: check the options, scan the edges, assemble the clusters, and turn any failure into a
ClusteringError so the caller degrades (unreviewed entries only) instead of failing the cycle."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence

from dreamkeeper.consolidation.clustering.assembly import assemble
from dreamkeeper.consolidation.clustering.model import Cluster, ClusteringError, ClusterItem, Split, Strategy, Tokens
from dreamkeeper.consolidation.clustering.scan import edge_graph
from dreamkeeper.consolidation.clustering.stats import ClusteringStats

logger = logging.getLogger(__name__)


def find_clusters(
    items: Sequence[ClusterItem],
    *,
    threshold: float = 0.88,
    max_cluster_size: int = 8,
    same_top_level_category: bool = False,
    strategy: Strategy = "auto",
    seed: int | None = None,
    stats: ClusteringStats | None = None,
    tokens: Tokens = "unicode",
    split: Split = "neighbours",
    specifics: float = 0.0,
) -> list[Cluster]:
    """Near-duplicate clusters of ``items``, sorted by first id.

    Single-link over every pair with similarity >= ``threshold``; components larger than ``max_cluster_size``
    are split by :func:`.splitting.split_component` (``split="neighbours"``) or, as RockBot does, into fixed chunks
    in id order (``split="rockbot"``, :func:`.splitting.rockbot_chunks`); ``max_cluster_size < 2`` disables
    clustering. ``tokens`` chooses the Jaccard tokens: Unicode-aware, or RockBot's ASCII ones. With
    ``same_top_level_category`` only entries whose first category segment matches (case-insensitively; None
    only with None) are linked. ``strategy`` forces brute force or LSH (tests, benchmarks); ``seed`` overrides
    the corpus-derived hash seed. A fresh ``stats`` passed in is filled with how the scan went. ``specifics`` > 0
    also links entries naming the same rare specifics at that idf-weighted Jaccard (:mod:`.specifics_links`),
    and an over-large component is cut along those links first (:func:`.assembly.assemble`); 0 turns it off.

    Raises ValueError for options out of range (a configuration bug) and ClusteringError for anything that
    stops the scan itself (bad items, resource exhaustion, internal failure).
    """
    threshold = _checked_options(threshold, strategy)
    if not isinstance(specifics, (int, float)) or not 0.0 <= float(specifics) <= 1.0:
        raise ValueError(f"specifics link threshold must be in [0, 1] (0: off), got {specifics!r}")
    if tokens not in ("rockbot", "unicode") or split not in ("rockbot", "neighbours"):
        raise ValueError(f"clustering tokens must be rockbot or unicode, split rockbot or neighbours: {tokens}/{split}")
    if not isinstance(max_cluster_size, int) or isinstance(max_cluster_size, bool):
        raise ValueError(f"max_cluster_size must be an integer, got {max_cluster_size!r}")
    filled = ClusteringStats() if stats is None else stats
    filled.items = len(items)
    if max_cluster_size < 2:
        return []

    def run() -> list[Cluster]:
        graph = edge_graph(
            items,
            threshold=threshold,
            same_top_level_category=same_top_level_category,
            strategy=strategy,
            seed=seed,
            stats=filled,
            tokens=tokens,
            specifics=float(specifics),
        )
        return assemble(graph, max_cluster_size, filled, split)

    return _guarded(run, filled)


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


def _guarded(run: Callable[[], list[Cluster]], stats: ClusteringStats) -> list[Cluster]:
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
