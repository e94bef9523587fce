"""A cluster its reviewed members were never shown as is offered at once (issue 23, ``offer_new_clusters``).

On the sample, five families whose copies sat in different RockBot chunks in cycle 1 form a cluster of their own
in cycle 2 (their neighbours were merged), but both copies were already stamped reviewed: RockBot's rule waits the
review interval (7 days), past the dream table's three days."""

from __future__ import annotations

from datetime import timedelta

from dreamkeeper.consolidation.gating import select_candidates
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.memory import Entry, cluster_hash, format_timestamp, review_hash
from dreamkeeper.memory.entry import DECLINED_AT, DECLINED_CLUSTER, DECLINED_COUNT, REVIEWED_AT, REVIEWED_HASH
from tests.consolidation.corpus import BASE_TIME
from tests.parity.test_parity_gating import stored

PAIR = [
    ("p1", "For quick questions, Ingrid Ferreira would rather use Signal messenger today."),
    ("p2", "For quick questions, Ingrid Ferreira would rather use Signal messenger."),
]


def live(declined: bool) -> list:  # type: ignore[type-arg]
    reviewed_at = format_timestamp(BASE_TIME - timedelta(days=1))
    entries = []
    for entry_id, text in PAIR:
        meta = {REVIEWED_HASH: review_hash(text), REVIEWED_AT: reviewed_at}
        if declined:
            meta |= {DECLINED_CLUSTER: cluster_hash(["p1", "p2"]), DECLINED_AT: reviewed_at, DECLINED_COUNT: "1"}
        entries.append(
            stored(Entry(id=entry_id, content=text, created_at=BASE_TIME, last_seen_at=BASE_TIME, metadata=meta))
        )
    return entries


def test_reviewed_entries_never_declined_as_this_cluster_are_offered_at_once() -> None:
    result = select_candidates(live(declined=False), CycleSettings(), BASE_TIME)
    assert [c.ids for c in result.clusters] == [("p1", "p2")]
    assert result.merge_only == {"p1", "p2"}  # reopened: merged or left, never pruned


def test_a_cluster_declined_as_itself_still_waits_its_back_off() -> None:
    assert select_candidates(live(declined=True), CycleSettings(), BASE_TIME).clusters == []


def test_rockbots_rule_waits_the_review_interval() -> None:
    settings = CycleSettings(offer_new_clusters=False)
    assert select_candidates(live(declined=False), settings, BASE_TIME).clusters == []
    later = BASE_TIME + timedelta(days=6, hours=1)
    assert [c.ids for c in select_candidates(live(declined=False), settings, later).clusters] == [("p1", "p2")]
