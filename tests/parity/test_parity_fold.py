"""Parity with RockBot's ``DreamExactDuplicateFoldTests`` (98f4b827) and ``DreamSaveTimeExactDedupTests``
(76a7d276): the exact-duplicate fold, a merge equal to a live entry folded at once, and the save-time exact check.

Deliberate difference: RockBot's save-time check (``SaveOrReinforceExactAsync``) runs in the agent's own process
when it saves an episode or an inferred preference; dreamkeeper is not on that path. What it answers instead is the
fold of its next cycle, which gives the same entry: the oldest identical live entry survives, reinforced, with its
text and ``updatedAt`` kept (RockBot's check stays on inside the agent unless the fold toggle turns it off).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dreamkeeper.consolidation.cycle import CycleOptions, run_cycle
from dreamkeeper.consolidation.fold import LiveTexts, fold_into, fold_merge_into, plan_folds
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.memory import Entry, MemoryStore, StoredEntry, fold_key
from dreamkeeper.memory.atomic import Fingerprint
from dreamkeeper.memory.entry import FOLDED_AT, FOLDED_FROM, MERGED_AT, MERGED_FROM
from dreamkeeper.proposers import ScriptedProposer
from dreamkeeper.proposers.prompts import user_message
from tests.consolidation.corpus import ROCKBOT_SHAPE
from tests.parity import rockbot_files
from tests.parity.vectors import NOW, one, take, when

NO_FILE = Fingerprint("0" * 64, 0, 0)
# The categories RockBot's passes own, named by constants the vectors only describe.
SPECIAL = {
    "FeedbackMemoryCategories.UserCorrectionPrefix": "feedback/user-corrections",
    "FeedbackMemoryCategories.UserCorrectionPrefix (a feedback/* category)": "feedback/user-corrections",
    "CapabilityClaimCategories.For('todo','add_task') (a claim/capability/* category)": (
        "claim/capability/todo/add_task"
    ),
}


def category_of(spec: dict[str, Any], previous: str | None) -> str | None:
    category = spec.get("category")
    if category in ("same", "same as fb1", "same as cap1"):
        return previous
    return SPECIAL.get(category, category)


def entry_of(spec: dict[str, Any], category: str | None) -> Entry:
    created = NOW - timedelta(days=spec.get("daysAgo", 10))
    return Entry(
        id=spec["id"],
        content=spec.get("content", ""),
        category=category,
        tags=list(spec.get("tags", [])),
        created_at=created,
        last_seen_at=created,
        importance_score=spec.get("importanceScore", 0.5),
        reinforcement_count=spec.get("reinforcementCount", 1),
        metadata=spec.get("metadata"),
        archived_at=when(spec["archivedAt"]) if "archivedAt" in spec else None,
        superseded_by=spec.get("supersededBy"),
    )


def entries_of(specs: list[dict[str, Any]]) -> list[Entry]:
    out: list[Entry] = []
    previous: str | None = None
    for spec in specs:
        previous = category_of(spec, previous)
        out.append(entry_of(spec, previous))
    return out


def stored(entry: Entry) -> StoredEntry:
    return StoredEntry(entry, Path(f"/memory/{entry.id}.json"), NO_FILE)


def fold_groups(entries: list[Entry], **settings: Any) -> list[list[str]]:
    live = [stored(e) for e in entries if e.is_live]
    return [[a.survivor.id, *(c.id for c in a.copies)] for a in plan_folds(live, CycleSettings(**settings), NOW)]


@pytest.mark.parametrize("vector", take("fold", "exact_groups"))
def test_exact_groups(vector: dict[str, Any]) -> None:
    groups = fold_groups(entries_of(vector["inputs"]["entries"]))
    expected = vector["expected"]
    if "groups" in expected:
        assert groups == expected["groups"]  # the oldest first: it survives
    if "group_count" in expected:
        assert len(groups) == expected["group_count"]


def test_fold_combines_evidence_and_keeps_the_survivors_text() -> None:
    vector = one("fold", "FoldCombinesEvidenceAndKeepsTheSurvivorsText")
    inputs, expected = vector["inputs"], vector["expected"]
    survivor = entry_of(_with_times(inputs["survivor"]), inputs["survivor"]["category"])
    copies = [stored(entry_of(_with_times(c), c["category"])) for c in inputs["copies"]]
    folded = fold_into(survivor, copies, NOW)
    assert folded.id == expected["id"] and folded.content == expected["content"]
    assert folded.tags == expected["tags_ordered"]  # a case-insensitive union, the survivor's spellings first
    assert folded.importance_score == expected["importanceScore"]
    assert folded.reinforcement_count == expected["reinforcementCount"]
    assert folded.last_seen_at == when(expected["lastSeenAt"])
    assert folded.created_at == survivor.created_at and folded.updated_at == survivor.updated_at
    assert folded.meta(FOLDED_FROM) == expected["metadata.foldedFrom"] and folded.meta(FOLDED_AT)


def _with_times(spec: dict[str, Any]) -> dict[str, Any]:
    """The vector's explicit times (createdAt, lastSeenAt, updatedAt) as an entry spec."""
    out = dict(spec)
    created = when(spec.get("createdAt", "now-10d"))
    assert created is not None
    out["daysAgo"] = (NOW - created).days
    return out


