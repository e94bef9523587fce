"""Reading a caching agent's ledger and checking the corpus against it (test infrastructure).

What the tests ask of a corpus after cycles ran while the agent wrote (issue 14, "Must show"):

* ``overlaps``: no agent write and no agent process lifetime inside a cycle's window (startedAt..finishedAt of
  its report) — never two writers.
* ``CorpusCheck``, against the corpus as it was before the agent started (``snapshot``):
  * ``resurrected``: entries a cycle archived (its journal says so) that are live again;
  * ``lost``: agent writes that are neither live (same content, reinforcement and lastSeenAt at least what the
    agent wrote), nor carried into a live successor (following "merged into" archives, and a stale copy's
    "stale write-back; merged into"), nor kept in an archive;
  * ``reinforcement``: live entries whose reinforcementCount differs from the truth: the count before the test,
    plus every increment the agent really made, plus what merges and folds carried in from their sources
    (each source once).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from dreamkeeper.memory import MemoryStore, StoredEntry, successor_in

Record = dict[str, Any]


def when(value: str | None) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def read(path: Path) -> list[Record]:
    """Every complete line (a process killed mid-line leaves a torn last one, ignored)."""
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return records


def read_all(directory: Path) -> list[Record]:
    """The ledgers of every agent process (one file per pod), in time order."""
    records = [r for path in sorted(directory.glob("*.jsonl")) for r in read(path)]
    return sorted(records, key=lambda r: r["t"])


WRITE_OPS = ("reinforce", "resurrect", "create", "archive")


def writes(records: list[Record]) -> list[Record]:
    return [r for r in records if r["op"] in WRITE_OPS]


@dataclass(frozen=True)
class Lifetime:
    pod: str
    pid: int
    start: datetime
    end: datetime  # its exit record, else its last record (killed)
    exited: bool


def lifetimes(records: list[Record]) -> list[Lifetime]:
    by_process: dict[tuple[str, int], list[Record]] = defaultdict(list)
    for r in records:
        by_process[(r["pod"], r["pid"])].append(r)
    out = []
    for (pod, pid), rs in by_process.items():
        start = next((r for r in rs if r["op"] == "start"), rs[0])
        exit_ = next((r for r in rs if r["op"] == "exit"), None)
        end = exit_ or rs[-1]
        out.append(Lifetime(pod, pid, when(start["t"]), when(end["t"]), exit_ is not None))  # type: ignore[arg-type]
    return sorted(out, key=lambda x: x.start)


@dataclass(frozen=True)
class CycleWindow:
    cycle_id: str
    started: datetime
    finished: datetime
    result: str


def cycle_windows(agent_dir: Path) -> list[CycleWindow]:
    out = []
    for path in sorted((agent_dir / ".dreamkeeper" / "cycles").glob("*.json")):
        report = json.loads(path.read_text(encoding="utf-8"))
        started, finished = when(report.get("startedAt")), when(report.get("finishedAt"))
        if started is not None and finished is not None:
            out.append(CycleWindow(report["cycleId"], started, finished, report.get("result", "")))
    return sorted(out, key=lambda c: c.started)


def overlaps(records: list[Record], windows: list[CycleWindow]) -> list[str]:
    """Agent writes, and agent process lifetimes, that intersect a cycle's window."""
    problems = []
    for window in windows:
        for w in writes(records):
            t = when(w["t"])
            assert t is not None
            if window.started <= t <= window.finished:
                problems.append(f"agent {w['pod']} wrote {w['id']} at {w['t']} during cycle {window.cycle_id}")
        for life in lifetimes(records):
            if life.start <= window.finished and life.end >= window.started:
                problems.append(
                    f"agent {life.pod}/{life.pid} ran {life.start.isoformat()}..{life.end.isoformat()} across cycle "
                    f"{window.cycle_id} {window.started.isoformat()}..{window.finished.isoformat()}"
                )
    return problems


# ---- the corpus -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    """The corpus before the agent started: reinforcement per id (live and archived)."""

    reinforcement: dict[str, int]

    @classmethod
    def of(cls, memory: Path) -> Snapshot:
        return cls({s.id: s.entry.reinforcement_count for s in MemoryStore(memory).scan().entries})


def cycle_archives(agent_dir: Path) -> dict[str, str]:
    """id -> archive reason, for every archive a cycle's journal records as done."""
    done: dict[str, str] = {}
    for path in sorted((agent_dir / ".dreamkeeper" / "journal").glob("*.jsonl")):
        lines = path.read_text(encoding="utf-8").splitlines()
        header = json.loads(lines[0])
        outcomes: dict[int, str] = {}
        for line in lines[1:]:
            try:
                record = json.loads(line)
            except ValueError:
                break
            if "step" in record:
                outcomes[int(record["step"])] = str(record["outcome"])
        for index, step in enumerate(header["steps"]):
            if step["op"] == "archive" and outcomes.get(index) == "done":
                done[step["id"]] = step.get("reason") or ""
    return done


