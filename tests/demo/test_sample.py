"""The sample agent: deterministic, RockBot-shaped, the bundled copy exactly the generator's output, and
`dreamkeeper sample`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from dreamkeeper.coverage import VOCABULARY_FILE
from dreamkeeper.demo.cli import register
from dreamkeeper.demo.sample import (
    BUNDLED_SAMPLE,
    EMBEDDING_DIM,
    SampleExistsError,
    SampleSummary,
    copy_bundled,
    generate_sample,
)
from dreamkeeper.memory import MemoryStore
from tests.memory.conftest import tree_bytes

DOTNET_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{7}\+00:00$")
TIME_KEYS = {"createdat", "updatedat", "lastseenat", "archivedat"}


@pytest.fixture(scope="module")
def default_sample(tmp_path_factory: pytest.TempPathFactory) -> SampleSummary:
    return generate_sample(tmp_path_factory.mktemp("sample") / "agent")


def test_bundled_sample_is_in_sync_with_the_generator(default_sample: SampleSummary) -> None:
    generated = tree_bytes(default_sample.agent_dir)
    bundled = tree_bytes(BUNDLED_SAMPLE)
    assert sorted(generated) == sorted(bundled), "run: python -m dreamkeeper.demo.sample --write-bundled"
    assert generated == bundled, "run: python -m dreamkeeper.demo.sample --write-bundled"


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path: Path) -> None:
    first = generate_sample(tmp_path / "a", seed=11, size=60)
    second = generate_sample(tmp_path / "b", seed=11, size=60)
    third = generate_sample(tmp_path / "c", seed=12, size=60)
    assert tree_bytes(first.agent_dir) == tree_bytes(second.agent_dir)
    assert tree_bytes(first.agent_dir) != tree_bytes(third.agent_dir)


@pytest.mark.parametrize("size", [20, 137, 1000])
def test_size_is_honoured_with_exactly_one_malformed_file(tmp_path: Path, size: int) -> None:
    summary = generate_sample(tmp_path / "agent", seed=3, size=size)
    scan = MemoryStore(summary.memory_dir).scan()
    assert summary.entry_files == size == len(scan.entries)
    assert len(scan.malformed) == 1 == len(summary.malformed)
    assert scan.malformed[0].path == summary.agent_dir / summary.malformed[0]
    assert not scan.duplicates


def test_files_are_rockbot_shaped(default_sample: SampleSummary) -> None:
    pascal = older = unknown = 0
    for path in default_sample.memory_dir.rglob("*.json"):
        if path.relative_to(default_sample.agent_dir).as_posix() in default_sample.malformed:
            continue
        text = path.read_text(encoding="utf-8")
        assert not text.endswith("\n")  # System.Text.Json writes none
        obj = json.loads(text)
        lowered = {k.lower(): v for k, v in obj.items()}
        assert re.fullmatch(r"[0-9a-f]{12}", lowered["id"]) and path.stem == lowered["id"]
        for key in TIME_KEYS & set(lowered):
            assert lowered[key] is None or DOTNET_TIME.match(lowered[key]), (path, key)
        pascal += "Id" in obj
        older += "archivedat" not in lowered
        unknown += bool(
            set(lowered)
            - {
                *TIME_KEYS,
                "id",
                "content",
                "category",
                "tags",
                "reinforcementcount",
                "importancescore",
                "metadata",
                "supersededby",
                "archivereason",
            }
        )
    assert pascal >= 1 and older >= 5 and unknown >= 5


def test_sample_has_the_shapes_consolidation_needs(default_sample: SampleSummary) -> None:
    store = MemoryStore(default_sample.memory_dir)
    entries = {s.id: s.entry for s in store.scan().entries}
    top = [e for e in entries.values() if e.importance_score >= 0.99 and e.reinforcement_count >= 200]
    assert top and top[0].category == "agent-knowledge/self-model"
    assert len(default_sample.exact_duplicate_groups) >= 5
    for group in default_sample.exact_duplicate_groups:
        assert len({entries[i].content for i in group}) == 1 and len({entries[i].category for i in group}) == 1
    assert len(default_sample.near_duplicate_groups) >= 20
    assert default_sample.archived >= 5 and default_sample.superseded >= 1 and default_sample.purge_due_ids
    reviewed = [e for e in entries.values() if e.meta("consolidationReviewedHash")]
    assert len(reviewed) >= 50
    assert any(e.meta("consolidationDeclinedCluster") for e in entries.values())
    merged = [e for e in entries.values() if e.meta("mergedFrom")]
    for survivor in merged:
        for source in (survivor.meta("mergedFrom") or "").split(","):
            assert entries[source].archive_reason == f"merged into {survivor.id}"
    names = " ".join(e.content for e in entries.values())
    for specific in ("Jordan Michael Ellery", "Rose", "Will", "May Lindqvist", "+1 ", "@", "2026-"):
        assert specific in names


def test_near_duplicates_have_close_vectors_and_others_do_not(default_sample: SampleSummary) -> None:
    store = MemoryStore(default_sample.memory_dir)
    vectors = {s.id: store.load_embedding(s.id) for s in store.scan().entries}
    present = {k: v for k, v in vectors.items() if v is not None}
    assert 0.4 * len(vectors) < len(present) < len(vectors)  # some, not all
    assert all(len(v) == EMBEDDING_DIM for v in present.values())
    group_of = {i: n for n, group in enumerate(default_sample.near_duplicate_groups) for i in group}
    close, far = [], []
    ids = sorted(present)
    matrix = np.stack([present[i] for i in ids])
    cosines = matrix @ matrix.T
    for a in range(len(ids)):
        for b in range(a + 1, len(ids)):
            same = group_of.get(ids[a], -1) == group_of.get(ids[b], -2)
            (close if same else far).append(cosines[a, b])
    assert close and min(close) >= 0.88
    assert max(far) < 0.8


def test_vocabulary_file_is_rockbot_json_with_comments(default_sample: SampleSummary) -> None:
    text = (default_sample.agent_dir / VOCABULARY_FILE).read_text(encoding="utf-8")
    assert "//" in text
    stripped = re.sub(r",(\s*[}\]])", r"\1", re.sub(r"^\s*//.*$", "", text, flags=re.M))
    vocabulary = json.loads(stripped)
    assert vocabulary["alwaysSpecificWords"] == ["May", "Will", "Rose"]


def test_refuses_to_write_into_a_non_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "keep.txt").write_text("mine")
    with pytest.raises(SampleExistsError):
        generate_sample(tmp_path / "agent")
    with pytest.raises(SampleExistsError):
        copy_bundled(tmp_path / "agent")
    assert [p.name for p in (tmp_path / "agent").iterdir()] == ["keep.txt"]


def test_copy_bundled_into_empty_dir(tmp_path: Path) -> None:
    (tmp_path / "agent").mkdir()
    copy_bundled(tmp_path / "agent")
    assert tree_bytes(tmp_path / "agent") == tree_bytes(BUNDLED_SAMPLE)


def test_sample_command(tmp_path: Path) -> None:
    app = typer.Typer(pretty_exceptions_enable=False)
    app.callback()(lambda: None)  # a group, as in the root CLI (one lone command would become the app itself)
    register(app)

    def run(*args: str | Path) -> Any:
        return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)

    result = run("sample", tmp_path / "a")
    assert result.exit_code == 0, result.output
    assert tree_bytes(tmp_path / "a") == tree_bytes(BUNDLED_SAMPLE)
    small = run("sample", tmp_path / "b", "--seed", "3", "--size", "40", "--json")
    assert small.exit_code == 0, small.output
    stats = json.loads(small.stdout)
    assert stats["entries"] == 40 and len(stats["malformed"]) == 1
    again = run("sample", tmp_path / "a")
    assert again.exit_code == 1 and "not empty" in again.stderr
    assert tree_bytes(tmp_path / "a") == tree_bytes(BUNDLED_SAMPLE)
