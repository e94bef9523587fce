"""Parity with RockBot's ``ConsolidationCandidateGatingTests`` (stored version 68435971994, API of DreamService
05346ff0) and ``DreamSettledClusterReopenTests`` (05346ff0): review stamps, candidate selection, clusters, reopen
times and whole reopen cycles, every vector.

The engine's defaults are RockBot's cluster identity (size 3, fixed id-order chunks, ASCII tokens), so the cluster
vectors hold with the defaults; the decline back-off takes the maximum count, clamped, as RockBot does.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dreamkeeper.consolidation.clustering import ClusterItem, find_clusters
from dreamkeeper.consolidation.cycle import CycleOptions, run_cycle
from dreamkeeper.consolidation.declines import days, reopen_at
from dreamkeeper.consolidation.gating import is_reviewed, select_candidates
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.memory import Entry, MemoryStore, StoredEntry, cluster_hash, format_timestamp, review_hash
from dreamkeeper.memory.atomic import Fingerprint
from dreamkeeper.memory.entry import DECLINED_AT, DECLINED_CLUSTER, DECLINED_COUNT, REVIEWED_AT, REVIEWED_HASH
from dreamkeeper.proposers import ScriptedProposer
from dreamkeeper.proposers.prompts import user_message
from tests.parity import rockbot_files
from tests.parity.vectors import NOW, one, take, when

NO_FILE = Fingerprint("0" * 64, 0, 0)


def stored(entry: Entry) -> StoredEntry:
    return StoredEntry(entry, Path(f"/memory/{entry.id}.json"), NO_FILE)


def reviewed_meta(content: str, at: str | None = "now") -> dict[str, str]:
    """RockBot's test helper ``Reviewed(x)``: the content fingerprint and the review time in "O" form."""
    stamp_time = when(at)
    assert stamp_time is not None
    return {REVIEWED_HASH: review_hash(content), REVIEWED_AT: rockbot_files.o_format(stamp_time)}


def gated_entry(spec: dict[str, Any]) -> Entry:
    metadata = None
    if spec.get("reviewed"):
        metadata = reviewed_meta(spec["content"], spec.get("reviewedAt", "now"))
    if "stamped_for" in spec:
        metadata = reviewed_meta(spec["stamped_for"], spec.get("reviewedAt", "now"))
    return Entry(
        id=spec["id"],
        content=spec["content"],
        created_at=NOW,
        last_seen_at=NOW,
        metadata=metadata,
        archived_at=NOW if spec.get("archived") else None,
    )


# ---- is the entry reviewed and unchanged? ---------------------------------------------------------------------


@pytest.mark.parametrize("vector", take("gate", "is_reviewed_and_unchanged"))
def test_review_stamp(vector: dict[str, Any]) -> None:
    inputs = vector["inputs"]
    if "stamped_for" in inputs:
        metadata: dict[str, str] | None = reviewed_meta(inputs["stamped_for"])
    else:
        metadata = inputs.get("metadata")
    entry = Entry(id="e", content=inputs["content"], metadata=metadata)
    then = inputs.get("then")
    if then:  # importance, timestamps and reinforcement are not part of the stamp
        entry = entry.evolve(
            importance_score=then["importanceScore"],
            updated_at=when(then["updatedAt"]),
            last_seen_at=when(then["lastSeenAt"]),
            reinforcement_count=then["reinforcementCount"],
        )
    assert is_reviewed(stored(entry)) is vector["expected"]["result"]


# ---- candidate selection ----------------------------------------------------------------------------------------


def settings_for(inputs: dict[str, Any]) -> CycleSettings:
    options = inputs.get("options") or {}
    # RockBot's reopen rule: a cluster of reviewed entries waits the interval even when never declined as that
    # cluster (dreamkeeper's offer_new_clusters offers it at once: tests/consolidation/test_new_clusters.py).
    values: dict[str, Any] = {"similarity_threshold": inputs.get("threshold", 0.88), "offer_new_clusters": False}
    if "SettledClusterReopenMaxPerCycle" in options:
        values["reopen_max_per_cycle"] = options["SettledClusterReopenMaxPerCycle"]
    if "SettledClusterReopenInterval" in options:
        values["reopen_interval_days"] = float(options["SettledClusterReopenInterval"])
    return CycleSettings(**values)


