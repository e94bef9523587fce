"""A caching agent: what RockBot's memory store really does to the files while it runs (test infrastructure).

    python -m tests.agents.caching_agent AGENT_DIR --ledger FILE [--mode atomic|inplace] [--interval S]
        [--seed N] [--create-every K] [--archive-every K] [--hostile] [--linger S] [--max-writes N]

Imitated from MarimerLLC/rockbot (read in /work/notes/rockbot-source.md §1, §11):

* **The index is loaded once and never re-read** (``src/RockBot.Host/FileMemoryStore.cs`` @8a7e360e,
  ``EnsureIndexAsync``): every ``*.json`` under ``memory/`` (all directories, filesystem order), keyed by the
  ``id`` inside the JSON, case-insensitively, the last file enumerated winning; a file that is not valid JSON is
  skipped; any other error ends the load and the process keeps the partial index.
* **Writes come from the cached object**: the save-time dedupe's ``Reinforce``
  (``src/RockBot.Host/MemoryDeduplicator.cs`` @8a7e360e) writes ``cached with { Tags = union, Metadata = cached
  plus the candidate's missing keys, ImportanceScore = max, LastSeenAt = now, ReinforcementCount = cached + 1 }``
  with ``UpdatedAt`` untouched; its target is a cached entry that is live and not superseded *in the cache*.
  All 14 fields are serialized (camelCase, indented, nulls written, no trailing newline, .NET's default
  ``JavaScriptEncoder`` escaping); fields RockBot does not know are dropped. There is no lock between processes.
* **Two write modes**: ``atomic`` is current RockBot (``SaveAsync`` through ``AtomicFile.WriteAllTextAsync``
  @787d206c: a sibling temp ``.{id}.json.{guid:N}.tmp``, the target's mode copied, rename over, no fsync;
  ``ArchiveAsync`` still in place). ``inplace`` is RockBot before that change (FileMemoryStore @029f5eea: every
  write is ``File.WriteAllTextAsync``, truncate then write).
* New entries are created now and then (a new ``SaveAsync``), and with ``--archive-every`` entries are archived
  in place (``ArchiveAsync``: cached copy + ``archivedAt``/``archiveReason``).
* SIGTERM: the current write is finished (RockBot's host shuts down gracefully), the ledger says so, exit 0. A
  restart reloads the index; that is what RestartAfter relies on.

``--hostile`` is worse than RockBot: it writes ten times as often, and it looks for entries that are archived on
disk but live in its cache and writes its stale copy back over them (what RockBot does by chance, on purpose).
``--linger S`` keeps writing S seconds after SIGTERM (an agent slow to stop: the pod is still there).

Every write is appended to the **ledger** (JSONL, outside the memory directory), after the file was written:
``op`` (start, reinforce, create, archive, exit), the entry id and path, the new reinforcementCount and the
increment, ``lastSeenAt``, the sha256 of the content written, of the cached object it came from and of the file
it replaced (``stale`` when that file was not what the agent had cached: the write clobbered someone's change).
Tests read it with ``tests.agents.ledger``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import re
import signal
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

FIELDS = (
    "id",
    "content",
    "category",
    "tags",
    "createdAt",
    "updatedAt",
    "metadata",
    "importanceScore",
    "lastSeenAt",
    "reinforcementCount",
    "verify",
    "supersededBy",
    "archivedAt",
    "archiveReason",
)
DATES = ("createdAt", "updatedAt", "lastSeenAt", "archivedAt")
_DATE = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:\d{2})?$")
# Characters .NET's default JavaScriptEncoder escapes even though they are ASCII (HTML-sensitive).
_HTML_SENSITIVE = {c: f"\\u{ord(c):04X}" for c in "\"<>&'+`"}
_SHORT = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


# ---- System.Text.Json, as RockBot configures it ---------------------------------------------------------------


def dotnet_time(value: str | datetime | None) -> str | None:
    """A DateTimeOffset as System.Text.Json writes it: 7 fraction digits at most, trailing zeros trimmed,
    the offset always written (+00:00, never Z)."""
    if value is None:
        return None
    text = value.astimezone(UTC).isoformat() if isinstance(value, datetime) else value
    match = _DATE.match(text)
    if match is None:
        return text  # not a date .NET would have parsed; RockBot would have skipped the file
    base, fraction, zone = match.groups()
    fraction = (fraction or "")[:7].rstrip("0")
    zone = "+00:00" if zone in (None, "Z") else zone
    return f"{base}{'.' + fraction if fraction else ''}{zone}"


def _string(text: str) -> str:
    out = ['"']
    for char in text:
        code = ord(char)
        if char in _SHORT:
            out.append(_SHORT[char])
        elif char in _HTML_SENSITIVE:
            out.append(_HTML_SENSITIVE[char])
        elif code < 0x20 or code > 0x7E:
            if code > 0xFFFF:  # astral: a surrogate pair
                code -= 0x10000
                out.append(f"\\u{0xD800 + (code >> 10):04X}\\u{0xDC00 + (code & 0x3FF):04X}")
            else:
                out.append(f"\\u{code:04X}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _number(value: float | int) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return str(int(value)) if value == int(value) and abs(value) < 1e15 else repr(value)


def _value(value: Any, indent: int) -> str:
    pad, inner = "  " * indent, "  " * (indent + 1)
    if value is None:
        return "null"
    if isinstance(value, _Raw):
        return f'"{value}"'
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, (int, float)):
        return _number(value)
    if isinstance(value, list):
        if not value:
            return "[]"
        return "[\n" + ",\n".join(inner + _value(v, indent + 1) for v in value) + "\n" + pad + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = (f"{inner}{_string(str(k))}: {_value(v, indent + 1)}" for k, v in value.items())
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    raise TypeError(f"cannot serialize {type(value).__name__}")


class _Raw(str):
    """A value Utf8JsonWriter formats itself (DateTimeOffset): written as is, never through the encoder, so the
    offset's "+" stays "+"."""


