"""Load → save and archive → restore keep RockBot's files unchanged in meaning (and value-for-value)."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dreamkeeper.demo.sample import BUNDLED_SAMPLE
from dreamkeeper.memory import Entry, MemoryStore
from tests.memory.conftest import rockbot_entry, write_raw

UNKNOWN_FIELDS: dict[str, Any] = {
    "verify": {"command": "kubectl get pods -n agents", "expect": "Running", "checkedAt": None},
    "sourceSessionId": "7ace7351-6aea-4b9e-af00-56a44bcf6cfa",
    "embeddingVersion": 3,
    "score": 0.12345678901234568,
    "nested": [1, "two", {"three": [None, True, False]}],
    "archived_at": "2020-01-01T00:00:00+00:00",  # a snake_case key is an unknown field to RockBot, not archivedAt
    "importance_score": 0.01,
}


def _shapes() -> list[dict[str, Any]]:
    pascal = {k[0].upper() + k[1:]: v for k, v in rockbot_entry("b1b2c3d4e5f6").items()}
    older = rockbot_entry("c1b2c3d4e5f6")
    for key in ("supersededBy", "archivedAt", "archiveReason"):
        del older[key]  # written before the archive tier existed
    return [
        rockbot_entry("a1b2c3d4e5f6", **UNKNOWN_FIELDS),
        pascal,
        older,
        rockbot_entry(
            "d1b2c3d4e5f6",
            content=None,
            tags=None,
            metadata=None,
            category=None,
            createdAt="2026-03-01T08:15:02.1234567-05:00",
            importanceScore=1,
            reinforcementCount=214,
        ),
        rockbot_entry(
            "e1b2c3d4e5f6",
            metadata={
                "mergedFrom": "aaaaaaaaaaaa,bbbbbbbbbbbb",
                "mergedAt": "2026-08-03T10:00:00.5000000+00:00",
                "x-importedBy": "memory-mining/v2",
                "empty": "",
            },
            content="Straße, café — 東京 and emoji 🐕",
        ),
        {"id": "f1b2c3d4e5f6", "content": "minimal file: only id and content"},
    ]


@pytest.mark.parametrize("obj", _shapes(), ids=lambda o: str(o.get("id") or o.get("Id")))
def test_load_save_is_json_equal(store: MemoryStore, memory_root: Path, obj: dict[str, Any]) -> None:
    path = write_raw(memory_root, obj)
    stored = store.require(obj.get("id") or obj["Id"])
    store.update(stored, stored.entry)  # a rewrite with nothing changed
    assert json.loads(path.read_text(encoding="utf-8")) == obj
    assert list(json.loads(path.read_text(encoding="utf-8"))) == list(obj)  # key order kept too


@pytest.mark.parametrize("obj", _shapes(), ids=lambda o: str(o.get("id") or o.get("Id")))
def test_archive_then_restore_is_json_equal(store: MemoryStore, memory_root: Path, obj: dict[str, Any]) -> None:
    path = write_raw(memory_root, obj)
    entry_id = obj.get("id") or obj["Id"]
    archived = store.archive(store.require(entry_id), "merged into 0123456789ab")
    on_disk = json.loads(path.read_text(encoding="utf-8"))
    archived_key = "ArchivedAt" if "Id" in obj else "archivedAt"
    assert on_disk[archived_key] is not None
    # Everything but the archive fields is value-for-value what the agent wrote.
    assert {k: v for k, v in on_disk.items() if k.lower() not in ("archivedat", "archivereason")} == {
        k: v for k, v in obj.items() if k.lower() not in ("archivedat", "archivereason")
    }
    assert store.get(entry_id) is not None and archived.entry.is_archived
    store.restore(archived)
    restored = json.loads(path.read_text(encoding="utf-8"))
    if "archivedAt" in obj or "ArchivedAt" in obj:
        assert restored == obj
    else:
        # The file had no archive fields; after a round trip they are null, which RockBot reads identically.
        assert {k: v for k, v in restored.items() if k not in ("archivedAt", "archiveReason")} == obj
        assert restored["archivedAt"] is None and restored["archiveReason"] is None


def test_changing_one_field_rewrites_only_that_field(store: MemoryStore, memory_root: Path) -> None:
    obj = rockbot_entry(**UNKNOWN_FIELDS)
    path = write_raw(memory_root, obj)
    stored = store.require(obj["id"])
    store.update(stored, stored.entry.with_meta(consolidationReviewedAt="2026-09-14T06:00:00.0000000+00:00"))
    after = json.loads(path.read_text(encoding="utf-8"))
    assert after["metadata"] == {**obj["metadata"], "consolidationReviewedAt": "2026-09-14T06:00:00.0000000+00:00"}
    assert {k: v for k, v in after.items() if k != "metadata"} == {k: v for k, v in obj.items() if k != "metadata"}


def test_seven_digit_fractions_and_offsets_parse(store: MemoryStore, memory_root: Path) -> None:
    write_raw(memory_root, rockbot_entry(createdAt="2026-03-01T08:15:02.1234567-05:00"))
    entry = store.require("a1b2c3d4e5f6").entry
    assert entry.created_at == datetime(2026, 3, 1, 13, 15, 2, 123456, tzinfo=UTC)
    assert entry.last_seen_at == datetime(2026, 4, 11, 17, 45, 10, 999999, tzinfo=UTC)


def test_snake_case_unknown_keys_do_not_hijack_fields(store: MemoryStore, memory_root: Path) -> None:
    write_raw(memory_root, rockbot_entry(**UNKNOWN_FIELDS))
    entry = store.require("a1b2c3d4e5f6").entry
    assert entry.is_live  # "archived_at" is not "archivedAt"
    assert entry.importance_score == 0.9
    assert entry.model_extra is not None and entry.model_extra["archived_at"] == "2020-01-01T00:00:00+00:00"


def test_absent_fields_are_not_invented(store: MemoryStore, memory_root: Path) -> None:
    path = write_raw(memory_root, {"id": "f1b2c3d4e5f6", "content": "x"})
    stored = store.require("f1b2c3d4e5f6")
    store.update(stored, stored.entry.evolve(importance_score=0.3))
    assert json.loads(path.read_text(encoding="utf-8")) == {
        "id": "f1b2c3d4e5f6",
        "content": "x",
        "importanceScore": 0.3,
    }


def test_every_bundled_sample_entry_round_trips(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    shutil.copytree(BUNDLED_SAMPLE, agent)
    store = MemoryStore(agent / "memory")
    scan = store.scan()
    assert len(scan.entries) >= 300
    for stored in scan.entries:
        before = json.loads(stored.path.read_text(encoding="utf-8"))
        saved = store.update(stored, stored.entry)
        assert json.loads(stored.path.read_text(encoding="utf-8")) == before, stored.path
        if not saved.entry.is_archived:
            store.restore(store.archive(saved, "flagged ephemeral by consolidation"))
            after = json.loads(stored.path.read_text(encoding="utf-8"))
            if "archivedAt" not in before and "ArchivedAt" not in before:
                # Pre-archive-tier file: the fields come back as nulls, which RockBot reads as absent.
                assert after.pop("archivedAt") is None and after.pop("archiveReason") is None
            assert after == before, stored.path


json_scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
unknown_keys = st.text("abcdefghijklmnopqrstuvwxyzXYZ_-", min_size=1, max_size=12).filter(
    lambda k: (
        k.lower()
        not in {alias.lower() for alias in Entry.model_fields}
        | {
            "id",
            "content",
            "category",
            "tags",
            "createdat",
            "updatedat",
            "lastseenat",
            "reinforcementcount",
            "importancescore",
            "metadata",
            "supersededby",
            "archivedat",
            "archivereason",
        }
    )
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    extra=st.dictionaries(unknown_keys, json_values, max_size=4),
    metadata=st.dictionaries(st.text(min_size=1, max_size=10), st.text(max_size=20), max_size=4),
    content=st.text(max_size=200),
)
def test_arbitrary_unknown_fields_survive_archive_restore(
    tmp_path: Path, extra: dict[str, Any], metadata: dict[str, str], content: str
) -> None:
    root = tmp_path / "prop"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    obj = rockbot_entry(content=content, metadata=metadata, **extra)
    path = write_raw(root, obj)
    store = MemoryStore(root)
    store.restore(store.archive(store.require(obj["id"]), "test"))
    assert json.loads(path.read_text(encoding="utf-8")) == obj