@pytest.mark.parametrize("vector", take("gate", "select"))
def test_candidate_selection(vector: dict[str, Any]) -> None:
    inputs, expected = vector["inputs"], vector["expected"]
    live = [stored(gated_entry(spec)) for spec in inputs["all"]]
    result = select_candidates(live, settings_for(inputs), NOW)
    eligible = [s.id for s in result.eligible]
    if "eligible" in expected:
        assert eligible == expected["eligible"]
    if "eligible_set" in expected:
        assert set(eligible) == set(expected["eligible_set"])
    if "eligible_ordered" in expected:
        assert eligible == expected["eligible_ordered"]
    if "merge_only_set" in expected:
        assert result.merge_only == set(expected["merge_only_set"])
    if "merge_only" in expected:
        assert sorted(result.merge_only) == expected["merge_only"]
    if "reopened_clusters" in expected:
        assert len(result.reopened) == expected["reopened_clusters"]
    if "offered_clusters" in expected:
        assert len(result.clusters) == expected["offered_clusters"]


# ---- reopen times -----------------------------------------------------------------------------------------------


def declined(entry_id: str, ids: list[str], at: str, count: int, reviewed_at: str = "now") -> Entry:
    """RockBot's test helper ``Declined(ids, at, count)``: reviewed, with a decline stamp for ``ids``."""
    declined_at = when(at)
    assert declined_at is not None
    metadata = reviewed_meta(f"fact {entry_id}", reviewed_at) | {
        DECLINED_CLUSTER: cluster_hash(ids),
        DECLINED_AT: rockbot_files.o_format(declined_at),
        DECLINED_COUNT: str(count),
    }
    return Entry(id=entry_id, content=f"fact {entry_id}", metadata=metadata)


def reopen(members: list[Entry], interval_days: float = 7, max_days: float = 56) -> Any:
    return reopen_at(members, days(interval_days), days(max_days))


def test_reopen_without_decline_stamps_is_one_interval_after_the_latest_review() -> None:
    vector = one("gate", "ReopenAt_WithoutDeclineStamps_IsOneIntervalAfterTheLatestReview")
    members = [
        Entry(id=m["id"], content=m["id"], metadata=reviewed_meta(m["id"], m["reviewedAt"]))
        for m in vector["inputs"]["members"]
    ]
    assert reopen(members) == when("now-3d") + timedelta(days=7)  # type: ignore[operator]


def test_reopen_backs_off_with_each_decline_and_clamps() -> None:
    """The count-40 case is the one that raised OverflowError in every cycle before (issue 15)."""
    vector = one("gate", "ReopenAt_BacksOffWithEachDecline")
    for case in vector["inputs"]["cases"]:
        ids, at, count = case["ids"], case["declinedAt"], case["count"]
        members = [declined(i, ids, at, count) for i in ids]
        wait = {"declinedAt+14d": 14, "declinedAt+7d": 7, "declinedAt+56d": 56}[case["expect"]]
        assert reopen(members) == when(at) + timedelta(days=wait), case  # type: ignore[operator]


def test_reopen_with_a_stamp_for_another_membership_falls_back_to_the_review() -> None:
    vector = one("gate", "ReopenAt_DeclineStampForOtherMembership_FallsBackToReviewAnchor")
    inputs = vector["inputs"]
    members = [
        declined(i, inputs["ids"], inputs["declinedAt"], inputs["count"], inputs["reviewedAt"]).with_meta(
            **{DECLINED_CLUSTER: cluster_hash(["a", "b", "c"])}
        )
        for i in inputs["ids"]
    ]
    assert reopen(members) == when(inputs["reviewedAt"]) + timedelta(days=7)  # type: ignore[operator]


def test_reopen_is_never_when_the_interval_is_zero() -> None:
    vector = one("gate", "ReopenAt_ReturnsNullWhenDisabled")
    inputs = vector["inputs"]
    members = [declined(i, inputs["ids"], inputs["declinedAt"], inputs["count"]) for i in inputs["ids"]]
    assert float(inputs["options"]["SettledClusterReopenInterval"]) == 0
    assert reopen(members, interval_days=0) is None