def serialize(entry: dict[str, Any]) -> str:
    """The whole MemoryEntry record, in declaration order, nulls written, no trailing newline."""
    record = {name: entry.get(name) for name in FIELDS}
    for name in DATES:
        if record[name] is not None:
            record[name] = _Raw(record[name])
    return _value(record, 0)


def record_of(raw: dict[str, Any]) -> dict[str, Any]:
    """What RockBot's MemoryEntry keeps of a file: its 14 properties (read case-insensitively), defaults
    applied (lastSeenAt = createdAt, reinforcementCount = 1), dates normalised as .NET re-writes them."""
    lowered = {str(k).lower(): v for k, v in raw.items()}
    entry = {name: lowered.get(name.lower()) for name in FIELDS}
    entry["tags"] = entry["tags"] if entry["tags"] is not None else []
    for name in DATES:
        entry[name] = dotnet_time(entry[name])
    if entry["lastSeenAt"] is None:
        entry["lastSeenAt"] = entry["createdAt"]
    if entry["reinforcementCount"] is None:
        entry["reinforcementCount"] = 1
    if entry["importanceScore"] is None:
        entry["importanceScore"] = 0.5
    return entry


def sha(text: str | bytes | None) -> str | None:
    if text is None:
        return None
    data = text.encode("utf-8") if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()


# ---- the store -----------------------------------------------------------------------------------------------


@dataclass
class Cached:
    entry: dict[str, Any]
    path: Path  # where RockBot thinks the entry is: memory/{category}/{id}.json from the *cached* category


