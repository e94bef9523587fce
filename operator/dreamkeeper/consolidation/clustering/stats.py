"""How a scan went: per group scanned (:class:`ScanRecord`) and overall (:class:`ClusteringStats`), for logs,
benchmarks and the tests that pin the work each stage does."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from dreamkeeper.consolidation.clustering.model import Measure
from dreamkeeper.consolidation.clustering.plans import LshPlan


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
    specifics_links: int = 0  # entry pairs linked by shared rare specifics (specifics_links.py)
    twin_entries: int = 0  # entries scanned through a twin (same token set, no embedding, same scope group)
    seconds: float = 0.0
    scans: list[ScanRecord] = field(default_factory=list)
