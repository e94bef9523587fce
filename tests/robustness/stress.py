"""The delayed-rename stress: an agent writing as RockBot does while our guarded writes are slowed down.

    python -m tests.robustness.stress [--delay 0.02] [--writes 5000] [--entries 48] [--no-exchange|--check-then-rename]

Issue 16 finding 1: with renames slowed by 5-20 ms (CPU throttling, preemption in a pod), check-then-rename lost
7 of ~6,700 agent writes. The delay is injected through ``dreamkeeper.memory.atomic.write_seam`` (a test seam, not
strace) at each instant another writer could interleave with ours: after the pre-check, before the file is put in
place (where check-then-rename lost writes), and after the swap, before the displaced file is verified. While our
write sleeps there, the agent writes *that* entry: every window gets its race.

The agent imitates RockBot's FileMemoryStore (MarimerLLC/rockbot ``src/RockBot.Host/FileMemoryStore.cs`` @8a7e360e,
``AtomicFile.cs`` @787d206c; /work/notes/rockbot-source.md §1.2) with the caching agent's serializer
(``tests/agents/caching_agent.py``): saves through a sibling ``.{id}.json.{guid}.tmp`` renamed over the file,
archives and restores rewritten in place (truncate, then write), always the whole cached object, never reading
before it writes, no lock. Each save puts a new marker in the content (``[w-<n>]``).

A lost write is an agent version replaced by an older one: before each write the harness (not RockBot) reads the
file and checks it still carries the marker the agent last wrote there, and at the end every entry must carry its
last marker. Our writes never change content (review stamps, archives, restores), so any other marker on disk is
an agent write destroyed by one of ours.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dreamkeeper.memory import ConflictError, MemoryStore, StoredEntry
from dreamkeeper.memory import atomic as atomic_module
from dreamkeeper.memory import exchange as exchange_module
from tests.agents.caching_agent import Cached, Store, record_of

_MARKER = re.compile(r"\[w-(\d+)\]$")
_FALLBACK = atomic_module._park_then_link


def _check_then_rename(temp: Any, path: Path, expected: atomic_module.Fingerprint) -> None:
    """The fallback without the exchange before issue 22 (atomic.py @fa2ec85): a save the agent makes between the
    check and the rename is replaced by our older version. Kept here only as the stress's control."""
    atomic_module.check_unchanged(path, expected)
    atomic_module._at("checked", path)
    os.replace(temp.path, path)


@contextlib.contextmanager
def without_exchange(*, check_then_rename: bool = False) -> Iterator[None]:
    """Our writes as on a volume without ``RENAME_EXCHANGE`` (NFS and others): today's park-then-link fallback, or,
    with ``check_then_rename``, the old one (the control that must lose writes)."""
    enabled = exchange_module.exchange_enabled
    exchange_module.exchange_enabled = False
    if check_then_rename:
        atomic_module._park_then_link = _check_then_rename  # type: ignore[assignment]
    try:
        yield
    finally:
        exchange_module.exchange_enabled = enabled
        atomic_module._park_then_link = _FALLBACK


def _mode() -> str:
    if exchange_module.exchange_enabled:
        return "swap"
    return "check-then-rename" if atomic_module._park_then_link is _check_then_rename else "park-then-link"


@dataclass
class StressResult:
    agent_writes: int = 0
    agent_saves: int = 0
    agent_in_place: int = 0
    our_writes: int = 0
    our_conflicts: int = 0
    races: int = 0  # agent writes made while one of our writes was inside a window, on that very entry
    lost: list[str] = field(default_factory=list)
    conflict_copies: int = 0
    seconds: float = 0.0
    delay: float = 0.0
    mode: str = "swap"

    def as_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data["lost_writes"] = len(self.lost)
        data["lost"] = self.lost[:20]
        return data


