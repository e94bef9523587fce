"""The write path against the agent's real write patterns (issue 22, finding 4), each race injected at its exact
instant, deterministically (no sleeps).

RockBot writes both ways, depending on the commit (MarimerLLC/rockbot, ``src/RockBot.Host``):

* in place: .NET's ``File.WriteAllText(Async)`` opens the file, takes its lock, *then* truncates and writes
  (``Opened.write``). ``FileMemoryStore.SaveAsync`` saves this way at 029f5eea and f55714c4 (read in sessions 30
  and 31); ``ArchiveAsync`` archives and restores this way in later commits too (tests/agents/caching_agent.py);
* through a sibling temp renamed over the file (``agent_save``): ``AtomicFile.WriteAllTextAsync`` at 787d206c
  (read in session 31: ``.{name}.{guid:N}.tmp``, the target's mode copied, ``File.Move`` with overwrite, no fsync),
  written for the store's own files, which the caching agent's ``atomic`` mode takes as current RockBot's
  ``SaveAsync``.

Both stay tested: a deployment may run either. A descriptor opened before one of our renames still reaches the file
we moved or unlinked.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dreamkeeper.memory import ConflictError, HighValueFloor, MemoryStore, StoredEntry
from dreamkeeper.memory import atomic as atomic_module
from dreamkeeper.memory import exchange as exchange_module
from tests.memory.conftest import rockbot_entry, tree_bytes, write_raw
from tests.robustness.conftest import Killed

ARCHIVED = {"archivedAt": "2025-01-01T00:00:00.0000000+00:00", "archiveReason": "flagged ephemeral by consolidation"}
RESTORED = {"archivedAt": None, "archiveReason": None, "content": "Rose lives in Portland; restored by the agent."}


class Opened:
    """The agent's ``File.WriteAllText`` between its open and its truncate: a descriptor on whatever file the name
    held at the open."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)  # no O_TRUNC: .NET truncates after locking

    def write(self, obj: dict[str, Any]) -> bytes:
        data = json.dumps(obj, indent=2).encode("utf-8")
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data, 0)
        os.close(self.fd)
        return data


def agent_save(path: Path, **changes: Any) -> bytes:
    """RockBot's save through ``AtomicFile.WriteAllTextAsync`` (787d206c): a sibling temp renamed over the file."""
    obj = json.loads(path.read_text(encoding="utf-8"))
    obj.update(changes)
    temp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    temp.write_text(json.dumps(obj, indent=2), encoding="utf-8")
    os.replace(temp, path)
    return path.read_bytes()


@contextmanager
def before_unlinking(suffix: str, action: Any) -> Iterator[list[str]]:
    """Run ``action`` (once) in the instant before a file whose name ends with ``suffix`` is unlinked: after every
    check the code makes before deleting, whatever that code is (it fires on today's main as on this branch)."""
    real = os.unlink
    fired: list[str] = []

    def unlink(path: Any, *args: Any, **kwargs: Any) -> None:
        if str(path).endswith(suffix) and not fired:
            fired.append(str(path))
            action()
        real(path, *args, **kwargs)

    os.unlink = unlink  # type: ignore[assignment]
    try:
        yield fired
    finally:
        os.unlink = real


@pytest.fixture
def memory_root(tmp_path: Path) -> Path:
    root = tmp_path / "agent" / "memory"
    root.mkdir(parents=True)
    return root


@pytest.fixture
def store(memory_root: Path) -> MemoryStore:
    return MemoryStore(memory_root)


def _entry(store: MemoryStore, root: Path, **overrides: Any) -> tuple[StoredEntry, Path]:
    path = write_raw(root, rockbot_entry(importanceScore=0.2, reinforcementCount=1, **overrides))
    return store.require("a1b2c3d4e5f6"), path


# ---- purge -------------------------------------------------------------------------------------------------------


def test_purge_keeps_a_restore_the_agent_writes_in_place_as_the_parked_file_is_deleted(
    store: MemoryStore, memory_root: Path
) -> None:
    """Finding 4: purge parked and checked the file, the agent's in-place restore (opened before the park) landed,
    and purge deleted it: a true deletion of a live entry."""
    _, path = _entry(store, memory_root, **ARCHIVED)
    scanned = store.scan().entries
    agent = Opened(path)
    written: list[bytes] = []
    with before_unlinking(".purging", lambda: written.append(agent.write(rockbot_entry(**RESTORED)))) as fired:
        report = store.purge(timedelta(days=90), HighValueFloor(), entries=scanned)
    assert fired, "the purge never deleted a parked file: the race was not exercised"
    assert report.purged == [] and report.conflicts == 1
    assert path.read_bytes() == written[0]  # the agent's restore is the entry, live