def test_fold_copies_missing_metadata_but_not_per_copy_bookkeeping() -> None:
    vector = one("fold", "FoldCopiesMissingMetadataButNotPerCopyBookkeeping")
    inputs, expected = vector["inputs"], vector["expected"]
    survivor = Entry(id="old", content="x", metadata=inputs["survivor"]["metadata"])
    copies = [stored(Entry(id=c["id"], content="x", metadata=c["metadata"])) for c in inputs["copies"]]
    folded = fold_into(survivor, copies, NOW)
    metadata = dict(folded.metadata or {})
    assert metadata.pop(FOLDED_AT)
    assert metadata == expected["metadata"]
    assert not set(expected["absent_keys"]) & set(metadata)


# ---- the fold's cycles ------------------------------------------------------------------------------------------


class Recorder(ScriptedProposer):
    def __init__(self, reply: dict[str, Any] | None = None) -> None:
        self.prompts: list[str] = []
        self.reply = reply or {"toDelete": [], "toSave": []}
        super().__init__(self._answer)

    def _answer(self, batch: Any, request: Any) -> dict[str, Any]:
        self.prompts.append(user_message(batch, request) or "")
        return self.reply


def write_all(root: Path, entries: list[Entry]) -> None:
    for e in entries:
        rockbot_files.write(
            root,
            rockbot_files.entry(
                e.id,
                e.content,
                category=e.category,
                tags=e.tags,
                createdAt=e.created_at,
                lastSeenAt=e.seen_at,
                reinforcementCount=e.reinforcement_count,
                importanceScore=e.importance_score,
            ),
        )


def cycle(agent: Path, proposer: ScriptedProposer, **settings: Any) -> Any:
    options = CycleOptions(
        agent_dir=agent, settings=CycleSettings(min_interval_hours=0, **ROCKBOT_SHAPE, **settings), now=NOW
    )
    return asyncio.run(run_cycle(options, proposer)).report


def archived_reasons(root: Path) -> list[list[str]]:
    return sorted([s.id, s.entry.archive_reason or ""] for s in MemoryStore(root).scan().archived)


