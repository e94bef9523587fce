"""Purge, the only deleting path: past retention only, never above the floor, 0 keeps forever, dry run deletes none."""

from __future__ import annotations

import ast
import logging
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import dreamkeeper
from dreamkeeper.memory import HighValueFloor, MemoryStore
from tests.memory.conftest import rockbot_entry, tree_bytes, write_raw

NOW = datetime(2026, 9, 14, 6, 0, tzinfo=UTC)


def _archived(entry_id: str, days_ago: float, importance: float = 0.3, reinforcement: int = 1) -> dict[str, Any]:
    archived_at = (NOW - timedelta(days=days_ago)).isoformat()
    return rockbot_entry(
        entry_id,
        content=f"content of {entry_id}: Trish Roberts, PWOP Productions, 2026-08-02",
        importanceScore=importance,
        reinforcementCount=reinforcement,
        archivedAt=archived_at,
        archiveReason="flagged ephemeral by consolidation",
    )


@pytest.fixture
def corpus(memory_root: Path) -> Path:
    write_raw(memory_root, _archived("due000000001", 100))
    write_raw(memory_root, _archived("due000000002", 90.01, importance=0.79, reinforcement=4))  # just under floor
    write_raw(memory_root, _archived("young0000001", 89.9))
    write_raw(memory_root, _archived("highimp00001", 400, importance=0.8))
    write_raw(memory_root, _archived("reinforced01", 400, reinforcement=5))
    write_raw(memory_root, rockbot_entry("live00000001", importanceScore=0.05, reinforcementCount=1))
    embeddings = memory_root / ".embeddings"
    embeddings.mkdir()
    for entry_id in ("due000000001", "highimp00001", "live00000001"):
        (embeddings / f"{entry_id}.bin").write_bytes(b"\x00\x00\x80\x3f" * 4)
    (memory_root / "people" / "family" / "broken.json").write_bytes(b"{not json")
    return memory_root


def test_purges_only_due_entries_below_the_floor(corpus: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="dreamkeeper.memory.store")
    before = tree_bytes(corpus)
    report = MemoryStore(corpus).purge(timedelta(days=90), HighValueFloor(), now=NOW)
    assert sorted(e.id for e in report.purged) == ["due000000001", "due000000002"]
    assert sorted(e.id for e in report.kept_above_floor) == ["highimp00001", "reinforced01"]
    assert report.not_due == 1 and report.conflicts == 0
    gone = {"people/family/due000000001.json", "people/family/due000000002.json", ".embeddings/due000000001.bin"}
    assert tree_bytes(corpus) == {k: v for k, v in before.items() if k not in gone}
    for entry_id in ("due000000001", "due000000002"):
        line = next(
            r.getMessage()
            for r in caplog.records
            if r.getMessage().startswith(f"Purged archived memory entry {entry_id}")
        )
        assert f"content of {entry_id}: Trish Roberts, PWOP Productions, 2026-08-02" in line
    assert any("archive purge — 2 purged, 2 kept above the high-value floor" in r.getMessage() for r in caplog.records)


def test_dry_run_deletes_nothing_and_logs_what_would_go(corpus: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="dreamkeeper.memory.store")
    before = tree_bytes(corpus)
    report = MemoryStore(corpus).purge(timedelta(days=90), HighValueFloor(), now=NOW, dry_run=True)
    assert report.dry_run and sorted(e.id for e in report.purged) == ["due000000001", "due000000002"]
    assert tree_bytes(corpus) == before
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert any("would purge" in m and "content of due000000001: Trish Roberts" in m for m in messages)


@pytest.mark.parametrize("retention", [timedelta(0), None, timedelta(days=-5)])
def test_zero_retention_keeps_forever(corpus: Path, retention: timedelta | None) -> None:
    before = tree_bytes(corpus)
    report = MemoryStore(corpus).purge(retention, HighValueFloor(), now=NOW + timedelta(days=10_000))
    assert report.purged == [] and tree_bytes(corpus) == before


def test_floor_is_configurable(corpus: Path) -> None:
    report = MemoryStore(corpus).purge(
        timedelta(days=90), HighValueFloor(importance=0.95, reinforcement=100), now=NOW, dry_run=True
    )
    assert sorted(e.id for e in report.purged) == ["due000000001", "due000000002", "highimp00001", "reinforced01"]


# ---- purge is the only deleting path ----------------------------------------------------------------------------