# ---- clusters ---------------------------------------------------------------------------------------------------


def items(entries: list[dict[str, Any]]) -> list[ClusterItem]:
    return [ClusterItem(e["id"], e["content"], None, None) for e in entries if not e.get("archived")]


def clusters(entries: list[dict[str, Any]], threshold: float, max_size: int) -> list[list[str]]:
    defaults = CycleSettings()  # the engine's defaults: RockBot's tokens and split
    found = find_clusters(
        items(entries),
        threshold=threshold,
        max_cluster_size=max_size,
        tokens=defaults.cluster_tokens,
        split=defaults.cluster_split,
    )
    return [list(c.ids) for c in found]


@pytest.mark.parametrize("vector", take("gate", "clusters"))
def test_clusters(vector: dict[str, Any]) -> None:
    inputs, expected = vector["inputs"], vector["expected"]
    if "cases" in inputs:
        for case in inputs["cases"]:
            assert len(clusters(inputs["entries"], case["threshold"], case["max"])) == case["clusters"], case
        return
    found = clusters(inputs["entries"], inputs["threshold"], inputs["max_cluster_size"])
    if "clusters" in expected:
        assert found == expected["clusters"]
    if "all_sizes_le" in expected:
        assert all(len(c) <= expected["all_sizes_le"] for c in found)
        assert sum(len(c) for c in found) == expected["total_members"]
        assert found == expected["exact_by_rockbot_algorithm"]  # id order, chunks of 2, the leftover dup4 dropped


def test_the_engine_default_cluster_size_is_rockbots() -> None:
    """``ConsolidationMaxClusterSize`` is 3 in RockBot (reference §2.3): decline stamps name chunks of that size."""
    assert CycleSettings().max_cluster_size == 3


# ---- whole reopen cycles ----------------------------------------------------------------------------------------

MILO_A = "Rocky has a dog named Milo the Sheltie"
MILO_B = "Rocky has a Sheltie dog named Milo"


class Recorder(ScriptedProposer):
    """Scripted replies (the last repeated, as RockBot's ``ScriptedLlmClient``); the prompt each batch would get."""

    def __init__(self, replies: list[dict[str, Any]]) -> None:
        self.replies = replies
        self.prompts: list[str] = []
        super().__init__(self._answer)

    def _answer(self, batch: Any, request: Any) -> dict[str, Any]:
        self.prompts.append(user_message(batch, request) or "")
        return self.replies[min(len(self.prompts) - 1, len(self.replies) - 1)]


def settled_pair(root: Path, reviewed_days_ago: float | None, entries: list[dict[str, Any]] | None = None) -> None:
    """RockBot's ``SettledPair(d)``: a and b, uncategorized, created 40 days ago, both reviewed d days ago."""
    specs = entries or [
        {"id": "a", "content": MILO_A, "reviewedAt": f"now-{reviewed_days_ago}d"},
        {"id": "b", "content": MILO_B, "reviewedAt": f"now-{reviewed_days_ago}d"},
    ]
    for spec in specs:
        metadata = None if spec.get("reviewed") is False else reviewed_meta(spec["content"], spec["reviewedAt"])
        rockbot_files.write(
            root, rockbot_files.entry(spec["id"], spec["content"], createdAt=when("now-40d"), metadata=metadata)
        )


def run(agent: Path, proposer: Recorder) -> Any:
    # Each cluster asked about on its own (the default shape), so a reply that changes nothing declines it, as
    # RockBot's empty reply does; no subsumption, so the proposer is asked (RockBot always asks); RockBot's reopen
    # rule (offer_new_clusters off).
    settings = CycleSettings(min_interval_hours=0, subsume=False, similarity_threshold=0.5, offer_new_clusters=False)
    return asyncio.run(run_cycle(CycleOptions(agent_dir=agent, settings=settings, now=NOW), proposer)).report


def meta(store: MemoryStore, entry_id: str, key: str) -> str | None:
    return store.require(entry_id).entry.meta(key)