@dataclass
class CorpusCheck:
    resurrected: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    reinforcement: list[str] = field(default_factory=list)
    agent_increments: int = 0
    checked_writes: int = 0

    @property
    def ok(self) -> bool:
        return not (self.resurrected or self.lost or self.reinforcement)

    def summary(self) -> str:
        parts = [f"{len(self.resurrected)} resurrected", f"{len(self.lost)} lost", f"{len(self.reinforcement)} off"]
        detail = (self.resurrected + self.lost + self.reinforcement)[:12]
        return ", ".join(parts) + (": " + "; ".join(detail) if detail else "")


def check_corpus(agent_dir: Path, before: Snapshot, records: list[Record]) -> CorpusCheck:
    memory = agent_dir / "memory"
    final: dict[str, StoredEntry] = {s.id: s for s in MemoryStore(memory).scan().entries}
    archives = cycle_archives(agent_dir)
    check = CorpusCheck()

    # A cycle archived it, and it is live now: the agent wrote its cached copy back.
    check.resurrected = sorted(
        f"{i} (archived: {reason})" for i, reason in archives.items() if i in final and not final[i].entry.is_archived
    )

    sources: dict[str, list[str]] = defaultdict(list)
    for entry_id, reason in archives.items():  # the last archive of each id (a stale copy's names the live end)
        if (successor := successor_in(reason)) is not None:
            sources[successor].append(entry_id)
    agent_writes = writes(records)
    increments = Counter(w["id"] for w in agent_writes if w["delta"])
    created = {w["id"] for w in agent_writes if w["op"] == "create"}
    check.agent_increments = sum(increments.values())

    memo: dict[str, int] = {}
    visiting: set[str] = set()

    def truth(entry_id: str) -> int:
        """The merge arithmetic of fold.py and validate.py (each member counted at least once), over the truth."""
        if entry_id in visiting:
            # A merged into B, and later B into A: only possible when an archived entry came back live (a stale
            # write-back) and was merged again. Its count is then counted twice; say so, count it once here.
            check.reinforcement.append(f"{entry_id}: merged into its own successor (an archive came back and merged)")
            return 0
        if entry_id not in memo:
            visiting.add(entry_id)
            carried = [max(1, truth(s)) for s in sources.get(entry_id, ())]
            visiting.discard(entry_id)
            if entry_id in before.reinforcement or entry_id in created:  # an entry of the agent (a fold survivor)
                own = before.reinforcement.get(entry_id, 1) + increments[entry_id]
                memo[entry_id] = (max(1, own) + sum(carried)) if carried else own
            else:  # a successor a cycle created from its sources
                memo[entry_id] = sum(carried) + increments[entry_id]
        return memo[entry_id]

    for entry_id, stored in sorted(final.items()):
        if stored.entry.is_archived:
            continue
        expected = truth(entry_id)
        if stored.entry.reinforcement_count != expected:
            actual = stored.entry.reinforcement_count
            check.reinforcement.append(f"{entry_id}: reinforcementCount {actual}, truth {expected}")

    last: dict[str, Record] = {}
    for w in agent_writes:
        last[w["id"]] = w
    check.checked_writes = len(last)
    for entry_id, w in sorted(last.items()):
        why = _preserved(entry_id, w, final, archives)
        if why is not None:
            check.lost.append(f"{w['op']} of {entry_id} at {w['t']} (rc {w['rc']}): {why}")
    return check


def _preserved(entry_id: str, w: Record, final: dict[str, StoredEntry], archives: dict[str, str]) -> str | None:
    """None when the agent's last write to ``entry_id`` survives; else what happened to it."""
    stored = final.get(entry_id)
    if stored is None:
        return "the file is gone"
    seen = when(w["lastSeenAt"])
    entry = stored.entry
    if not entry.is_archived or w["op"] == "archive":
        if entry.reinforcement_count < w["rc"]:
            return f"reinforcementCount {entry.reinforcement_count} < {w['rc']}"
        if seen is not None and entry.seen_at < seen:
            return f"lastSeenAt {entry.seen_at.isoformat()} < {w['lastSeenAt']}"
        return None
    # Archived by a cycle after the agent's write: carried into a successor (transitively), or kept in the archive.
    hops, current = 0, entry_id
    while hops < 32:
        reason = archives.get(current, final[current].entry.archive_reason if current in final else "") or ""
        successor = successor_in(reason)
        if successor is None:
            archived = final.get(current)
            if archived is not None and current == entry_id and archived.entry.reinforcement_count >= w["rc"]:
                return None  # pruned (or archived) with the agent's write in the archived copy
            return f"archived ({reason or 'no reason'}) without the write"
        target = final.get(successor)
        if target is None:
            return f"its successor {successor} is gone"
        if not target.entry.is_archived:
            if seen is not None and target.entry.seen_at < seen:
                return f"successor {successor} lastSeenAt {target.entry.seen_at.isoformat()} < {w['lastSeenAt']}"
            return None
        current, hops = successor, hops + 1
    return "a merge chain too long to follow"
