"""The guarded write swaps and verifies (issue 16 finding 1): whatever the agent writes at any instant of ours is
never destroyed. Each test puts an agent write (as RockBot makes it) at one instant of our write, through the
write seam, deterministically; tests/robustness/test_delayed_rename.py is the stochastic version."""

from __future__ import annotations

import ctypes
import errno
import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from dreamkeeper.memory import ConflictError, MemoryStore, StoredEntry
from dreamkeeper.memory import atomic as atomic_module
from dreamkeeper.memory import exchange as exchange_module
from tests.memory.conftest import rockbot_entry, write_raw


def agent_save(path: Path, content: str) -> bytes:
    """RockBot's SaveAsync (AtomicFile @787d206c): a sibling temp renamed over the file."""
    obj = json.loads(path.read_text(encoding="utf-8")) if path.exists() else rockbot_entry()
    obj["content"] = content
    temp = path.parent / f".{obj['id']}.json.{uuid.uuid4().hex}.tmp"
    temp.write_text(json.dumps(obj, indent=2), encoding="utf-8")
    os.replace(temp, path)
    return path.read_bytes()


def agent_rewrite_in_place(path: Path, content: str) -> bytes:
    """RockBot's ArchiveAsync / RestoreAsync: File.WriteAllTextAsync on the path (truncate, then write)."""
    obj = rockbot_entry(content=content, archivedAt="2026-09-01T00:00:00.0000000+00:00", archiveReason="x")
    with open(path, "w", encoding="utf-8") as out:
        out.write(json.dumps(obj, indent=2))
    return path.read_bytes()


def at(stage: str, action: Callable[[], object]) -> atomic_module.WriteSeam:
    fired: list[str] = []

    def hook(seen: str, path: Path) -> None:
        if seen == stage and not fired:
            fired.append(seen)
            action()

    return hook


@pytest.fixture
def entry(store: MemoryStore, memory_root: Path) -> tuple[StoredEntry, Path]:
    path = write_raw(memory_root, rockbot_entry())
    return store.require("a1b2c3d4e5f6"), path


def stamp(store: MemoryStore, stored: StoredEntry) -> None:
    store.rewrite(stored, stored.entry.with_meta(consolidationReviewedAt="2026-09-01T00:00:00+00:00"))


def ours_left(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith((".dk-new", ".dk-swap")))


