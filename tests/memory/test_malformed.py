"""Malformed files are skipped with a warning naming them, counted, and never modified or deleted."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dreamkeeper.memory import HighValueFloor, MemoryStore
from tests.memory.conftest import rockbot_entry, tree_bytes, write_raw

MALFORMED: dict[str, bytes] = {
    "bad-json": b'{"id": "bad-json", "content": "torn',
    "empty": b"",
    "array": b"[1, 2, 3]",
    "string": b'"just a string"',
    "null": b"null",
    "number": b"42",
    "wrong-importance": json.dumps(rockbot_entry("wrong-importance", importanceScore="high")).encode(),
    "wrong-tags": json.dumps(rockbot_entry("wrong-tags", tags="family")).encode(),
    "wrong-metadata": json.dumps(rockbot_entry("wrong-metadata", metadata={"version": 3})).encode(),
    "wrong-date": json.dumps(rockbot_entry("wrong-date", createdAt="last tuesday")).encode(),
    "nan-importance": b'{"id": "nan-importance", "content": "x", "importanceScore": NaN}',
    "no-id": json.dumps({"content": "an entry without an id"}).encode(),
    "name-mismatch": json.dumps(rockbot_entry("0123456789ab")).encode(),
    "not-utf8": b'{"id": "not-utf8", "content": "\xff\xfe caf\xe9"}',
    "twice": b'{"id": "twice", "content": "x", "Content": "y"}',
}


@pytest.fixture
def messy_root(memory_root: Path) -> Path:
    folder = memory_root / "people" / "colleagues"
    folder.mkdir(parents=True)
    for name, data in MALFORMED.items():
        (folder / f"{name}.json").write_bytes(data)
    write_raw(memory_root, rockbot_entry("a1b2c3d4e5f6"))
    write_raw(
        memory_root,
        rockbot_entry(
            "0000000000aa",
            importanceScore=0.1,
            reinforcementCount=1,
            archivedAt="2025-01-01T00:00:00.0000000+00:00",
            archiveReason="flagged ephemeral by consolidation",
        ),
    )
    return memory_root


def test_scan_skips_counts_and_names_every_malformed_file(messy_root: Path, caplog: pytest.LogCaptureFixture) -> None:
    before = tree_bytes(messy_root)
    caplog.set_level(logging.WARNING, logger="dreamkeeper.memory.store")
    scan = MemoryStore(messy_root).scan()
    assert sorted(s.id for s in scan.entries) == ["0000000000aa", "a1b2c3d4e5f6"]
    assert sorted(m.path.stem for m in scan.malformed) == sorted(MALFORMED)
    for name in MALFORMED:
        assert any(f"{name}.json" in r.getMessage() and "left untouched" in r.getMessage() for r in caplog.records), (
            name
        )
    assert all(m.error for m in scan.malformed)
    assert tree_bytes(messy_root) == before


def test_mutations_and_purge_leave_malformed_files_byte_identical(messy_root: Path) -> None:
    before = {k: v for k, v in tree_bytes(messy_root).items() if k.startswith("people/colleagues/")}
    store = MemoryStore(messy_root)
    store.restore(store.archive(store.require("a1b2c3d4e5f6"), "test"))
    report = store.purge(timedelta(days=1), HighValueFloor(), now=datetime(2030, 1, 1, tzinfo=UTC))
    assert [e.id for e in report.purged] == ["0000000000aa"]
    after = {k: v for k, v in tree_bytes(messy_root).items() if k.startswith("people/colleagues/")}
    assert after == before


def test_get_of_a_malformed_entry_returns_none(messy_root: Path) -> None:
    assert MemoryStore(messy_root).get("bad-json") is None


@contextlib.contextmanager
def _as_nobody() -> Iterator[None]:
    """Drop the effective uid (we run as root, which reads anything), and get it back afterwards."""
    os.setegid(65534)
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


def test_unreadable_file_is_reported_not_touched(caplog: pytest.LogCaptureFixture) -> None:
    # tmp_path sits under a 0700 directory that an unprivileged uid cannot traverse: use a world-traversable one.
    base = Path(tempfile.mkdtemp(prefix="dreamkeeper-unreadable-"))
    try:
        os.chmod(base, 0o755)
        root = base / "memory"
        good = write_raw(root, rockbot_entry("a1b2c3d4e5f6"))
        locked = write_raw(root, rockbot_entry("0000000000aa"))
        for directory in (root, good.parent.parent, good.parent):
            os.chmod(directory, 0o755)
        os.chmod(good, 0o644)
        os.chmod(locked, 0o000)
        before = locked.read_bytes()
        caplog.set_level(logging.WARNING, logger="dreamkeeper.memory.store")
        with _as_nobody() if os.geteuid() == 0 else contextlib.nullcontext():
            scan = MemoryStore(root).scan()
        assert [s.id for s in scan.entries] == ["a1b2c3d4e5f6"]
        assert [m.path for m in scan.malformed] == [locked]
        assert "unreadable" in scan.malformed[0].error and "ermission denied" in scan.malformed[0].error
        assert any(str(locked) in r.getMessage() for r in caplog.records)
        assert locked.read_bytes() == before and (locked.stat().st_mode & 0o777) == 0
    finally:
        shutil.rmtree(base)