def test_purge_keeps_a_restore_landing_after_the_name_is_gone(store: MemoryStore, memory_root: Path) -> None:
    """The same write one instant later, after the unlink: seen through the descriptor purge kept, put back."""
    from dreamkeeper.memory.purging import purge_seam

    _, path = _entry(store, memory_root, **ARCHIVED)
    scanned = store.scan().entries
    agent = Opened(path)
    written: list[bytes] = []

    def hook(stage: str, target: Path) -> None:
        if stage == "unlinked":
            written.append(agent.write(rockbot_entry(**RESTORED)))

    with purge_seam(hook):
        report = store.purge(timedelta(days=90), HighValueFloor(), entries=scanned)
    assert report.purged == [] and report.conflicts == 1
    assert tree_bytes(memory_root) == {"people/family/a1b2c3d4e5f6.json": written[0]}


def test_purge_keeps_a_late_write_beside_a_newer_save_as_a_conflict_copy(store: MemoryStore, memory_root: Path) -> None:
    """After the name is gone, the agent writes through the descriptor it held *and* saves the entry again by name
    (RockBot's ``FileMemoryStore.SaveAsync`` is ``File.WriteAllTextAsync(filePath, ...)``, MarimerLLC/rockbot
    @029f5eea: on a free name it creates a new file): the save is the newest version and keeps the name; the late
    write is kept beside it (``.dk-conflict``), never dropped."""
    from dreamkeeper.memory.purging import purge_seam

    _, path = _entry(store, memory_root, **ARCHIVED)
    scanned = store.scan().entries
    agent = Opened(path)
    late: list[bytes] = []
    saved: list[bytes] = []

    def hook(stage: str, target: Path) -> None:
        if stage == "unlinked":
            late.append(agent.write(rockbot_entry(**RESTORED)))
            saved.append(Opened(path).write(rockbot_entry(**{**RESTORED, "content": "saved again"})))

    with purge_seam(hook):
        report = store.purge(timedelta(days=90), HighValueFloor(), entries=scanned)
    assert report.purged == [] and report.conflicts == 1
    files = tree_bytes(memory_root)
    assert files.pop("people/family/a1b2c3d4e5f6.json") == saved[0]
    (copy, data), *others = files.items()
    assert others == [] and data == late[0]
    assert copy.startswith("people/family/.a1b2c3d4e5f6.json.") and copy.endswith(".dk-conflict")


def test_purge_puts_back_a_save_renamed_over_the_file_before_the_park(store: MemoryStore, memory_root: Path) -> None:
    from dreamkeeper.memory.purging import purge_seam

    _, path = _entry(store, memory_root, **ARCHIVED)
    scanned = store.scan().entries
    saved: list[bytes] = []
    with purge_seam(lambda stage, _: saved.append(agent_save(path, **RESTORED)) if stage == "opened" else None):
        report = store.purge(timedelta(days=90), HighValueFloor(), entries=scanned)
    assert report.purged == [] and report.conflicts == 1
    assert tree_bytes(memory_root) == {"people/family/a1b2c3d4e5f6.json": saved[0]}


# ---- the exchange: a write landing in the version we displaced ----------------------------------------------------


def test_an_in_place_archive_landing_in_the_displaced_version_is_a_conflict(
    store: MemoryStore, memory_root: Path
) -> None:
    """Finding 4: the agent opened the entry before our swap and archived it in place after we verified what the
    swap displaced: its write landed in a file replace_file had already unlinked, with no conflict reported."""
    stored, path = _entry(store, memory_root)
    agent = Opened(path)
    written: list[bytes] = []
    archived = rockbot_entry(importanceScore=0.2, reinforcementCount=1, **ARCHIVED)
    with (
        before_unlinking(".dk-swap", lambda: written.append(agent.write(archived))) as fired,
        pytest.raises(ConflictError, match="in place"),
    ):
        store.rewrite(stored, stored.entry.with_meta(consolidationReviewedAt="2026-09-01T00:00:00+00:00"))
    assert fired, "the swap's displaced version was never unlinked: the race was not exercised"
    assert path.read_bytes() == written[0]  # the agent's archive is the entry; our stamp did not stand
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_an_in_place_write_after_the_unlink_is_seen_through_the_kept_descriptor(
    store: MemoryStore, memory_root: Path
) -> None:
    stored, path = _entry(store, memory_root)
    agent = Opened(path)
    written: list[bytes] = []

    def hook(stage: str, target: Path) -> None:
        if stage == "replaced":
            written.append(agent.write(rockbot_entry(content="the agent's newest text")))

    with atomic_module.write_seam(hook), pytest.raises(ConflictError):
        store.rewrite(stored, stored.entry.with_meta(consolidationReviewedAt="2026-09-01T00:00:00+00:00"))
    assert path.read_bytes() == written[0]
    assert [p.name for p in path.parent.iterdir()] == [path.name]


# ---- the fallback without RENAME_EXCHANGE (NFS and others) -------------------------------------------------------


