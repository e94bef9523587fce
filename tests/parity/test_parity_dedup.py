"""Parity with RockBot's ``MemoryDeduplicatorTests`` and ``MemorySaveTallyTests`` (8a7e360e), every vector.

Deliberate difference, one for the whole file: ``MemoryDeduplicator`` is the agent's *save path* (reinforce, extend
or create when a memory is saved), in RockBot's own process; it keeps running beside dreamkeeper unless
``Memory__DedupeEnabled=false``. dreamkeeper is never on that path. Each vector is ported to what dreamkeeper does
with the same two entries in its cycle: exact copies are folded, near-duplicates are clustered at RockBot's dream
threshold (0.88, one threshold for both measures, as RockBot's dream clustering), and the *decision* the deduplicator
takes — reinforce when the existing text covers the candidate's specifics, extend when it does not — is the verdict
of dreamkeeper's coverage check on the merge that keeps the existing text.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dreamkeeper.consolidation.clustering import ClusterItem, find_clusters
from dreamkeeper.consolidation.counts import CycleCounts
from dreamkeeper.consolidation.fold import fold_merge_into, plan_folds
from dreamkeeper.consolidation.gating import is_reviewed
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.coverage import SourceText, find_missing_specifics
from dreamkeeper.memory import Entry, StoredEntry, review_hash
from dreamkeeper.memory.atomic import Fingerprint
from dreamkeeper.memory.entry import REVIEWED_HASH
from tests.parity.vectors import NOW, take, when

NO_FILE = Fingerprint("0" * 64, 0, 0)
SETTINGS = CycleSettings()


def entry_of(spec: dict[str, Any]) -> Entry:
    created = when(spec.get("createdAt", "now-10d"))
    metadata = dict(spec.get("metadata") or {})
    if metadata.get(REVIEWED_HASH) == "ContentFingerprint(existing.content)":
        metadata[REVIEWED_HASH] = review_hash(spec["content"])
    return Entry(
        id=spec["id"],
        content=spec["content"],
        category=spec.get("category"),
        tags=list(spec.get("tags", [])),
        created_at=created,
        updated_at=when(spec.get("updatedAt")),
        last_seen_at=when(spec.get("lastSeenAt")) or created,
        importance_score=spec.get("importanceScore", 0.5),
        reinforcement_count=spec.get("reinforcementCount", 1),
        metadata=metadata or None,
        superseded_by=spec.get("supersededBy"),
    )


def stored(entry: Entry) -> StoredEntry:
    return StoredEntry(entry, Path(f"/memory/{entry.id}.json"), NO_FILE)


def clustered_at(score: float, existing: Entry, candidate: Entry) -> bool:
    """Whether dreamkeeper's clustering puts two entries at cosine ``score`` together (RockBot's 0.88)."""
    a = np.array([1.0, 0.0], dtype=np.float32)
    b = np.array([score, math.sqrt(1 - score * score)], dtype=np.float32)
    items = [ClusterItem(existing.id, existing.content, None, a), ClusterItem(candidate.id, candidate.content, None, b)]
    return bool(find_clusters(items, threshold=SETTINGS.similarity_threshold, max_cluster_size=3))


def folds(*entries: Entry) -> list[list[str]]:
    live = [stored(e) for e in entries if e.is_live]
    return [[a.survivor.id, *(c.id for c in a.copies)] for a in plan_folds(live, SETTINGS, NOW)]


@pytest.mark.parametrize("vector", take("dedup", "dedup"))
def test_deduplicator(vector: dict[str, Any]) -> None:
    inputs, expected, test = vector["inputs"], vector["expected"], vector["test"]
    if "concurrent_candidates" in inputs:
        # Two concurrent saves of one fact: one entry, reinforced twice. dreamkeeper's fold reaches the same.
        a, b = (entry_of(c) for c in inputs["concurrent_candidates"])
        (group,) = folds(a, b)
        (action,) = plan_folds([stored(a), stored(b)], SETTINGS, NOW)
        assert len(group) == 2 and action.updated.reinforcement_count == expected["reinforcementCount"]
        assert expected["entries"] == 1
        return
    candidate = entry_of(inputs["candidate"])
    if "existing" not in inputs:  # no similarity lookup at all: the entry is simply kept
        assert expected == {"action": "Created", "entries": 1} and folds(candidate) == []
        return
    existing = entry_of(inputs["existing"])
    action = expected["action"]
    if action == "Created" and expected.get("lookup_calls") == 0:
        # The deduplicator skipped the lookup. In dreamkeeper: categories a pass owns are never folded, nor is a
        # superseded entry; with dedupe disabled RockBot saves a second identical copy, which its own (and
        # dreamkeeper's) fold then folds in the next dream.
        folded = folds(existing, candidate)
        if test.startswith("Disabled"):
            assert folded == [["existing", "new"]]
        else:
            assert folded == []
        return
    match = inputs["scripted_match"]
    if action == "Created" and "DedupeMaxExtendedContentLength" not in inputs.get("options", {}):
        assert match["measure"] == "Embedding" and match["score"] < SETTINGS.similarity_threshold
        assert not clustered_at(match["score"], existing, candidate)  # below the dream's threshold: never offered
        return
    if test == "TheTwoMeasuresUseTheirOwnThresholds (lexical)":
        # The agent's lexical threshold (0.6) reinforces at 0.7; the dream clusters at 0.88 for both measures, so
        # this pair is not offered as duplicates (the agent has already reinforced it, and keeps doing so).
        assert match == {"score": 0.7, "measure": "Lexical"} and action == "Reinforced"
        assert not find_clusters(
            [ClusterItem(e.id, e.content, None, None) for e in (existing, candidate)],
            threshold=SETTINGS.similarity_threshold,
            max_cluster_size=3,
            tokens=SETTINGS.cluster_tokens,
        )
        return
    covered = not find_missing_specifics([SourceText(candidate.content, candidate.category)], existing.content)
    if action == "Reinforced":
        assert covered  # the merge that keeps the existing text passes dreamkeeper's coverage check
        folded = fold_merge_into(existing, candidate, [candidate.id], NOW)
        if "reinforcementCount" in expected:
            assert folded.content == existing.content and folded.id == expected["id"]
            assert folded.reinforcement_count == expected["reinforcementCount"]
            assert folded.last_seen_at == candidate.seen_at == NOW  # seen now (RockBot: LastSeenAt = now)
            assert folded.updated_at == existing.updated_at  # "unchanged"
            assert folded.importance_score == expected["importanceScore"]
            assert set(folded.tags) == set(expected["tags_set"])
            assert folded.meta("subjectTime") == expected["metadata.subjectTime"]
            assert folded.meta("source") == expected["metadata.source"]
            assert is_reviewed(stored(folded)) is expected["is_reviewed_and_unchanged"]
        return
    extended = existing.content.rstrip() + "\n\n" + candidate.content.strip()
    texts = [SourceText(existing.content), SourceText(candidate.content)]
    if action == "Extended":
        assert not covered  # keeping only the existing text would drop a specific: dreamkeeper rejects that merge
        assert extended == expected["content"] and not find_missing_specifics(texts, extended)
        grown = existing.evolve(content=extended)
        assert is_reviewed(stored(grown)) is expected["is_reviewed_and_unchanged"]  # changed text: offered again
        return
    # Past the agent's length cap the deduplicator creates instead of extending. dreamkeeper has no length cap on
    # a merge: the extended text keeps every specific of both, so its check would accept it.
    cap = inputs["options"]["DedupeMaxExtendedContentLength"]
    assert action == "Created" and len(extended) > cap
    assert not covered and not find_missing_specifics(texts, extended)


@pytest.mark.parametrize("vector", take("dedup", "tally"))
def test_save_tally_counts_each_action_apart(vector: dict[str, Any]) -> None:
    """``MemorySaveTally``: each outcome counted apart. dreamkeeper's report does the same for what it does in a
    cycle — a new entry (saved), an identical copy absorbed (folded), a merge into an existing entry."""
    kinds = {"Created": "saved", "Reinforced": "folded", "Extended": "merged_into_existing"}
    total = CycleCounts.total_of(CycleCounts(**{kinds[o]: 1}) for o in vector["inputs"]["outcomes"])
    expected = vector["expected"]
    assert (total.saved, total.folded, total.merged_into_existing) == (
        expected["saved"],
        expected["reinforced"],
        expected["extended"],
    )
