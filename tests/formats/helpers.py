"""Shared helpers for the format tests: agent directories, and a cycle's changes made the way apply makes them."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from dreamkeeper.formats.entries import HERMES_SEPARATOR
from dreamkeeper.formats.layout import units_root
from dreamkeeper.memory import (
    CREATED_BY_CYCLE,
    MERGED_FROM,
    REASON_EPHEMERAL,
    REASON_MERGED_INTO,
    Entry,
    MemoryStore,
    StoredEntry,
)

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

OPENCLAW_MEMORY = """# Memory

## People

- Franklin Oduya is the on-call lead; his phone is +1 386-299-4605.
- Franklin Oduya, on-call lead, phone +1 386-299-4605, prefers Slack.
- Priya prefers tea.

## Projects

The Hydra migration ships 2026-12-15.
"""
DAY_1 = "# 2026-11-29\n\n- Met Franklin about the VPN outage (ticket INC-4411).\n"
DAY_2 = "# 2026-11-30\n\n- Met Franklin about the VPN outage, ticket INC-4411.\n- Priya's birthday is 2026-03-02.\n"


def openclaw_agent(tmp_path: Path) -> Path:
    agent = tmp_path / "openclaw"
    workspace = agent / "workspace"
    (workspace / "memory" / ".dreams").mkdir(parents=True)
    (workspace / "MEMORY.md").write_text(OPENCLAW_MEMORY, encoding="utf-8")
    (workspace / "memory" / "2026-11-29.md").write_text(DAY_1, encoding="utf-8")
    (workspace / "memory" / "2026-11-30.md").write_text(DAY_2, encoding="utf-8")
    (workspace / "memory" / ".dreams" / "state.json").write_text("{}", encoding="utf-8")
    (workspace / "DREAMS.md").write_text("# Dream Diary\n\n- not a unit\n", encoding="utf-8")
    return agent


def hermes_agent(tmp_path: Path, memory: list[str] | None = None, user: list[str] | None = None) -> Path:
    agent = tmp_path / "hermes"
    memories = agent / "memories"
    memories.mkdir(parents=True)
    memory = (
        memory
        if memory is not None
        else [
            "User's server is nas-02 at 10.0.10.223.",
            "The NAS nas-02 has IP 10.0.10.223 and runs ZFS.",
            "Deploys go through GitHub Actions.",
        ]
    )
    user = user if user is not None else ["Name: Priya Raman.", "Prefers terse answers."]
    (memories / "MEMORY.md").write_text(HERMES_SEPARATOR.join(memory), encoding="utf-8")
    (memories / "USER.md").write_text(HERMES_SEPARATOR.join(user), encoding="utf-8")
    return agent


def unit_store(agent: Path) -> MemoryStore:
    units_root(agent).mkdir(parents=True, exist_ok=True)
    return MemoryStore(units_root(agent))


def record_with(store: MemoryStore, needle: str, *, live: bool | None = True) -> StoredEntry:
    found = [s for s in store.scan().entries if needle in s.entry.content and (live is None or s.entry.is_live == live)]
    assert len(found) == 1, [s.entry.content for s in found]
    return found[0]


def merge(
    store: MemoryStore,
    sources: list[StoredEntry],
    text: str,
    cycle: str = "c1",
    successor_id: str = "5ucc0000aaaa",
    category: str = "memory",
) -> Entry:
    """What apply does for one merge: the successor created first, then each source archived."""
    successor = Entry(
        id=successor_id,
        content=text,
        category=category,
        importance_score=0.6,
        metadata={CREATED_BY_CYCLE: cycle, MERGED_FROM: ",".join(s.id for s in sources)},
    )
    store.create(successor)
    for source in sources:
        current = store.require(source.id)
        store.archive(current, REASON_MERGED_INTO + successor.id, NOW, cycle)
    return successor


def prune(store: MemoryStore, stored: StoredEntry, cycle: str = "c1") -> None:
    store.archive(store.require(stored.id), REASON_EPHEMERAL, NOW, cycle)