@pytest.mark.parametrize(
    "vector",
    take(
        "fold",
        "cycle",
        tests=(
            "ThePassFoldsDuplicatesWithoutAnLlmCallAndArchivesCopiesMergedIntoTheSurvivor",
            "TheFoldRunsEvenWhenLlmConsolidationIsDisabled",
            "TheFoldCanBeTurnedOff",
            "TheLlmPassSeesTheFoldedCorpus",
        ),
    ),
)
def test_fold_cycle(vector: dict[str, Any], tmp_path: Path) -> None:
    """``MemoryConsolidationEnabled=false`` has no dreamkeeper twin: dreamkeeper *is* the consolidation (suspend the
    DreamSchedule to stop it). The fold needs no model either way, which is what those vectors check."""
    inputs, expected = vector["inputs"], vector["expected"]
    root = tmp_path / "memory"
    write_all(root, entries_of(inputs["entries"]))
    options = inputs.get("options", {})
    proposer = Recorder()
    report = cycle(tmp_path, proposer, exact_fold=options.get("MemoryExactDuplicateFoldEnabled", True))
    if "deleted" in expected:
        assert report.archived == expected["deleted"] == report.folded
    if "archived" in expected:
        assert archived_reasons(root) == sorted(expected["archived"])
    if "survivor.reinforcementCount" in expected:
        survivor = MemoryStore(root).require("old").entry
        assert survivor.archived_at is None and survivor.reinforcement_count == expected["survivor.reinforcementCount"]
    if "llm_calls" in expected:
        assert report.llm_calls == expected["llm_calls"]
    for needle in expected.get("prompt_contains", []):
        assert needle in proposer.prompts[0]
    for needle in expected.get("prompt_lacks", []):
        assert needle not in proposer.prompts[0]


def test_the_pause_marker_stops_the_fold(tmp_path: Path) -> None:
    vector = one("fold", "ThePauseMarkerStopsTheFold")
    inputs = vector["inputs"]
    root = tmp_path / "memory"
    write_all(root, entries_of(inputs["entries"]))
    marker = tmp_path / "memory-audit" / "consolidation-paused.json"
    marker.parent.mkdir()
    marker.write_text(inputs["marker"]["content"])
    cycle(tmp_path, Recorder())
    assert archived_reasons(root) == vector["expected"]["archived"]


def test_the_fold_is_on_by_default_and_binds_from_settings() -> None:
    """RockBot's ``Dream:MemoryExactDuplicateFoldEnabled`` (default true) is dreamkeeper's ``exact_fold``."""
    assert one("fold", "TheFoldIsOnByDefault")["expected"]["MemoryExactDuplicateFoldEnabled"] is True
    assert CycleSettings().exact_fold is True
    binding = one("fold", "TheFoldToggleBindsFromConfiguration")
    assert binding["inputs"]["config"] == {"Dream:MemoryExactDuplicateFoldEnabled": "false"}
    assert CycleSettings.model_validate({"exact_fold": False}).exact_fold is False


# ---- DreamSaveTimeExactDedupTests -------------------------------------------------------------------------------


def test_the_key_ignores_whitespace_and_category_case_but_not_content_case() -> None:
    vector = one("save", "KeyIgnoresWhitespaceAndCategoryCaseButNotContentCase")
    i = vector["inputs"]
    base = fold_key(i["base"]["category"], i["base"]["content"])
    assert (fold_key(i["same"]["category"], i["same"]["content"]) == base) is vector["expected"]["same_key"]
    assert (fold_key(i["different"]["category"], i["different"]["content"]) == base) is vector["expected"][
        "different_key"
    ]


def test_observation_theories_are_not_eligible() -> None:
    vector = one("save", "ObservationTheoriesAreNotEligible")
    texts = LiveTexts([], CycleSettings())
    for category, eligible in vector["inputs"]["cases"].items():
        assert texts.eligible(Entry(id="e", content="x", category=category)) is eligible, category