class _Hot:
    """``path``: the entry one of our writes holds a window open on (set by the seam); ``busy``: the entry one of our
    writes is working on, from its call to its return. While ours is in flight the file may hold our version for a
    moment (between a swap and its verification): only an agent version still displaced once ours has returned is
    lost, so the probe skips a busy entry (the next probe and the final check look again)."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self.window = 0  # counts the windows opened: the agent writes into each one once
        self.busy: str | None = None
        self.lock = threading.Lock()


def _seed(memory: Path, entries: int) -> Store:
    agent = Store(memory, "atomic")
    for index in range(entries):
        entry = record_of(
            {
                "id": f"{index:012x}",
                "content": f"Fact number {index} about Rose and Portland. [w-0]",
                "category": "people/family" if index % 2 else "notes",
                "createdAt": "2026-03-01T08:15:02.1234567+00:00",
                "tags": ["family"],
                "metadata": {"source": "conversation"},
            }
        )
        cached = Cached(entry, agent.path_of(entry))
        agent.write(cached, entry, in_place=False)
    return agent


def run_stress(
    workdir: Path, *, writes: int = 5000, delay: float = 0.020, entries: int = 48, seed: int = 16
) -> StressResult:
    """Run the agent and our writer side by side until the agent made ``writes`` writes."""
    memory = workdir / "memory"
    agent = _seed(memory, entries)
    result = StressResult(delay=delay, mode=_mode())
    hot = _Hot()
    last: dict[str, int] = {c.entry["id"]: 0 for c in agent.index.values()}
    stop = threading.Event()
    failure: list[BaseException] = []

    def seam(stage: str, path: Path) -> None:
        if stage in ("checked", "swapped"):
            with hot.lock:
                hot.path = path
                hot.window += 1
            time.sleep(delay)
            with hot.lock:
                hot.path = None

    def on_disk_marker(path: Path) -> int | None:
        try:
            content = json.loads(path.read_text(encoding="utf-8"))["content"]
        except (OSError, ValueError, KeyError, TypeError):
            return None  # mid-rewrite (in place) or gone for a moment: checked again next time
        match = _MARKER.search(content)
        return int(match.group(1)) if match else None

    def agent_loop() -> None:
        rng = random.Random(seed)
        ids = sorted(last)
        counter = 0
        raced = 0  # the last window the agent wrote into
        try:
            while result.agent_writes < writes and not failure:
                with hot.lock:
                    target = hot.path if hot.window != raced else None
                    raced = hot.window  # each window is raced once, or not at all
                if target is not None and rng.random() < 0.5:
                    target = None  # half the windows pass without a race: ours must still succeed then
                entry_id = target.stem if target is not None else rng.choice(ids)
                cached = agent.index[entry_id.casefold()]
                with hot.lock:
                    busy = hot.busy == entry_id
                seen = None if busy else on_disk_marker(cached.path)
                if seen is not None and seen != last[entry_id]:
                    result.lost.append(f"{entry_id}: on disk [w-{seen}] after the agent wrote [w-{last[entry_id]}]")
                entry = dict(cached.entry)
                if rng.random() < 0.8:
                    counter += 1
                    entry["content"] = _MARKER.sub(f"[w-{counter}]", entry["content"])
                    entry["reinforcementCount"] = int(entry["reinforcementCount"]) + 1
                    agent.write(cached, entry, in_place=False)  # SaveAsync: temp + rename
                    last[entry_id] = counter
                    result.agent_saves += 1
                else:
                    archived = entry["archivedAt"] is None
                    entry["archivedAt"] = "2026-09-01T00:00:00.0000000+00:00" if archived else None
                    entry["archiveReason"] = "replaced by identity reflection" if archived else None
                    agent.write(cached, entry, in_place=True)  # ArchiveAsync / RestoreAsync: in place
                    result.agent_in_place += 1
                result.agent_writes += 1
                if target is not None:
                    result.races += 1
                time.sleep(rng.random() * 0.004)  # the agent's own pace, ~500 writes a second
        except BaseException as exc:  # pragma: no cover - reported by the caller
            failure.append(exc)
        finally:
            stop.set()

    def our_loop() -> None:
        store = MemoryStore(memory)
        rng = random.Random(seed + 1)
        try:
            paths = [s.path for s in store.scan().entries]
            while not stop.is_set():
                # Read just before writing (as the executor writes what it snapshotted): the race is in the
                # windows the seam holds open, not in a stale read.
                stored = store.read_file(rng.choice(paths))
                if isinstance(stored, StoredEntry):  # else caught mid-rewrite (in place): pick again
                    our_write(store, stored, rng)
        except BaseException as exc:  # pragma: no cover - reported by the caller
            failure.append(exc)
            stop.set()

    def our_write(store: MemoryStore, stored: StoredEntry, rng: random.Random) -> None:
        with hot.lock:
            hot.busy = stored.id
        try:
            if rng.random() < 0.5:
                stamp = {"consolidationReviewedAt": f"2026-09-0{rng.randint(1, 9)}T00:00:00+00:00"}
                store.rewrite(stored, stored.entry.with_meta(**stamp))
            elif stored.entry.is_archived:
                store.restore(stored)
            else:
                store.archive(stored, "flagged ephemeral by consolidation", parse_back=False)
            result.our_writes += 1
        except ConflictError:
            result.our_conflicts += 1
        finally:
            with hot.lock:
                hot.busy = None

    start = time.perf_counter()
    with atomic_module.write_seam(seam):
        threads = [threading.Thread(target=agent_loop), threading.Thread(target=our_loop)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    result.seconds = round(time.perf_counter() - start, 1)
    if failure:
        raise failure[0]
    for entry_id, marker in last.items():
        seen = on_disk_marker(agent.index[entry_id.casefold()].path)
        if seen != marker:
            result.lost.append(f"{entry_id}: at the end [w-{seen}], the agent's last write was [w-{marker}]")
    result.conflict_copies = sum(1 for _ in memory.rglob(f"*{atomic_module.CONFLICT_SUFFIX}"))
    return result


def main(argv: list[str] | None = None) -> int:
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delay", type=float, default=0.020)
    parser.add_argument("--writes", type=int, default=5000)
    parser.add_argument("--entries", type=int, default=48)
    parser.add_argument("--no-exchange", action="store_true", help="without RENAME_EXCHANGE (park, then link)")
    parser.add_argument("--check-then-rename", action="store_true", help="the old fallback (no exchange): the control")
    args = parser.parse_args(argv)
    fallback = (
        without_exchange(check_then_rename=args.check_then_rename)
        if args.no_exchange or args.check_then_rename
        else contextlib.nullcontext()
    )
    with tempfile.TemporaryDirectory(prefix="dk-stress-") as workdir, fallback:
        result = run_stress(Path(workdir), writes=args.writes, delay=args.delay, entries=args.entries)
    print(json.dumps(result.as_dict(), indent=2))
    return 1 if result.lost and not args.check_then_rename else 0


if __name__ == "__main__":
    sys.exit(main())
