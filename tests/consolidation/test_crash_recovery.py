"""SIGKILL at every journal step of an apply, then recovery: no entry lost, no duplicate live successor."""

from __future__ import annotations

import json
import signal
import textwrap
from pathlib import Path

import pytest

from dreamkeeper.consolidation.cycle import recover
from dreamkeeper.consolidation.journal import Journal, journal_dir
from dreamkeeper.memory import MemoryStore
from dreamkeeper.memory.entry import CREATED_BY_CYCLE
from tests.consolidation import kill_child
from tests.consolidation.corpus import Seed, entry_files, write_corpus
from tests.consolidation.kill_child import KILL_HOOKS

SEEDS = [
    Seed("m1", "Rocky has a dog named Milo.", "people"),
    Seed("m2", "Rocky has a Sheltie named Milo.", "people"),
    Seed("c1", "Carl Franklin hosts .NET Rocks with Richard Campbell.", "people"),
    Seed("c2", "Carl Franklin records .NET Rocks in New London.", "people"),
    Seed("n1", "Scratch note: lunch was fine.", "observations", 0.1),
    Seed("k1", "Keep this one untouched.", "observations"),
]
PROPOSAL = {
    "toSave": [
        {"content": "Rocky has a dog — a Sheltie named Milo.", "sourceIds": ["m1", "m2"]},
        {
            "content": "Carl Franklin hosts .NET Rocks with Richard Campbell and records it in New London.",
            "sourceIds": ["c1", "c2"],
        },
    ],
    "toDelete": ["m1", "m2", "c1", "c2", "n1"],
}

# The child runs one real cycle and kills itself at the chosen point of the journal executor.
CHILD = (
    textwrap.dedent(
        """
        import asyncio, json, os, signal, sys
        from pathlib import Path
        from dreamkeeper.consolidation.cycle import CycleOptions, run_cycle
        from dreamkeeper.consolidation.settings import CycleSettings, DecaySettings
        from dreamkeeper.proposers import ScriptedProposer

        agent, kill_at, phase, proposal = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4])
        """
    )
    + KILL_HOOKS
    + textwrap.dedent(
        """
        # Decay off: this is the plan's journal (test_decay.py kills the decay journal's steps).
        settings = CycleSettings(min_interval_hours=0, exact_fold=False, decay=DecaySettings(enabled=False))
        options = CycleOptions(agent_dir=agent, settings=settings)
        asyncio.run(run_cycle(options, ScriptedProposer([proposal])))
        """
    )
)


def run_child(agent: Path, kill_at: int, phase: str) -> int:
    return kill_child.run_child(CHILD, str(agent), str(kill_at), phase, json.dumps(PROPOSAL))


def check_invariants(agent: Path) -> None:
    store = MemoryStore(agent / "memory")
    scan = store.scan()
    assert not scan.malformed, scan.malformed
    ids = {s.id for s in scan.entries}
    assert {s.id for s in SEEDS} <= ids, "an original entry file is missing"
    live_text = " ".join(s.entry.content for s in scan.live)
    # Every fact is live somewhere (only n1 may be archived as ephemeral).
    for needle in ("Milo", "Sheltie", "Richard Campbell", "New London", "Keep this one"):
        assert needle in live_text, needle
    successors = [s for s in scan.live if s.entry.meta(CREATED_BY_CYCLE)]
    contents = [s.entry.content for s in successors]
    assert len(contents) == len(set(contents)), f"duplicate live successor: {contents}"
    for s in scan.archived:
        reason = s.entry.archive_reason or ""
        if reason.startswith("merged into "):
            target = store.get(reason.removeprefix("merged into "))
            assert target is not None and target.entry.is_live, f"{s.id} archived into a missing successor"


def count_steps(tmp_path: Path) -> int:
    agent = tmp_path / "probe"
    write_corpus(agent, SEEDS)
    assert run_child(agent, 10_000, "before") == 0
    (path,) = journal_dir(agent).glob("*.jsonl")
    return len(Journal.load(path).header.steps)


@pytest.mark.parametrize("phase", ["before", "after"])
def test_sigkill_at_every_journal_step_then_recover(tmp_path: Path, phase: str) -> None:
    steps = count_steps(tmp_path)
    assert steps >= 8  # 2 creates, 4 merge archives, 1 ephemeral archive, stamps
    for kill_at in range(steps):
        agent = tmp_path / f"{phase}-{kill_at}"
        write_corpus(agent, SEEDS)
        code = run_child(agent, kill_at, phase)
        assert code == -signal.SIGKILL, f"child did not die at step {kill_at} ({code})"
        check_invariants(agent)  # even before recovery nothing is lost
        recovered = recover(agent, agent / "memory")
        assert len(recovered) == 1
        check_invariants(agent)
        assert all(Journal.load(p).complete for p in journal_dir(agent).glob("*.jsonl"))
        # Recovery finished the plan: both merges landed, exactly once.
        store = MemoryStore(agent / "memory")
        assert len([s for s in store.scan().live if s.entry.meta(CREATED_BY_CYCLE)]) == 2
        assert {"m1", "m2", "c1", "c2"} <= {s.id for s in store.scan().archived}
        assert recover(agent, agent / "memory") == []  # idempotent
        assert entry_files(agent) >= {s.id for s in SEEDS}
