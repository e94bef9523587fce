"""Crash-test worker: mutates a store as fast as it can until it is SIGKILLed.

Run as ``python -m tests.memory.crash_worker MEMORY_ROOT SEED``. Every version it writes is self-describing
(content ``"{id} v{n} "`` + padding, metadata ``version = n``), so the parent can tell a whole file from a torn
one. It prints ``ready`` once, then one ``.`` per completed mutation.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from dreamkeeper.memory import Entry, MemoryStore, StoredEntry


def content_for(entry_id: str, version: int, padding: int) -> str:
    return f"{entry_id} v{version} " + "x" * padding


def main() -> None:
    root, seed = Path(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(seed)
    store = MemoryStore(root)
    entries: dict[str, StoredEntry] = {s.id: s for s in store.scan().entries}
    created = 0
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        roll = rng.random()
        if roll < 0.1:
            entry_id = f"n{seed:06d}x{created:04d}"
            created += 1
            padding = rng.choice([0, 100, 50_000, 400_000])
            entry = Entry(
                id=entry_id, content=content_for(entry_id, 1, padding), category="crash/new", metadata={"version": "1"}
            )
            entries[entry_id] = store.create(entry)
        else:
            stored = entries[rng.choice(sorted(entries))]
            entry = stored.entry
            if roll < 0.4:
                if entry.is_archived:
                    entries[entry.id] = store.restore(stored)
                else:
                    entries[entry.id] = store.archive(stored, f"crash test at v{entry.meta('version')}")
            else:
                version = int(entry.meta("version") or "0") + 1
                padding = rng.choice([0, 100, 50_000, 400_000])
                changed = entry.evolve(content=content_for(entry.id, version, padding)).with_meta(version=str(version))
                entries[entry.id] = store.update(stored, changed)
        sys.stdout.write(".")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
