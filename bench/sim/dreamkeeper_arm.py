"""The dreamkeeper arm: the real engine (``run_cycle``) on a real store, with the adversary behind a
ScriptedProposer. The arm is measured from the store as read back after each cycle, not from the cycle's report."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.sim.adversary import Adversary, Tally, View
from bench.sim.world import MinedEntry
from dreamkeeper.consolidation import validate
from dreamkeeper.consolidation.cycle import CycleOptions, CycleOutcome, run_cycle
from dreamkeeper.consolidation.proposal import Batch, ProposalRequest, RepairRequest
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.memory import REASON_EPHEMERAL, Entry, MemoryStore
from dreamkeeper.proposers import ScriptedProposer


def to_view(entry: Entry) -> View:
    return View(
        entry.id, entry.content, entry.category, tuple(entry.tags), entry.importance_score, entry.reinforcement_count
    )


def against_adversary(
    options: CycleOptions, adversary: Adversary, tally: Tally, cycle: int, next_id: Callable[[], str]
) -> CycleOutcome:
    """One cycle of the real engine with the adversary as its model (both arms of the year simulation use this)."""

    def script(batch: Batch, request: ProposalRequest) -> dict[str, Any]:
        mine = batch.ids
        elsewhere = [
            to_view(o.entry)
            for b in request.batches
            if b.index != batch.index
            for o in b.entries
            if o.entry.id not in mine
        ]
        decision = adversary.decide(cycle, [to_view(o.entry) for o in batch.entries], elsewhere)
        for mode, ids in decision.acts:
            tally.add(mode)
            tally.add("entries-acted-on", len(ids))
        return decision.as_reply()

    def repair(request: RepairRequest) -> str | None:
        tally.add("repair-asked")
        return adversary.repair(cycle, request.merge.content, request.missing)

    # Successor ids are uuid4 in the engine (as in RockBot); seeded here, for this call only, so a run is
    # reproducible: ids decide file order, hence batch composition, hence which family members the adversary
    # sees together.
    engine_ids = validate.new_entry_id
    validate.new_entry_id = next_id
    try:
        return asyncio.run(run_cycle(options, ScriptedProposer(script, repair=repair)))
    finally:
        validate.new_entry_id = engine_ids


@dataclass
class ArmCycle:
    outcome: CycleOutcome
    live: dict[str, str]  # id -> content, read back from disk
    live_views: dict[str, View]
    archived: int
    ephemeral_texts: list[tuple[str, str | None]] = field(default_factory=list)  # archived ephemeral this cycle
    stored: dict[str, str] = field(default_factory=dict)  # id -> content of every entry on disk, archived ones too
    purged: list[tuple[str, str | None]] = field(default_factory=list)  # (content, category) gone from disk this cycle


class DreamkeeperArm:
    def __init__(self, agent_dir: Path, settings: CycleSettings, adversary: Adversary, tally: Tally) -> None:
        self.agent_dir = agent_dir
        self.memory = agent_dir / "memory"
        self.memory.mkdir(parents=True, exist_ok=True)
        self.store = MemoryStore(self.memory)
        self.settings = settings
        self.adversary = adversary
        self.tally = tally
        self._ids = random.Random(f"successor-ids-{adversary.seed}")
        self._on_disk: dict[str, tuple[str, str | None]] = {}  # id -> (content, category) after the last cycle
        self._archived: set[str] = set()  # ids archived at the last observation

    def _next_id(self) -> str:
        return f"{self._ids.getrandbits(48):012x}"

    def add(self, mined: MinedEntry) -> bool:
        """Write a mined entry; True: it is in the store (RockBot's format takes every entry)."""
        self._on_disk[mined.id] = (mined.content, mined.category)
        self.store.create(
            Entry(
                id=mined.id,
                content=mined.content,
                category=mined.category,
                tags=list(mined.tags),
                created_at=mined.created_at,
                updated_at=mined.created_at,
                last_seen_at=mined.created_at,
                importance_score=mined.importance,
                reinforcement_count=mined.reinforcement,
                metadata={"subjectTime": mined.subject_time} if mined.subject_time else None,
            )
        )
        return True

    def cycle(self, cycle: int, now: datetime) -> ArmCycle:
        return self.observe(self.run_engine(cycle, now))

    def run_engine(self, cycle: int, now: datetime, *, trust_clock: bool = False) -> CycleOutcome:
        """One cycle of the real engine against the adversary (no observation: ``observe`` reads the store)."""

        # force: the engine stamps lastCompletedAt with the wall clock, not CycleOptions.now, so with a simulated
        # clock the minimum-interval check compares simulated time with real time. Cycles are 12 h apart anyway.
        options = CycleOptions(
            agent_dir=self.agent_dir, settings=self.settings, now=now, force=True, trust_clock=trust_clock
        )
        return against_adversary(options, self.adversary, self.tally, cycle, self._next_id)

    def reseed_ids(self, label: str) -> None:
        """A fresh id stream (after a killed child drew ids this process never saw: they may be on disk)."""
        self._ids = random.Random(f"successor-ids-{self.adversary.seed}-{label}")

    def observe(self, outcome: CycleOutcome) -> ArmCycle:
        """The store as read back after a cycle (and whatever else ran in its slot)."""
        scan = self.store.scan()
        on_disk = {s.id: (s.entry.content, s.entry.category) for s in scan.entries}
        purged = [text for entry_id, text in self._on_disk.items() if entry_id not in on_disk]
        self._on_disk = on_disk
        live = {s.id: s.entry.content for s in scan.live}
        views = {s.id: to_view(s.entry) for s in scan.live}
        # Pruned since the last observation, by whichever run pruned it (a killed cycle's journal is finished by
        # the next one's recovery, under the killed cycle's id).
        ephemeral = [
            (s.entry.content, s.entry.category)
            for s in scan.archived
            if s.entry.archive_reason == REASON_EPHEMERAL and s.id not in self._archived
        ]
        self._archived = {s.id for s in scan.archived}
        stored = {entry_id: content for entry_id, (content, _) in on_disk.items()}
        return ArmCycle(outcome, live, views, len(scan.archived), ephemeral, stored, purged)