@pytest.mark.parametrize(
    "vector",
    take(
        "reopen",
        "cycle",
        tests=(
            "AReopenedCluster_IsShownToTheModel_WithTheReofferNote",
            "ASettledClusterInsideItsCooldown_IsNotShown",
            "APruneOfAReopenedMember_IsIgnored",
            "AMergeOfAReopenedCluster_IsApplied_AndNothingIsStampedDeclined",
        ),
    ),
)
def test_reopen_cycle(vector: dict[str, Any], tmp_path: Path) -> None:
    inputs, expected = vector["inputs"], vector["expected"]
    root = tmp_path / "memory"
    settled_pair(root, inputs["reviewedDaysAgo"])
    proposer = Recorder(inputs["llm_replies"])
    report = run(tmp_path, proposer)
    store = MemoryStore(root)
    if "llm_calls" in expected:
        assert report.llm_calls == expected["llm_calls"]
    for needle in expected.get("prompt_contains", []):
        assert needle in proposer.prompts[0]
    if "deleted" in expected:
        assert report.archived == expected["deleted"]
    if "a.archivedAt" in expected:
        assert store.require("a").entry.archived_at is None
    if "saved" in expected:
        assert report.saved == expected["saved"]
    if "live_count" in expected:
        live = store.scan().live
        assert len(live) == expected["live_count"]
        assert all(s.entry.meta(DECLINED_CLUSTER) is None for s in live)


def test_a_cluster_left_alone_is_declined_and_the_count_climbs(tmp_path: Path) -> None:
    vector = one("reopen", "AClusterLeftAlone_IsStampedDeclined_AndTheCountClimbsOnTheNextDecline")
    inputs, expected = vector["inputs"], vector["expected"]
    root = tmp_path / "memory"
    settled_pair(root, inputs["reviewedDaysAgo"])
    proposer = Recorder(inputs["llm_replies"])
    store = MemoryStore(root)

    run(tmp_path, proposer)  # run pass
    first = expected["after_run1"]
    assert meta(store, "a", DECLINED_CLUSTER) == meta(store, "b", DECLINED_CLUSTER) == cluster_hash(["a", "b"])
    assert first["a.declinedCluster"] == "ClusterHash([a,b])"
    assert meta(store, "a", DECLINED_COUNT) == first["a.declinedCount"]
    assert is_reviewed(store.require("a")) is first["a.is_reviewed_and_unchanged"]

    run(tmp_path, proposer)  # run pass again immediately: declined a moment ago, not due
    assert len(proposer.prompts) == expected["after_run2"]["llm_calls"]

    for entry_id in ("a", "b"):  # backdate consolidationDeclinedAt of a and b by 8 days
        current = store.require(entry_id)
        at = current.entry.meta(DECLINED_AT)
        assert at is not None
        from dreamkeeper.consolidation.declines import parse_time

        earlier = parse_time(at)
        assert earlier is not None
        store.update(current, current.entry.with_meta(**{DECLINED_AT: format_timestamp(earlier - timedelta(days=8))}))
    run(tmp_path, proposer)
    third = expected["after_run3"]
    assert len(proposer.prompts) == third["llm_calls"]
    assert meta(store, "a", DECLINED_COUNT) == third["a.declinedCount"]
    assert meta(store, "b", DECLINED_COUNT) == third["b.declinedCount"]


def test_a_cluster_opened_by_a_new_member_and_left_alone_is_declined(tmp_path: Path) -> None:
    vector = one("reopen", "AClusterOpenedByANewMemberAndLeftAlone_IsAlsoStampedDeclined")
    inputs, expected = vector["inputs"], vector["expected"]
    root = tmp_path / "memory"
    settled_pair(root, None, inputs["entries"])
    proposer = Recorder(inputs["llm_replies"])
    run(tmp_path, proposer)
    assert ("left separate on an earlier pass" in proposer.prompts[0]) is expected["prompt_contains_reoffer_note"]
    store = MemoryStore(root)
    assert meta(store, "a", DECLINED_COUNT) == expected["a.declinedCount"]
    assert meta(store, "b", DECLINED_COUNT) == expected["b.declinedCount"]