# Every call in operator/dreamkeeper that can make a file disappear, by (module, function, call). Extending this
# list needs a reason that holds up: entry files may only ever be deleted by memory/purging.py:purge_file.
ALLOWED_DELETIONS = Counter(
    {
        ("memory/atomic.py", "_write_temp", "os.unlink"): 1,  # our own temp file (O_EXCL) after a failed write
        (
            "memory/corpus_index_files.py",
            "write_streamed",
            "temp.unlink",
        ): 1,  # the index's own temp after a failed write
        ("memory/atomic.py", "discard_own", "os.unlink"): 1,  # a temp of ours, only while its inode is still ours
        # The write-back index's own temp (O_EXCL, in the state directory) after a failed write, never once renamed.
        ("memory/statefiles.py", "replace_state_streamed", "os.unlink"): 1,
        ("memory/atomic.py", "_arm", "os.rename"): 1,  # our temp renamed to the name recording its inode
        ("memory/atomic.py", "replaced", "os.unlink"): 1,  # the version a swap displaced, verified to be the one read
        ("memory/atomic.py", "keep_conflict_copy", "os.rename"): 1,  # a displaced agent version, kept under a name
        ("memory/atomic.py", "_late_write", "os.rename"): 1,  # a file we just wrote, named as a conflict copy
        ("memory/atomic.py", "_park_then_link", "os.rename"): 1,  # no exchange: the entry moved aside, then verified
        ("memory/atomic.py", "_unpark", "os.unlink"): 1,  # the aside's extra name, once linked back under its own
        ("memory/atomic.py", "_late_without_exchange", "os.rename"): 1,  # our own file moved aside (checked by inode)
        ("memory/leftovers.py", "sweep", "os.unlink"): 1,  # a killed write's .dk-new temp: never swapped, only our data
        ("memory/leftovers.py", "_sweep_aside", "os.unlink"): 1,  # the extra name, once linked back under its own
        ("memory/atomic.py", "unlink_durably", "os.unlink"): 1,  # the primitive purge uses
        ("memory/store.py", "MemoryStore.sweep", "os.rename"): 1,  # a purge-parked entry kept as a conflict copy
        ("consolidation/journal.py", "set_aside", "os.rename"): 1,  # an unreadable journal of ours, moved aside
        # A streamed journal's own .partial file (the decay journal's, a large plan's: in the state directory, never a
        # *.jsonl), after it is linked into place or a write failed, and one a killed cycle left (under the cycle lock).
        ("consolidation/decay_journal.py", "write_streamed_journal", "temp.unlink"): 2,
        ("consolidation/decay_journal.py", "write_streamed_journal", "leftover.unlink"): 1,
        ("memory/lock.py", "CycleLock.release", "self.info_path.unlink"): 1,  # the lock holder file
        ("memory/purging.py", "purge_file", "os.rename"): 1,  # park the entry before verifying it
        ("memory/purging.py", "purge_file", "unlink_durably"): 1,  # THE purge: the entry file
        ("memory/store.py", "MemoryStore._purge_one", "unlink_durably"): 1,  # the purged entry's embedding
        ("memory/purging.py", "unpark", "unlink_durably"): 1,  # parked name, after linking it back
        ("demo/sample.py", "write_bundled", "shutil.rmtree"): 2,  # package data regeneration, not an agent
        ("demo/sample.py", "write_bundled", "os.rename"): 1,
        ("kube/seed.py", "create_no_clobber", "os.unlink"): 1,  # its own temp file's second name after link()
        ("formats/agentlock.py", "_exclusive", "os.unlink"): 1,  # our own lock file (its inode checked first)
        # A Claude-style topic file moved into the archive (never deleted; verified after the move), and the archive's
        # extra name after an agent's version written meanwhile was linked back under its own name.
        ("formats/topics.py", "TopicRender._move_out", "os.rename"): 1,
        ("formats/topics.py", "TopicRender._move_out", "os.unlink"): 1,
    }
)
_DELETING_ATTRS = {"unlink", "rmdir", "rmtree", "removedirs", "rename", "unlink_durably"}
_DELETING_MODULE_FUNCS = {
    ("os", "remove"),
    ("os", "unlink"),
    ("os", "rmdir"),
    ("os", "removedirs"),
    ("os", "rename"),
    ("shutil", "rmtree"),
    ("shutil", "move"),
}


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return "<expr>"


class _Finder(ast.NodeVisitor):
    def __init__(self, module: str) -> None:
        self.module = module
        self.scope: list[str] = []
        self.found: Counter[tuple[str, str, str]] = Counter()

    def _visit_scope(self, node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_ClassDef = visit_FunctionDef = visit_AsyncFunctionDef = _visit_scope

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in node.names:
            if (node.module, alias.name) in _DELETING_MODULE_FUNCS:
                self.found[(self.module, "<import>", f"from {node.module} import {alias.name}")] += 1

    def visit_Call(self, node: ast.Call) -> None:
        name = _dotted(node.func)
        leaf = name.rsplit(".", 1)[-1]
        module_call = tuple(name.split(".", 1)) if name.count(".") == 1 else None
        if leaf in _DELETING_ATTRS or module_call in _DELETING_MODULE_FUNCS:
            self.found[(self.module, ".".join(self.scope), name)] += 1
        self.generic_visit(node)


def _deleting_calls() -> Counter[tuple[str, str, str]]:
    package = Path(dreamkeeper.__file__).parent
    found: Counter[tuple[str, str, str]] = Counter()
    for path in sorted(package.rglob("*.py")):
        finder = _Finder(path.relative_to(package).as_posix())
        finder.visit(ast.parse(path.read_text(encoding="utf-8")))
        found += finder.found
    return found


def test_purge_is_the_only_path_that_deletes_files() -> None:
    found = _deleting_calls()
    unexpected = found - ALLOWED_DELETIONS
    assert not unexpected, (
        "new file-deleting calls; entry files may only be deleted by purging.purge_file: "
        + ", ".join(f"{m}:{f}: {c} x{n}" for (m, f, c), n in unexpected.items())
    )
    # The memory package's own list must be exact, so a removed safeguard (say, the park step) is noticed too.
    mine = Counter({key: n for key, n in ALLOWED_DELETIONS.items() if key[0].startswith("memory/")})
    assert Counter({key: n for key, n in found.items() if key[0].startswith("memory/")}) == mine


def test_the_scanner_sees_every_kind_of_delete() -> None:
    """Guard against a blind scanner: each spelling of a deletion is caught."""
    source = (
        "import os, shutil\nfrom os import remove\n"
        "def f(p):\n    os.remove(p)\n    os.unlink(p)\n    p.unlink()\n    shutil.rmtree(p)\n    p.rename(q)\n"
    )
    finder = _Finder("x.py")
    finder.visit(ast.parse(source))
    assert set(finder.found) == {
        ("x.py", "<import>", "from os import remove"),
        ("x.py", "f", "os.remove"),
        ("x.py", "f", "os.unlink"),
        ("x.py", "f", "p.unlink"),
        ("x.py", "f", "shutil.rmtree"),
        ("x.py", "f", "p.rename"),
    }