def copies(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.dk-conflict"))


def test_an_agent_save_before_our_swap_is_put_back(store: MemoryStore, entry: tuple[StoredEntry, Path]) -> None:
    stored, path = entry
    agent: list[bytes] = []
    hook = at("checked", lambda: agent.append(agent_save(path, "Rose moved [w-1]")))
    with atomic_module.write_seam(hook), pytest.raises(ConflictError, match="put back"):
        stamp(store, stored)
    assert path.read_bytes() == agent[0]
    assert ours_left(path.parent) == [] and copies(path.parent) == []


def test_an_agent_rewrite_in_place_before_our_swap_is_put_back(
    store: MemoryStore, entry: tuple[StoredEntry, Path]
) -> None:
    stored, path = entry
    agent: list[bytes] = []
    hook = at("checked", lambda: agent.append(agent_rewrite_in_place(path, "archived [w-1]")))
    with atomic_module.write_seam(hook), pytest.raises(ConflictError):
        store.archive(stored, "flagged ephemeral by consolidation")
    assert path.read_bytes() == agent[0]
    assert ours_left(path.parent) == [] and copies(path.parent) == []


def test_an_agent_write_after_our_swap_wins(store: MemoryStore, entry: tuple[StoredEntry, Path]) -> None:
    """The displaced file is the one we read, so ours was a fair replacement; the agent then wrote over ours, as it
    would over any file: its version is in place and nothing of anyone's was destroyed."""
    stored, path = entry
    agent: list[bytes] = []
    with atomic_module.write_seam(at("swapped", lambda: agent.append(agent_save(path, "later [w-2]")))):
        stamp(store, stored)
    assert path.read_bytes() == agent[0]
    assert ours_left(path.parent) == [] and copies(path.parent) == []


@pytest.mark.parametrize("second", [agent_save, agent_rewrite_in_place])
def test_two_agent_writes_around_our_swap_keep_both(
    store: MemoryStore, entry: tuple[StoredEntry, Path], second: Callable[[Path, str], bytes]
) -> None:
    """The agent wrote before our swap (we displaced it) and again after it (over ours): its newest version goes
    back in place, and the one we displaced is kept as a conflict copy (not a *.json: RockBot's index would load
    it); no write of ours destroyed either."""
    stored, path = entry
    first: list[bytes] = []
    newest: list[bytes] = []

    def hook(stage: str, target: Path) -> None:
        if stage == "checked" and not first:
            first.append(agent_save(path, "first [w-1]"))
        elif stage == "swapped" and not newest:
            newest.append(second(path, "second [w-2]"))

    with atomic_module.write_seam(hook), pytest.raises(ConflictError, match="older version of the agent's is kept"):
        stamp(store, stored)
    assert path.read_bytes() == newest[0]
    (copy,) = copies(path.parent)
    assert copy.read_bytes() == first[0]
    assert not copy.name.endswith(".json") and ours_left(path.parent) == []


def test_an_agent_delete_before_our_swap_is_not_undone(store: MemoryStore, entry: tuple[StoredEntry, Path]) -> None:
    stored, path = entry
    with atomic_module.write_seam(at("checked", path.unlink)), pytest.raises(ConflictError, match="removed"):
        stamp(store, stored)
    assert not path.exists() and ours_left(path.parent) == []


def test_an_agent_delete_after_a_displacing_swap_keeps_the_displaced_version(
    store: MemoryStore, entry: tuple[StoredEntry, Path]
) -> None:
    stored, path = entry
    first: list[bytes] = []

    def hook(stage: str, target: Path) -> None:
        if stage == "checked" and not first:
            first.append(agent_save(path, "first [w-1]"))
        elif stage == "swapped":
            path.unlink()  # DeleteAsync of the file it thinks is its own (ours, by then)

    with atomic_module.write_seam(hook), pytest.raises(ConflictError):
        stamp(store, stored)
    assert not path.exists()
    (copy,) = copies(path.parent)
    assert copy.read_bytes() == first[0]


def test_without_the_exchange_the_fallback_still_refuses_a_changed_file(
    store: MemoryStore, entry: tuple[StoredEntry, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    stored, path = entry
    monkeypatch.setattr(exchange_module, "exchange_enabled", False)
    agent = agent_save(path, "changed [w-1]")
    with pytest.raises(ConflictError):
        stamp(store, stored)
    assert path.read_bytes() == agent
    fresh = store.require("a1b2c3d4e5f6")
    stamp(store, fresh)
    assert json.loads(path.read_text())["metadata"]["consolidationReviewedAt"] == "2026-09-01T00:00:00+00:00"


def test_a_filesystem_without_the_exchange_gets_check_then_rename(
    store: MemoryStore, entry: tuple[StoredEntry, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """renameat2 answers EINVAL on filesystems without RENAME_EXCHANGE: the write still happens, by the fallback,
    and that filesystem is not asked again."""
    stored, path = entry
    calls: list[int] = []

    def refusing(*_: object) -> int:
        calls.append(1)
        ctypes.set_errno(errno.EINVAL)
        return -1

    monkeypatch.setattr(exchange_module, "_renameat2", refusing)
    monkeypatch.setattr(exchange_module, "_no_exchange_devices", set())
    stamp(store, stored)
    stamp(store, store.require("a1b2c3d4e5f6"))
    assert calls == [1]
    assert os.stat(path).st_dev in exchange_module._no_exchange_devices


def test_the_real_exchange_is_used_here(store: MemoryStore, entry: tuple[StoredEntry, Path]) -> None:
    """On this machine's filesystem the swap really happens (else every test above ran the fallback)."""
    stored, _ = entry
    stages: list[str] = []
    with atomic_module.write_seam(lambda stage, _: stages.append(stage)):
        stamp(store, stored)
    assert stages == ["checked", "swapped", "replaced"]


# ---- what a killed write leaves, and the sweep -------------------------------------------------------------------


class Killed(BaseException):
    """Stands for SIGKILL at that instant: no except clause of ours runs for it but the generic cleanup."""


def test_a_write_killed_after_its_swap_leaves_nothing_the_sweep_loses(
    store: MemoryStore, entry: tuple[StoredEntry, Path]
) -> None:
    stored, path = entry
    first: list[bytes] = []

    def hook(stage: str, target: Path) -> None:
        if stage == "checked":
            first.append(agent_save(path, "agent [w-1]"))  # so the swap displaces a version of the agent's
        if stage == "swapped":
            raise Killed

    with atomic_module.write_seam(hook), pytest.raises(Killed):
        stamp(store, stored)
    (left,) = ours_left(path.parent)
    assert left.endswith(".dk-swap")  # the temp's name now holds the displaced agent version: never deleted
    report = store.sweep()
    # The agent's version is the newest (ours was made from the one before it): back in place, ours gone (issue 22).
    assert report.put_back == [path] and report.conflict_copies == []
    assert path.read_bytes() == first[0]
    assert ours_left(path.parent) == []


def test_the_sweep_removes_only_our_own_temps(memory_root: Path, store: MemoryStore) -> None:
    path = write_raw(memory_root, rockbot_entry())
    new = path.parent / f".{path.name}.{uuid.uuid4().hex}.dk-new"
    new.write_bytes(b"half a write of ours")
    swap = path.parent / f".{path.name}.0.dk-swap"
    swap.write_bytes(b"ours")
    armed = swap.with_name(f".{path.name}.{os.lstat(swap).st_ino}.dk-swap")
    os.rename(swap, armed)  # its inode is the one in its name: only our data
    rockbot_temp = path.parent / f".{path.stem}.json.{uuid.uuid4().hex}.tmp"  # RockBot's own, maybe in flight
    rockbot_temp.write_bytes(b"the agent's")
    report = store.sweep()
    assert sorted(report.removed) == sorted([new, armed])
    assert rockbot_temp.read_bytes() == b"the agent's" and path.exists()
    assert report.conflict_copies == []


def test_an_entry_parked_by_a_killed_purge_goes_back(memory_root: Path, store: MemoryStore) -> None:
    path = write_raw(memory_root, rockbot_entry())
    data = path.read_bytes()
    parked = path.with_name(f".{path.name}.{uuid.uuid4().hex}.purging")
    os.rename(path, parked)
    report = store.sweep()
    assert report.restored == [path] and path.read_bytes() == data and not parked.exists()