@pytest.fixture
def no_exchange(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(exchange_module, "exchange_enabled", False)


@pytest.mark.usefixtures("no_exchange")
def test_without_the_exchange_a_newer_save_is_never_replaced(store: MemoryStore, memory_root: Path) -> None:
    """Finding 4: check-then-rename replaced the agent's save, landing between the check and the rename, with an
    older version (ours, made from what we read), and said nothing."""
    stored, path = _entry(store, memory_root)
    saved: list[bytes] = []

    def hook(stage: str, _: Path) -> None:
        if stage == "checked":
            saved.append(agent_save(path, content="saved meanwhile"))

    with atomic_module.write_seam(hook), pytest.raises(ConflictError):
        store.rewrite(stored, stored.entry.with_meta(consolidationReviewedAt="2026-09-01T00:00:00+00:00"))
    assert saved and path.read_bytes() == saved[0]
    assert [p.name for p in path.parent.iterdir()] == [path.name]


@pytest.mark.usefixtures("no_exchange")
@pytest.mark.parametrize("writer", ["save", "in-place"])
def test_without_the_exchange_a_write_while_parked_wins(store: MemoryStore, memory_root: Path, writer: str) -> None:
    """The agent writes while its file is moved aside: a save creates the name again (ours is then not linked in),
    an in-place write lands in the moved file (seen through the descriptor, put back)."""
    stored, path = _entry(store, memory_root)
    agent = Opened(path) if writer == "in-place" else None
    written: list[bytes] = []

    def hook(stage: str, target: Path) -> None:
        if stage == "parked" and not written:
            newest = rockbot_entry(content="the agent's newest text")
            if agent is not None:
                written.append(agent.write(newest))
            else:
                path.write_text(json.dumps(newest, indent=2), encoding="utf-8")
                written.append(path.read_bytes())

    with atomic_module.write_seam(hook), pytest.raises(ConflictError):
        store.rewrite(stored, stored.entry.with_meta(consolidationReviewedAt="2026-09-01T00:00:00+00:00"))
    assert path.read_bytes() == written[0]
    assert [p.name for p in path.parent.iterdir()] == [path.name]


@pytest.mark.usefixtures("no_exchange")
def test_without_the_exchange_an_undisturbed_write_still_happens(store: MemoryStore, memory_root: Path) -> None:
    stored, path = _entry(store, memory_root)
    store.rewrite(stored, stored.entry.with_meta(consolidationReviewedAt="2026-09-01T00:00:00+00:00"))
    assert json.loads(path.read_text())["metadata"]["consolidationReviewedAt"] == "2026-09-01T00:00:00+00:00"
    assert [p.name for p in path.parent.iterdir()] == [path.name]


@pytest.mark.usefixtures("no_exchange")
def test_a_write_killed_while_its_entry_is_moved_aside_is_put_back_by_the_sweep(
    store: MemoryStore, memory_root: Path
) -> None:
    stored, path = _entry(store, memory_root)
    before = path.read_bytes()

    def hook(stage: str, target: Path) -> None:
        if stage == "parked":
            raise Killed

    with atomic_module.write_seam(hook), pytest.raises(Killed):
        store.rewrite(stored, stored.entry.with_meta(consolidationReviewedAt="2026-09-01T00:00:00+00:00"))
    assert not path.exists()  # moved aside at the kill
    report = store.sweep()
    assert report.restored == [path] and path.read_bytes() == before
    assert [p.name for p in path.parent.iterdir()] == [path.name]


# ---- recovery keeps the newest text live ---------------------------------------------------------------------


def test_recovery_after_a_kill_just_after_a_swap_the_agent_raced_keeps_its_newest_text_live(
    store: MemoryStore, memory_root: Path
) -> None:
    """Finding 4: the agent saved just before our swap, we were SIGKILLed just after it; the sweep kept the agent's
    newest text in a hidden .dk-conflict copy RockBot never reads, and left our version (made from the older one)
    live."""
    stored, path = _entry(store, memory_root)
    newest: list[bytes] = []

    def hook(stage: str, target: Path) -> None:
        if stage == "checked":
            newest.append(agent_save(path, content="the agent's newest text"))
        if stage == "swapped":
            raise Killed

    with atomic_module.write_seam(hook), pytest.raises(Killed):
        store.rewrite(stored, stored.entry.with_meta(consolidationReviewedAt="2026-09-01T00:00:00+00:00"))
    report = store.sweep()
    assert path.read_bytes() == newest[0]  # live, where RockBot reads it
    assert report.conflict_copies == [] and report.put_back == [path]
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_recovery_keeps_the_agents_later_write_live_and_the_displaced_one_as_the_older_copy(
    store: MemoryStore, memory_root: Path
) -> None:
    """The agent wrote before our swap and again after it (over ours), then we were killed: its later write stays
    live, the one our swap displaced is kept as the conflict copy (the older version, as the runbook says)."""
    stored, path = _entry(store, memory_root)
    first: list[bytes] = []

    def hook(stage: str, target: Path) -> None:
        if stage == "checked":
            first.append(agent_save(path, content="first"))
        if stage == "swapped":
            first.append(agent_save(path, content="second, the newest"))
            raise Killed

    with atomic_module.write_seam(hook), pytest.raises(Killed):
        store.rewrite(stored, stored.entry.with_meta(consolidationReviewedAt="2026-09-01T00:00:00+00:00"))
    report = store.sweep()
    assert path.read_bytes() == first[1]
    (copy,) = report.conflict_copies
    assert copy.read_bytes() == first[0]
