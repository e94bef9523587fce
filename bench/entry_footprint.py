"""Entry footprint: bytes per parsed entry (with a breakdown by part) and scan time on an existing corpus.

    python -m bench entry-footprint ROOT [--mode scan|parse|breakdown] [--limit N]

``ROOT`` is a memory directory (RockBot layout, one JSON file per entry). Modes, one per process so each
measurement is its own (run them as separate commands):

* ``scan``: ``MemoryStore(ROOT).scan()`` untraced: wall and CPU seconds, RSS growth and peak RSS.
* ``parse``: the files' bytes are read first, then only ``Entry.from_json_obj(json.loads(data))`` runs under
  tracemalloc: the bytes still allocated per kept Entry (the Entry alone, no StoredEntry, Path or Fingerprint),
  and the CPU seconds of the parse alone (untraced, a second pass).
* ``breakdown``: a scan under tracemalloc (bytes per StoredEntry, everything kept) plus a ``sys.getsizeof`` walk
  of every kept object, each object counted once, attributed to the first part that reaches it (so an object
  shared by many entries costs ~0 per entry).

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import sys
import tempfile
import time
import tracemalloc
from collections import defaultdict
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _rss_mib() -> float:
    with open("/proc/self/statm", encoding="ascii") as handle:
        pages = int(handle.read().split()[1])
    return pages * resource.getpagesize() / 2**20


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _files(root: Path, limit: int | None) -> list[Path]:
    from dreamkeeper.memory import MemoryStore

    files = list(MemoryStore(root).iter_files())
    return files[:limit] if limit else files


def scan(root: Path, limit: int | None) -> dict[str, Any]:
    from dreamkeeper.memory import MemoryStore

    if limit:
        raise SystemExit("--limit applies to parse and breakdown only (scan reads the whole directory)")
    gc.collect()
    rss, cpu, started = _rss_mib(), _cpu(), time.perf_counter()
    result = MemoryStore(root).scan()
    seconds, cpu_seconds = time.perf_counter() - started, _cpu() - cpu
    gc.collect()
    n = len(result.entries)
    return {
        "mode": "scan",
        "entries": n,
        "malformed": len(result.malformed),
        "seconds": round(seconds, 3),
        "cpuSeconds": round(cpu_seconds, 3),
        "rssGrowthMiB": round(_rss_mib() - rss, 1),
        "rssGrowthBytesPerEntry": round((_rss_mib() - rss) * 2**20 / max(n, 1)),
        "peakRssMiB": round(_peak_mib(), 1),
    }


def parse(root: Path, limit: int | None) -> dict[str, Any]:
    from dreamkeeper.memory.entry import Entry

    blobs = [path.read_bytes() for path in _files(root, limit)]
    # Untraced pass for CPU time; its entries are dropped before the traced pass.
    cpu = _cpu()
    entries = [Entry.from_json_obj(json.loads(data)) for data in blobs]
    parse_cpu = _cpu() - cpu
    cpu = _cpu()
    for data in blobs:
        json.loads(data)
    json_cpu = _cpu() - cpu
    del entries
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    entries = [Entry.from_json_obj(json.loads(data)) for data in blobs]
    gc.collect()
    kept = tracemalloc.get_traced_memory()[0] - before - sys.getsizeof(entries)
    tracemalloc.stop()
    n = len(entries)
    return {
        "mode": "parse",
        "entries": n,
        "bytesPerEntry": round(kept / n),
        "parseCpuSeconds": round(parse_cpu, 3),
        "jsonLoadsCpuSeconds": round(json_cpu, 3),
        "fromJsonObjMicroseconds": round((parse_cpu - json_cpu) / n * 1e6, 2),
    }


_ATOMS = (type(None), bool)


class _Sizer:
    """sys.getsizeof over object graphs; every object counted once, in the first part that reaches it."""

    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.parts: dict[str, int] = defaultdict(int)

    def shallow(self, part: str, obj: Any) -> None:
        if obj is None or isinstance(obj, _ATOMS) or id(obj) in self.seen:
            return
        if isinstance(obj, int) and -5 <= obj <= 256:
            return  # cached small ints
        self.seen.add(id(obj))
        self.parts[part] += sys.getsizeof(obj)

    def deep(self, part: str, obj: Any) -> None:
        if obj is None or isinstance(obj, _ATOMS) or id(obj) in self.seen:
            return
        self.shallow(part, obj)
        if isinstance(obj, dict):
            for key, value in obj.items():
                self.deep(part, key)
                self.deep(part, value)
        elif isinstance(obj, list | tuple | set | frozenset):
            for item in obj:
                self.deep(part, item)
        elif isinstance(obj, datetime):
            self.deep(part, obj.tzinfo)
        elif isinstance(obj, str | int | float | bytes | tzinfo):
            return
        elif type(obj).__module__.startswith(("dreamkeeper", "pathlib")):
            for slot in _slots(type(obj)):
                self.deep(part, getattr(obj, slot, None))
            if hasattr(obj, "__dict__"):
                self.deep(part, vars(obj))


def _slots(cls: type) -> list[str]:
    names: list[str] = []
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        names.extend([slots] if isinstance(slots, str) else slots)
    return [name for name in names if name not in ("__dict__", "__weakref__")]


def breakdown(root: Path, limit: int | None) -> dict[str, Any]:
    from dreamkeeper.memory import MemoryStore
    from dreamkeeper.memory import entry as entry_module

    store = MemoryStore(root)
    files = _files(root, limit)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    stored = [item for item in map(store.read_file, files) if not hasattr(item, "error")]
    gc.collect()
    kept = tracemalloc.get_traced_memory()[0] - before - sys.getsizeof(stored)
    tracemalloc.stop()
    n = len(stored)

    sizer = _Sizer()
    # Module-level objects (aliases, shared key tables) are not per-entry costs.
    data = (str, dict, tuple, list, frozenset, set)
    sizer.deep("(module)", {k: v for k, v in vars(entry_module).items() if isinstance(v, data)})
    module_bytes = sizer.parts.pop("(module)", 0)
    field_parts = {
        "id": "strings: id",
        "content": "strings: content",
        "category": "strings: category/supersededBy/archiveReason",
        "superseded_by": "strings: category/supersededBy/archiveReason",
        "archive_reason": "strings: category/supersededBy/archiveReason",
        "tags": "tags (list + values)",
        "metadata": "metadata (dict + keys + values)",
        "created_at": "datetimes (+ tzinfo)",
        "updated_at": "datetimes (+ tzinfo)",
        "last_seen_at": "datetimes (+ tzinfo)",
        "archived_at": "datetimes (+ tzinfo)",
        "reinforcement_count": "numbers",
        "importance_score": "numbers",
    }
    for item in stored:
        entry = item.entry
        sizer.shallow("StoredEntry", item)
        sizer.deep("Path", item.path)
        sizer.deep("Fingerprint", item.fingerprint)
        sizer.shallow("Entry instance", entry)
        sizer.shallow("Entry __dict__ (fields dict)", entry.__dict__)
        sizer.deep("fields-set", entry.__pydantic_fields_set__)
        for name, part in field_parts.items():
            sizer.deep(part, entry.__dict__[name])
        sizer.deep("extras (unknown fields)", entry.__pydantic_extra__)
        private = entry.__pydantic_private__
        if private is not None:
            sizer.shallow("private attrs dict", private)
            for key, value in private.items():
                if key == "_raw":
                    sizer.shallow("_raw dict", value)
                    for raw_key, raw_value in value.items():
                        sizer.deep("_raw keys", raw_key)
                        sizer.deep("_raw values (not shared with fields)", raw_value)
                else:
                    sizer.deep(f"{key}", value)
        for slot in _slots(type(entry)):
            if not slot.startswith("__pydantic"):
                sizer.deep(f"slot {slot}", getattr(entry, slot, None))
    parts = {part: round(size / n, 1) for part, size in sorted(sizer.parts.items(), key=lambda kv: -kv[1])}
    return {
        "mode": "breakdown",
        "entries": n,
        "tracedBytesPerStoredEntry": round(kept / n),
        "getsizeofBytesPerStoredEntry": round(sum(sizer.parts.values()) / n),
        "perEntryBytesByPart": parts,
        "moduleLevelBytes": module_bytes,
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench entry-footprint", description=__doc__.split("\n")[0])
    parser.add_argument(
        "root", type=Path, nargs="?", default=None, help="a memory directory (read only); default: a synthetic one"
    )
    parser.add_argument("--mode", choices=("scan", "parse", "breakdown"), default="scan")
    parser.add_argument("--limit", type=int, default=None, help="parse/breakdown: only the first N files")
    parser.add_argument("--size", type=int, default=30_000, help="entries of the synthetic corpus (no ROOT given)")
    parser.add_argument("--quick", action="store_true", help="a 300-entry synthetic corpus (tests)")
    args = parser.parse_args(argv)
    run = {"scan": scan, "parse": parse, "breakdown": breakdown}[args.mode]
    if args.root is not None:
        result = run(args.root, args.limit)
        result["root"] = str(args.root)
    else:
        # No corpus named (e.g. `python -m bench all`): the scale bench's synthetic world, in tmpfs when there is one.
        from bench.sim.world import write_synthetic_corpus

        base = Path("/dev/shm") if os.access("/dev/shm", os.W_OK) else None
        with tempfile.TemporaryDirectory(prefix="dk-footprint-", dir=base) as workdir:
            root = Path(workdir) / "memory"
            write_synthetic_corpus(root, 300 if args.quick else args.size, 7)
            result = run(root, args.limit)
        result["root"] = f"synthetic ({300 if args.quick else args.size} entries, seed 7)"
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