@dataclass
class Store:
    memory: Path
    mode: str
    index: dict[str, Cached] = field(default_factory=dict)
    partial: str | None = None  # why the load stopped early (the process keeps the partial index)

    def path_of(self, entry: dict[str, Any]) -> Path:
        category = entry.get("category")
        directory = self.memory if not category else self.memory.joinpath(*str(category).split("/"))
        return directory / f"{entry['id']}.json"

    def load(self) -> None:
        """EnsureIndexAsync: once per process."""
        for directory, _, files in os.walk(self.memory):
            for name in files:
                if not name.endswith(".json"):
                    continue
                path = Path(directory) / name
                try:
                    raw = json.loads(path.read_text(encoding="utf-8"))
                except ValueError:
                    print(f"Skipping malformed memory file: {path}", file=sys.stderr)
                    continue
                except OSError as exc:  # not a JsonException: the load ends here, the index stays partial
                    self.partial = f"{type(exc).__name__}: {exc}"
                    return
                entry = record_of(raw) if isinstance(raw, dict) else {}
                if not isinstance(entry.get("id"), str):
                    self.partial = f"{path}: no id"  # _index[null] throws: same as above
                    return
                self.index[entry["id"].casefold()] = Cached(entry, self.path_of(entry))

    def live(self) -> list[Cached]:
        return [c for c in self.index.values() if c.entry["archivedAt"] is None and not c.entry["supersededBy"]]

    @staticmethod
    def disk_sha(path: Path) -> str | None:
        """What the file holds now, as this serializer would write it (None: no file). A probe for the ledger only:
        RockBot never reads before it writes."""
        try:
            data = path.read_bytes()
        except OSError:
            return None
        try:
            raw = json.loads(data)
        except ValueError:
            return sha(data)
        return sha(serialize(record_of(raw))) if isinstance(raw, dict) else sha(data)

    def write(self, cached: Cached, entry: dict[str, Any], *, in_place: bool) -> tuple[str, str | None]:
        """Write ``entry`` where the cache says it lives; returns (text written, sha of the file replaced)."""
        text = serialize(entry)
        path = cached.path
        before = self.disk_sha(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        if in_place or self.mode == "inplace":
            with open(path, "w", encoding="utf-8") as out:  # File.WriteAllTextAsync: truncate, then write
                out.write(text)
        else:
            temp = path.parent / f".{entry['id']}.json.{uuid.uuid4().hex}.tmp"
            try:
                temp.write_text(text, encoding="utf-8")
                with contextlib.suppress(OSError):
                    os.chmod(temp, path.stat().st_mode & 0o7777)
                os.replace(temp, path)
            except BaseException:
                temp.unlink(missing_ok=True)
                raise
        self.index[entry["id"].casefold()] = Cached(entry, self.path_of(entry))
        return text, before


# ---- the agent ------------------------------------------------------------------------------------------------


class Agent:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.random = random.Random(args.seed)
        self.store = Store(Path(args.agent_dir) / "memory", args.mode)
        Path(args.ledger).parent.mkdir(parents=True, exist_ok=True)
        self.ledger = open(args.ledger, "a", encoding="utf-8")  # noqa: SIM115 - open for the process's life
        self.pod = os.environ.get("HOSTNAME", "local")
        self.stop_at: float | None = None
        self.writes = 0
        signal.signal(signal.SIGTERM, self._terminate)
        signal.signal(signal.SIGINT, self._terminate)

    def _terminate(self, signum: int, _frame: object) -> None:
        if self.stop_at is None:
            self.stop_at = time.monotonic() + self.args.linger
            self.log({"op": "sigterm", "signal": signum})

    def log(self, record: dict[str, Any]) -> None:
        line = {"t": datetime.now(UTC).isoformat(), "pid": os.getpid(), "pod": self.pod, **record}
        self.ledger.write(json.dumps(line, separators=(",", ":")) + "\n")
        self.ledger.flush()

    def run(self) -> int:
        self.store.load()
        loaded = {
            c.entry["id"]: {"rc": c.entry["reinforcementCount"], "archived": c.entry["archivedAt"] is not None}
            for c in self.store.index.values()
        }
        self.log({"op": "start", "mode": self.args.mode, "hostile": self.args.hostile, "partial": self.store.partial,
                  "loaded": loaded})  # fmt: skip
        interval = self.args.interval / (10 if self.args.hostile else 1)
        while self.stop_at is None or time.monotonic() < self.stop_at:
            if self.args.max_writes and self.writes >= self.args.max_writes:
                break
            self.one_write()
            self.writes += 1
            time.sleep(interval * self.random.uniform(0.5, 1.5))
        self.log({"op": "exit", "writes": self.writes})
        return 0

    def one_write(self) -> None:
        n = self.writes + 1
        if self.args.create_every and n % self.args.create_every == 0:
            self.create()
        elif self.args.archive_every and n % self.args.archive_every == 0:
            self.archive()
        elif self.args.hostile and self.random.random() < 0.3 and self.resurrect():
            pass
        else:
            live = self.store.live()
            if live:
                self.reinforce(self.random.choice(live), "reinforce")

    def reinforce(self, cached: Cached, op: str) -> None:
        """MemoryDeduplicator.Reinforce with a candidate that matched ``cached``, then SaveAsync."""
        old = cached.entry
        candidate_importance = round(self.random.choice((0.3, 0.5, 0.6, 0.7)), 2)
        entry = dict(old)
        entry["tags"] = list(old["tags"] or [])
        entry["importanceScore"] = max(float(old["importanceScore"] or 0.0), candidate_importance)
        entry["lastSeenAt"] = dotnet_time(datetime.now(UTC))
        entry["reinforcementCount"] = int(old["reinforcementCount"] or 1) + 1
        text, before = self.store.write(cached, entry, in_place=False)
        self._logged(op, entry, text, old, before, cached.path, delta=1)

    def create(self) -> None:
        now = dotnet_time(datetime.now(UTC))
        number = self.random.randrange(10**6, 10**7)
        entry = {
            "id": uuid.uuid4().hex[:12],
            "content": f"Caching-agent note {number}: the {self.pod} process saw ticket CA-{number} today.",
            "category": "agent-knowledge/notes",
            "tags": ["caching-agent"],
            "createdAt": now,
            "updatedAt": now,
            "metadata": None,
            "importanceScore": 0.5,
            "lastSeenAt": now,
            "reinforcementCount": 1,
            "verify": None,
            "supersededBy": None,
            "archivedAt": None,
            "archiveReason": None,
        }
        cached = Cached(entry, self.store.path_of(entry))
        text, before = self.store.write(cached, entry, in_place=False)
        self._logged("create", entry, text, None, before, cached.path, delta=0)

    def archive(self) -> None:
        """ArchiveAsync: in place at the cached path, from the cached copy."""
        live = self.store.live()
        if not live:
            return
        cached = self.random.choice(live)
        entry = dict(cached.entry, archivedAt=dotnet_time(datetime.now(UTC)), archiveReason="archived by the agent")
        text, before = self.store.write(cached, entry, in_place=True)
        self._logged("archive", entry, text, cached.entry, before, cached.path, delta=0)

    def resurrect(self) -> bool:
        """Hostile: find an entry archived on disk that the cache holds live, and reinforce the cached copy."""
        candidates = self.store.live()
        self.random.shuffle(candidates)
        for cached in candidates[:50]:
            try:
                on_disk = json.loads(cached.path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(on_disk, dict) and on_disk.get("archivedAt"):
                self.reinforce(cached, "resurrect")
                return True
        return False

    def _logged(
        self,
        op: str,
        entry: dict[str, Any],
        text: str,
        old: dict[str, Any] | None,
        before: str | None,
        path: Path,
        *,
        delta: int,
    ) -> None:
        cache_sha = sha(serialize(old)) if old is not None else None
        self.log(
            {
                "op": op,
                "id": entry["id"],
                "path": str(path.relative_to(self.store.memory)),
                "mode": "inplace" if op == "archive" else self.args.mode,
                "rc": entry["reinforcementCount"],
                "delta": delta,
                "lastSeenAt": entry["lastSeenAt"],
                "content": sha(entry["content"]),
                "sha": sha(text),
                "cacheSha": cache_sha,
                "beforeSha": before,
                "stale": before is not None and cache_sha is not None and before != cache_sha,
            }
        )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.agents.caching_agent", description=__doc__.splitlines()[0])
    parser.add_argument("agent_dir")
    parser.add_argument("--ledger", required=True, help="JSONL ledger of every write (outside memory/).")
    parser.add_argument("--mode", choices=("atomic", "inplace"), default="atomic")
    parser.add_argument("--interval", type=float, default=0.1, help="Seconds between writes (on average).")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--create-every", type=int, default=15, help="Every Nth write creates an entry (0: never).")
    parser.add_argument("--archive-every", type=int, default=0, help="Every Nth write archives one (0: never).")
    parser.add_argument("--hostile", action="store_true", help="Write 10x as often; write stale archived copies back.")
    parser.add_argument("--linger", type=float, default=0.0, help="Keep writing this long after SIGTERM.")
    parser.add_argument("--max-writes", type=int, default=0, help="Stop after N writes (0: until SIGTERM).")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    return Agent(parse_args(argv)).run()


if __name__ == "__main__":
    raise SystemExit(main())
