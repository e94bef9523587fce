"""Optimistic concurrency: the agent writes while a cycle runs; nothing it wrote is overwritten blindly."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import pytest

from dreamkeeper.memory import ConflictError, Entry, HighValueFloor, MemoryStore
from tests.memory.conftest import rockbot_entry, tree_bytes, write_raw


def _agent_rewrites(path: Path, **changes: object) -> bytes:
    """What RockBot does: rewrite the whole file (here in place, as its archive/restore did)."""
    obj = json.loads(path.read_text(encoding="utf-8"))
    obj.update(changes)
    path.write_text(json.dumps(obj, indent=2), encoding="utf-8")
    return path.read_bytes()


def test_archive_after_agent_rewrite_conflicts_and_leaves_file(store: MemoryStore, memory_root: Path) -> None:
    path = write_raw(memory_root, rockbot_entry())
    stored = store.require("a1b2c3d4e5f6")
    agent_bytes = _agent_rewrites(path, content="Rose moved to Seattle in 2026.", reinforcementCount=4)
    with pytest.raises(ConflictError, match="left untouched"):
        store.archive(stored, "flagged ephemeral by consolidation")
    assert path.read_bytes() == agent_bytes
    assert not [p for p in path.parent.iterdir() if p != path]  # no temp left behind


def test_same_bytes_rewritten_still_conflicts(store: MemoryStore, memory_root: Path) -> None:
    """Content equal but mtime moved: someone wrote; refuse rather than guess."""
    path = write_raw(memory_root, rockbot_entry())
    stored = store.require("a1b2c3d4e5f6")
    original = path.read_bytes()
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    with pytest.raises(ConflictError, match="rewritten"):
        store.update(stored, stored.entry.with_meta(consolidationReviewedAt="now"))
    assert path.read_bytes() == original


def test_removed_file_conflicts_and_is_not_recreated(store: MemoryStore, memory_root: Path) -> None:
    path = write_raw(memory_root, rockbot_entry())
    stored = store.require("a1b2c3d4e5f6")
    os.remove(path)  # the agent re-categorised or deleted it
    with pytest.raises(ConflictError, match="removed"):
        store.archive(stored, "merged into 0123456789ab")
    assert not path.exists()


def test_restore_after_agent_rewrite_conflicts(store: MemoryStore, memory_root: Path) -> None:
    path = write_raw(memory_root, rockbot_entry(archivedAt="2026-01-01T00:00:00.0000000+00:00", archiveReason="x"))
    stored = store.require("a1b2c3d4e5f6")
    agent_bytes = _agent_rewrites(path, archivedAt=None, archiveReason=None, content="restored by the agent")
    with pytest.raises(ConflictError):
        store.restore(stored)
    assert path.read_bytes() == agent_bytes


def test_create_refuses_a_file_that_appeared(store: MemoryStore, memory_root: Path) -> None:
    store.scan()
    path = write_raw(memory_root, rockbot_entry("0123456789ab", content="the agent's own entry"))
    agent_bytes = path.read_bytes()
    with pytest.raises(ConflictError, match="appeared"):
        store.create(Entry(id="0123456789ab", content="a merge", category="people/family"))
    assert path.read_bytes() == agent_bytes
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_purge_skips_an_entry_the_agent_restored_after_the_scan(store: MemoryStore, memory_root: Path) -> None:
    path = write_raw(
        memory_root,
        rockbot_entry(
            importanceScore=0.2,
            reinforcementCount=1,
            archivedAt="2025-01-01T00:00:00.0000000+00:00",
            archiveReason="flagged ephemeral by consolidation",
        ),
    )
    scanned = store.scan().entries
    agent_bytes = _agent_rewrites(path, archivedAt=None, archiveReason=None)
    report = store.purge(timedelta(days=90), HighValueFloor(), entries=scanned)
    assert report.conflicts == 1 and report.purged == []
    assert tree_bytes(memory_root) == {"people/family/a1b2c3d4e5f6.json": agent_bytes}


def test_a_stale_stored_entry_cannot_be_used_twice(store: MemoryStore, memory_root: Path) -> None:
    """Our own earlier write also counts: the fingerprint is of what the caller read, not of 'the file'."""
    write_raw(memory_root, rockbot_entry())
    stored = store.require("a1b2c3d4e5f6")
    store.update(stored, stored.entry.evolve(importance_score=0.5))
    with pytest.raises(ConflictError):
        store.update(stored, stored.entry.evolve(importance_score=0.6))
    assert store.require("a1b2c3d4e5f6").entry.importance_score == 0.5