def test_fold_merge_into_existing_combines_counters_and_appends_provenance() -> None:
    vector = one("save", "FoldMergeIntoExisting_CombinesCountersAndAppendsProvenance")
    inputs, expected = vector["inputs"], vector["expected"]

    def build(spec: dict[str, Any]) -> Entry:
        return Entry(
            id=spec["id"],
            content=spec["content"],
            category=spec["category"],
            tags=spec["tags"],
            created_at=when(spec["createdAt"]),
            updated_at=when(spec["updatedAt"]),
            last_seen_at=when(spec["lastSeenAt"]),
            importance_score=spec["importanceScore"],
            reinforcement_count=spec["reinforcementCount"],
            metadata=spec["metadata"],
        )

    existing, merged = build(inputs["existing"]), build(inputs["merged"])
    folded = fold_merge_into(existing, merged, inputs["sources"], NOW)
    assert folded.id == expected["id"] and folded.content == expected["content"]
    assert folded.updated_at == existing.updated_at
    assert folded.reinforcement_count == expected["reinforcementCount"]
    assert folded.importance_score == expected["importanceScore"]
    assert folded.last_seen_at == when(expected["lastSeenAt"]) and folded.created_at == merged.created_at
    assert folded.tags == expected["tags_ordered"]
    assert folded.meta(MERGED_FROM) == expected["metadata.mergedFrom"]
    assert folded.meta(MERGED_AT) == __import__("dreamkeeper.memory", fromlist=["x"]).format_timestamp(NOW)
    assert folded.meta("subjectTime") == expected["metadata.subjectTime"]
    assert folded.meta("source") == expected["metadata.source"]
    assert not set(expected["absent_keys"]) & set(folded.metadata or {})


@pytest.mark.parametrize("vector", take("save", "cycle"))
def test_a_merge_equal_to_a_live_entry(vector: dict[str, Any], tmp_path: Path) -> None:
    """RockBot #580: folded into the live entry at once, in the same pass; a merge keeping one of its own
    sources' text is still a new entry."""
    inputs, expected = vector["inputs"], vector["expected"]
    root = tmp_path / "memory"
    write_all(root, entries_of(inputs["entries"]))
    report = cycle(tmp_path, Recorder(inputs["llm_replies"][0]), repair_max_per_cycle=0)
    assert (report.saved, report.archived) == (expected["saved"], expected["deleted"])
    live = [s.id for s in MemoryStore(root).scan().live]
    if "live_ids" in expected:
        assert live == expected["live_ids"]
        target = MemoryStore(root).require("target").entry
        assert target.reinforcement_count == expected["target.reinforcementCount"]
        assert target.meta(MERGED_FROM) == expected["target.metadata.mergedFrom"]
        assert archived_reasons(root) == sorted(expected["archived"]) and report.merged_into_existing == 1
    else:
        (new,) = live
        assert new not in {"s1", "s2"} and archived_reasons(root) == [
            ["s1", f"merged into {new}"],
            ["s2", f"merged into {new}"],
        ]


@pytest.mark.parametrize("vector", take("save", "save_or_reinforce_exact"))
def test_the_save_time_check_is_the_next_cycles_fold(vector: dict[str, Any]) -> None:
    inputs, expected = vector["inputs"], vector["expected"]
    existing = inputs["existing"] if isinstance(inputs["existing"], list) else [inputs["existing"]]
    specs = [*existing, inputs["candidate"]]
    entries = entries_of(specs)
    options = inputs.get("options", {})
    live = [stored(e) for e in entries if e.is_live]
    actions = plan_folds(live, CycleSettings(exact_fold=options.get("MemoryExactDuplicateFoldEnabled", True)), NOW)
    candidate = inputs["candidate"]["id"]
    mine = [a for a in actions if candidate in {a.survivor.id, *(c.id for c in a.copies)}]
    if expected.get("action", "Reinforced") == "Created":
        assert mine == []  # both stay: a different category, case, an archived match, feedback, or the fold off
        return
    (action,) = mine
    # The oldest identical live entry absorbs the candidate (and any other copy: the fold takes them all at once).
    assert action.survivor.id == expected["id"] and candidate in [c.id for c in action.copies]
    updated = action.updated
    if "reinforcementCount" in expected:
        assert updated.reinforcement_count == expected["reinforcementCount"]
        assert updated.importance_score == expected["importanceScore"]
        assert updated.updated_at == action.survivor.entry.updated_at  # "unchanged"
        assert expected["tags_contains"] in updated.tags
        assert len(live) - len(action.copies) == expected["entry_count"]
