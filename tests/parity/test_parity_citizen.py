"""Parity with RockBot where dreamkeeper runs beside it (issue 24, findings 3, 4, 6 and 7): its configured paths,
its embedding cache and cosine, its source-less saves, its float32 floor, its fold exclusions, its decay cadence and
its snapshot. Each test cites the vector (``data/rockbot-citizen-vectors.json``: RockBot's file and commit)."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dreamkeeper.consolidation.agent_config import parse_timespan
from dreamkeeper.consolidation.agent_view import agent_view
from dreamkeeper.consolidation.clustering import ClusterItem, find_clusters
from dreamkeeper.consolidation.clustering.similarity import cosine_rows
from dreamkeeper.consolidation.cycle import CycleOptions, run_cycle
from dreamkeeper.consolidation.embeddings import MAX_INPUT_CHARS, document_text, prepare_text, vector_bytes
from dreamkeeper.consolidation.scope import scoped
from dreamkeeper.consolidation.settings import CycleSettings, RockBotSettings
from dreamkeeper.memory import Entry, HighValueFloor, MemoryStore
from dreamkeeper.proposers import ScriptedProposer
from tests.parity import rockbot_files
from tests.parity.citizen import cite
from tests.parity.vectors import NOW

NOTHING = {"toDelete": [], "toSave": []}


def agent(tmp_path: Path) -> Path:
    directory = tmp_path / "agent"
    (directory / "memory").mkdir(parents=True)
    return directory


def write(directory: Path, entry_id: str, content: str, **fields: Any) -> Path:
    return rockbot_files.write(directory / "memory", rockbot_files.entry(entry_id, content, **fields))


def cycle(directory: Path, replies: Any = None, **settings: Any) -> Any:
    options = CycleOptions(agent_dir=directory, settings=CycleSettings(min_interval_hours=0, **settings), now=NOW)
    proposer = ScriptedProposer(replies if replies is not None else (lambda b, r: NOTHING))
    return asyncio.run(run_cycle(options, proposer)), proposer


# ---- 3: configured paths ---------------------------------------------------------------------------------------


def test_the_pause_marker_is_where_the_agent_s_audit_writes_it(tmp_path: Path) -> None:
    vector = cite("paths", "BindsWhatTheConfigMapActuallyEmits")
    directory = agent(tmp_path)
    configured = vector["inputs"]["MemoryAudit:BasePath"].replace("memory-audit", "audit-files")
    (directory / "rockbot.env").write_text(
        f"AgentProfile__BasePath=/data/agent\nMemoryAudit__BasePath={configured}\n", encoding="utf-8"
    )
    write(directory, "a", "Rocky lives in Minnesota.")
    (directory / "audit-files").mkdir()
    (directory / "audit-files" / "consolidation-paused.json").write_text('{"reason": "loss"}', encoding="utf-8")
    report = cycle(directory)[0].report
    assert report.paused == 1 and report.result == "skipped"
    assert report.agent_settings["pauseMarker"].startswith(str(directory / "audit-files" / "consolidation-paused.json"))
    assert (
        "rockbot.env (MemoryAudit__BasePath), under rockbot.env (AgentProfile__BasePath)"
        in (report.agent_settings["pauseMarker"])
    )


def test_without_configuration_the_defaults_are_rockbot_s(tmp_path: Path) -> None:
    vector = cite("paths", "MissingSectionLeavesTheCodeDefaults")
    view = agent_view(agent(tmp_path), RockBotSettings(), environ={})
    assert view.audit_dir.path.name == vector["expected"]["BasePath"] and view.audit_dir.source == "RockBot's default"
    assert view.directive.path.name == "dream.md" and view.feedback_dir.path.name == "feedback"


def test_timespans_are_read_as_net_binds_them() -> None:
    shapes = cite("paths", "BindsTimeSpansFromTheConfigMapStringShapes")["inputs"]
    assert parse_timespan(shapes["MemoryAudit:SnapshotRetention"]) == timedelta(days=400)
    assert parse_timespan(shapes["MemoryAudit:EvalWindow"]) == timedelta(days=14)
    assert parse_timespan(shapes["MemoryAudit:InitialDelay"]) == timedelta(minutes=10)
    zero = cite("paths", "ZeroValues_DisableDimensions_AndBind")["inputs"]["Dream:LogRetentionMaxFileAge"]
    assert parse_timespan(zero) == timedelta(0)
    thirty = cite("paths", "Binds_RetentionKnobs_FromConfigMapStringShapes")["inputs"]["Dream:LogRetentionMaxFileAge"]
    assert parse_timespan(thirty) == timedelta(days=30)


def test_the_directive_and_the_feedback_come_from_the_configured_paths(tmp_path: Path) -> None:
    directive = cite("paths", "DirectivePath resolved under the profile")["inputs"]["Dream__DirectivePath"]
    feedback = cite("paths", "Feedback:BasePath resolved under the profile")["inputs"]["Feedback__BasePath"]
    directory = agent(tmp_path)
    settings = {"Dream": {"DirectivePath": directive}, "Feedback": {"BasePath": feedback}}
    (directory / "appsettings.json").write_text(json.dumps(settings), encoding="utf-8")
    (directory / directive).parent.mkdir(parents=True)
    (directory / directive).write_text("CUSTOM DIRECTIVE: merge only exact restatements.", encoding="utf-8")
    (directory / feedback / "2026-09").mkdir(parents=True)
    signal = {"sessionId": "s1", "signalType": 0, "summary": "used the wrong calendar", "timestamp": NOW.isoformat()}
    (directory / feedback / "2026-09" / "s1.jsonl").write_text(json.dumps(signal) + "\n", encoding="utf-8")
    write(directory, "a", "Rocky lives in Minnesota.")
    write(directory, "b", "Rocky is from Minnesota.")
    outcome, proposer = cycle(directory)
    request = proposer.requests[0]
    assert request.directive == "CUSTOM DIRECTIVE: merge only exact restatements."
    assert [f.summary for f in request.feedback] == ["used the wrong calendar"]
    assert outcome.report.agent_settings["directive"] == f"{directory / directive} (appsettings.json)"


# ---- 4: embeddings as RockBot's EmbeddingCache keeps them --------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "CosineSimilarity_IdenticalVectors_ReturnsOne",
        "CosineSimilarity_OrthogonalVectors_ReturnsZero",
        "CosineSimilarity_OppositeVectors_ReturnsNegativeOne",
        "CosineSimilarity_SimilarVectors_ReturnsHighScore",
    ],
)
def test_cosine_as_rockbot_computes_it(name: str) -> None:
    vector = cite("embeddings", name)
    a, b = (np.asarray(vector["inputs"][k], dtype=np.float32)[None, :] for k in ("a", "b"))
    value = float(cosine_rows(a, b)[0])
    expected = vector["expected"]["cosine"]
    if isinstance(expected, str):
        assert value > float(expected[1:])
    else:
        assert value == pytest.approx(expected, abs=0.001)


@pytest.mark.parametrize(
    "name",
    [
        "CosineSimilarity_ZeroVector_ReturnsZero",
        "CosineSimilarity_DifferentLengths_ReturnsZero",
        "CosineSimilarity_EmptyVectors_ReturnsZero",
    ],
)
def test_a_vector_rockbot_scores_zero_is_compared_by_jaccard_here(name: str) -> None:
    """RockBot scores these 0 (never a near-duplicate); dreamkeeper compares such a pair by Jaccard instead
    (docs/rockbot.md: a model change or a corrupt file must not silently stop deduplication)."""
    vector = cite("embeddings", name)
    assert vector["expected"]["cosine"] == 0.0
    a, b = (np.asarray(vector["inputs"][k], dtype=np.float32) for k in ("a", "b"))
    same = "Rocky has a Sheltie named Milo who hates thunderstorms."
    clusters = find_clusters(
        [ClusterItem("a", same, None, a), ClusterItem("b", same, None, b)], threshold=0.88, max_cluster_size=3
    )
    assert [c.measure for c in clusters] == ["jaccard"]


def test_cosine_is_decided_in_float32() -> None:
    vector = cite("embeddings", "cosine in float32")
    a, b = (np.asarray(vector["inputs"][k], dtype=np.float32) for k in ("a", "b"))
    wide = float(a.astype(np.float64) @ b.astype(np.float64)) / float(np.linalg.norm(a.astype(np.float64)))
    wide /= float(np.linalg.norm(b.astype(np.float64)))
    assert wide == pytest.approx(vector["expected"]["float64"]) and wide < vector["inputs"]["threshold"]
    assert float(cosine_rows(a[None, :], b[None, :])[0]) == pytest.approx(vector["expected"]["float32"], abs=1e-9)
    items = [ClusterItem("a", "x", None, a), ClusterItem("b", "y", None, b)]
    assert (
        len(find_clusters(items, threshold=vector["inputs"]["threshold"], max_cluster_size=3)) == 1
    )  # clustered, as RockBot clusters it


def test_a_vector_is_written_where_and_as_rockbot_writes_it(tmp_path: Path) -> None:
    vector = cite("embeddings", "file name and bytes")
    store = MemoryStore(agent(tmp_path) / "memory")
    data = vector_bytes(np.asarray(vector["inputs"]["vector"], dtype=np.float32))
    assert store.write_embedding(vector["inputs"]["id"], data, replace=False)
    path = store.root / vector["expected"]["path"]
    assert path.read_bytes().hex() == vector["expected"]["hex"]
    loaded = store.load_embedding(vector["inputs"]["id"])
    assert loaded is not None and loaded.tolist() == vector["inputs"]["vector"]


def test_the_text_embedded_is_rockbot_s_document_text() -> None:
    vector = cite("embeddings", "GetDocumentText")
    inputs = vector["inputs"]
    entry = Entry(id="e", content=inputs["content"], tags=inputs["tags"], category=inputs["category"])
    assert document_text(entry) == vector["expected"]["text"]
    caps = cite("embeddings", "EmbeddingTextPreparer caps")
    assert len(prepare_text("word " * (caps["inputs"]["prose"] // 5))) == caps["expected"]["prose"] == MAX_INPUT_CHARS
    structured = "[" + '"x",' * (caps["inputs"]["structured"] // 4)
    assert len(prepare_text(structured)) == caps["expected"]["structured"]


# ---- 6: source-less saves ---------------------------------------------------------------------------------------


def feedback(directory: Path) -> None:
    (directory / "feedback").mkdir()
    signal = {"sessionId": "s1", "signalType": 0, "summary": "forced the deploy", "timestamp": NOW.isoformat()}
    (directory / "feedback" / "s1.jsonl").write_text(json.dumps(signal) + "\n", encoding="utf-8")


def test_a_source_less_save_is_saved_as_rockbot_saves_it(tmp_path: Path) -> None:
    vector = cite("sourceless", "a toSave with no offered source is saved")
    directory = agent(tmp_path)
    feedback(directory)
    write(directory, "a", "Rocky lives in Minnesota.")
    write(directory, "b", "Rocky is from Minnesota.")
    save = vector["inputs"]["toSave"]
    report = cycle(directory, lambda b, r: {"toDelete": [], "toSave": [save]})[0].report
    assert report.sourceless_saved == vector["expected"]["saved"] and report.sourceless_refused == 0
    (saved,) = [s.entry for s in MemoryStore(directory / "memory").scan().live if s.entry.content == save["content"]]
    assert saved.category == vector["expected"]["category"] and saved.tags == save["tags"]
    assert saved.reinforcement_count == vector["expected"]["reinforcementCount"]
    assert saved.importance_score == vector["expected"]["importance"] and saved.created_at == NOW
    assert saved.meta("mergedFrom") is None and saved.meta("derivedFrom") == "feedback"


@pytest.mark.parametrize(
    ("content", "with_feedback", "cap", "why"),
    [
        ("Don't force deploys — roll back first.", False, 5, "no feedback signals"),
        ("Don't force deploys — roll back first.", True, 0, "off"),
        ("Ask Zebulon Quartermaine before forcing deploys.", True, 5, "identity specific"),
    ],
    ids=["no-feedback", "cap-zero", "name-from-nowhere"],
)
def test_a_source_less_save_is_refused_where_nothing_supports_it(
    tmp_path: Path, content: str, with_feedback: bool, cap: int, why: str
) -> None:
    directory = agent(tmp_path)
    if with_feedback:
        feedback(directory)
    write(directory, "a", "Rocky lives in Minnesota.")
    write(directory, "b", "Rocky is from Minnesota.")
    save = {"content": content, "category": "anti-patterns/deploys", "sourceIds": []}
    reply = {"toDelete": [], "toSave": [save]}
    report = cycle(directory, lambda b, r: reply, sourceless_saves_max_per_cycle=cap)[0].report
    assert report.sourceless_refused == 1 and report.sourceless_saved == 0
    assert all(s.entry.content != content for s in MemoryStore(directory / "memory").scan().entries)


# ---- 7: the float32 floor, fold exclusions, decay cadence, snapshot ---------------------------------------------


def test_the_floor_is_compared_in_float32() -> None:
    vector = cite("floor", "IsProtectedFromPruning in float32")
    entry = Entry(id="e", content="x", importance_score=vector["inputs"]["importanceScore"])
    assert HighValueFloor().protects(entry) is vector["expected"]["protected"]


@pytest.mark.parametrize(
    "name",
    [
        "feedback exclusion is ordinal",
        "claim/capability exclusion is ordinal",
        "observation/theory/ exclusion is a trimmed ignore-case prefix",
    ],
)
def test_fold_exclusions_follow_rockbot_s_case_rules(name: str) -> None:
    vector = cite("fold", name)
    settings = CycleSettings()
    got = [settings.is_fold_excluded(c) for c in vector["inputs"]["categories"]]
    assert got == vector["expected"]["excluded"]


def test_every_decay_drop_is_written(tmp_path: Path) -> None:
    cite("decay", "every drop is written")
    directory = agent(tmp_path)
    old = NOW - timedelta(days=100)
    write(directory, "rose", "Rose lives in Portland.", createdAt=old, updatedAt=NOW - timedelta(hours=12),
          importanceScore=0.6)  # fmt: skip
    report = cycle(directory)[0].report  # half a day of decay: about 0.005
    assert report.decayed == 1
    assert MemoryStore(directory / "memory").require("rose").entry.importance_score < 0.6


def test_scope_rockbot_is_rockbot_s_snapshot(tmp_path: Path) -> None:
    vector = cite("scope", "SearchAsync(MaxResults: 1000) newest lastSeenAt")
    directory = agent(tmp_path)
    old = NOW - timedelta(days=200)
    for n in range(vector["inputs"]["live"]):
        write(directory, f"e{n:04d}", f"fact number {n}", createdAt=old, lastSeenAt=old + timedelta(minutes=n),
              importanceScore=0.9)  # fmt: skip
    live = MemoryStore(directory / "memory").scan().live
    chosen = scoped(live, "rockbot")
    assert len(chosen) == vector["expected"]["snapshot"] and "e0000" not in {s.id for s in chosen}
    report = cycle(directory, scope="rockbot")[0].report
    assert report.decayed == vector["expected"]["snapshot"]
    assert MemoryStore(directory / "memory").require("e0000").entry.importance_score == pytest.approx(0.9)


def test_a_merge_the_model_gives_no_category_keeps_its_first_source_s(tmp_path: Path) -> None:
    """A documented difference (docs/rockbot.md): RockBot saves such a merge uncategorized with the model's tags
    only; dreamkeeper keeps the first source's category and every source's tags."""
    vector = cite("merge", "category and tags are the model's")
    assert vector["expected"]["rockbot"] == {"category": None, "tags": []}
    directory = agent(tmp_path)
    write(directory, "a", "Rocky lives in Minnesota.", category="user-preferences/home", tags=["home"])
    write(directory, "b", "Rocky is from Minnesota.", category="user-preferences/home")
    merge = {"content": "Rocky lives in Minnesota; he is from there.", "sourceIds": ["a", "b"]}
    cycle(directory, lambda b, r: {"toDelete": [], "toSave": [merge]})
    (entry,) = [s.entry for s in MemoryStore(directory / "memory").scan().live]
    assert entry.category == "user-preferences/home" and entry.tags == ["home"]
