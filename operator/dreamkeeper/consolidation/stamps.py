"""The stamps validation leaves on what was offered: reviewed, rejected and declined (RockBot's semantics), and
which clusters a reply left undecided (they back off instead: backoff.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from dreamkeeper.consolidation.backoff import cleared as backoff_cleared
from dreamkeeper.consolidation.decisions import Decisions
from dreamkeeper.consolidation.declines import next_decline_count
from dreamkeeper.consolidation.gating import GatingResult
from dreamkeeper.consolidation.plan import StampAction
from dreamkeeper.memory import (
    DECLINED_AT,
    DECLINED_CLUSTER,
    DECLINED_COUNT,
    REJECTED_AT,
    REJECTED_CLUSTER,
    REVIEWED_AT,
    REVIEWED_HASH,
    cluster_hash,
    format_timestamp,
    review_hash,
)


@dataclass(frozen=True)
class ReviewStamps:
    stamps: tuple[StampAction, ...]
    declined: int  # clusters shown and left entirely intact
    undecided: frozenset[str] = frozenset()  # members of clusters a reply left intact without deciding (back-off)
    undecided_clusters: int = 0


def review_stamps(
    gating: GatingResult,
    decisions: Decisions,
    offered_ids: set[str],
    now: datetime,
    batch_of: Mapping[str, int] | None = None,
) -> ReviewStamps:
    """Stamp every offered, still-live entry reviewed; rejected and declined clusters get decline stamps.

    A cluster a RockBot-layout batch left intact and its reply never named (``decisions.undecided_batches``) was not
    decided on: an empty reply to 40 entries says nothing about each cluster (issue 23: four of five replies were
    ``{"toDelete": [], "toSave": []}``, and all 35 clusters were declined for a week). Its members are neither stamped
    reviewed nor declined; they are returned as ``undecided`` for a back-off stamp (backoff.py), so the cluster comes
    back next cycle, then after 1, 2, 4 … days. A cluster asked about on its own is decided by any usable reply."""
    leaving = decisions.leaving_ids()
    # A fold target is rewritten by its merge (its stamp still matches its unchanged text) and its cluster is not
    # declined: something was merged into it (RockBot's foldTargets).
    leaving |= {m.into.id for m in decisions.merges if m.into is not None}
    now_text = format_timestamp(now)
    undecided: set[str] = set()
    undecided_clusters = 0
    for cluster in gating.clusters:
        ids = list(cluster.ids)
        batch = (batch_of or {}).get(ids[0])
        if batch is None or batch not in decisions.undecided_batches:
            continue
        if any(i in leaving or i in decisions.named or i in decisions.unstamped for i in ids):
            continue
        undecided.update(ids)
        undecided_clusters += 1
    stamps: dict[str, StampAction] = {}
    by_id = {s.id: s for s in gating.eligible}
    for stored in gating.eligible:
        if stored.id in leaving or stored.id in decisions.unstamped or stored.id not in offered_ids:
            continue
        if stored.id in undecided:
            continue
        metadata: dict[str, str | None] = {REVIEWED_HASH: review_hash(stored.entry.content), REVIEWED_AT: now_text}
        stamps[stored.id] = StampAction(stored, metadata | backoff_cleared(stored))
    for stored_id, rejected_ids in decisions.rejected_clusters.items():
        if stored_id in stamps:
            stamps[stored_id].metadata.update({REJECTED_CLUSTER: cluster_hash(rejected_ids), REJECTED_AT: now_text})
    # A cluster shown and left entirely intact is declined; rejections count as declines (RockBot #571).
    declined = 0
    for cluster in gating.clusters:
        ids = list(cluster.ids)
        if any(i in leaving or i in decisions.unstamped or i not in stamps for i in ids):
            continue
        declined += 1
        chash = cluster_hash(ids)
        count = next_decline_count([by_id[i].entry for i in ids])
        for i in ids:
            stamps[i].metadata.update({DECLINED_CLUSTER: chash, DECLINED_AT: now_text, DECLINED_COUNT: str(count)})
    return ReviewStamps(tuple(stamps.values()), declined, frozenset(undecided), undecided_clusters)


__all__ = ["ReviewStamps", "review_stamps"]
