"""Fixtures for the memory store tests: RockBot-shaped files written the way the agent writes them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dreamkeeper.memory import MemoryStore


def write_raw(root: Path, obj: dict[str, Any], category: str | None = None, name: str | None = None) -> Path:
    """Write an entry file as RockBot does (indented, no trailing newline), bypassing the store."""
    lowered = {key.lower(): value for key, value in obj.items()}
    category = category if category is not None else lowered.get("category")
    directory = root.joinpath(*category.split("/")) if category else root
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / (name or f"{lowered['id']}.json")
    path.write_text(json.dumps(obj, indent=2), encoding="utf-8")
    return path


def rockbot_entry(entry_id: str = "a1b2c3d4e5f6", **overrides: Any) -> dict[str, Any]:
    """A file as RockBot 0.14 writes it: camelCase, nulls written, .NET 7-digit round-trip timestamps."""
    obj: dict[str, Any] = {
        "id": entry_id,
        "content": "Rose is Jordan's sister; she lives in Portland and her birthday is May 14.",
        "category": "people/family",
        "tags": ["family"],
        "createdAt": "2026-03-01T08:15:02.1234567+00:00",
        "updatedAt": "2026-03-02T09:00:00.0000001+00:00",
        "lastSeenAt": "2026-04-11T17:45:10.9999999+00:00",
        "reinforcementCount": 3,
        "importanceScore": 0.9,
        "metadata": {"source": "conversation", "consolidationReviewedHash": "0123456789ABCDEF"},
        "supersededBy": None,
        "archivedAt": None,
        "archiveReason": None,
    }
    obj.update(overrides)
    return obj


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    """An agent directory holding three entries (the corpus index tests'; a module may define its own ``agent``)."""
    root = tmp_path / "agent" / "memory"
    root.mkdir(parents=True)
    for i in range(3):
        write_raw(root, rockbot_entry(f"entry{i}", content=f"Fact number {i} about Portland."))
    return tmp_path / "agent"


@pytest.fixture
def memory_root(tmp_path: Path) -> Path:
    root = tmp_path / "agent" / "memory"
    root.mkdir(parents=True)
    return root


@pytest.fixture
def store(memory_root: Path) -> MemoryStore:
    return MemoryStore(memory_root)


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every regular file under root (hidden ones included) and its bytes."""
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }
