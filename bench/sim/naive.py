"""The seed's original consolidation, as a tiny applier on its own in-memory copy of the corpus.

Every cycle the whole live corpus is offered in one request; every id in the reply is trusted; all ``sourceIds``
and ``toDelete`` ids are hard-deleted first (no tombstone), then the merges are saved — a blank merge hits a
``continue`` after its sources are already gone. No gating, no fold, no coverage check, no floor, no archive.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bench.sim.adversary import Adversary, Tally, View
from bench.sim.world import MinedEntry


@dataclass
class NaiveEntry:
    id: str
    content: str
    category: str | None
    tags: tuple[str, ...]
    importance: float
    reinforcement: int

    def view(self) -> View:
        return View(self.id, self.content, self.category, self.tags, self.importance, self.reinforcement)


@dataclass
class NaiveOutcome:
    deleted: int = 0
    saved: int = 0
    blank_skipped: int = 0
    removed: list[NaiveEntry] = field(default_factory=list)
    modes: dict[str, str] = field(default_factory=dict)  # entry id -> the adversary's act that named it


class NaiveCorpus:
    def __init__(self) -> None:
        self.live: dict[str, NaiveEntry] = {}
        self._next = 0

    def add(self, mined: MinedEntry) -> None:
        self.live[mined.id] = NaiveEntry(
            mined.id, mined.content, mined.category, mined.tags, mined.importance, mined.reinforcement
        )

    def cycle(self, adversary: Adversary, cycle: int, tally: Tally) -> NaiveOutcome:
        offered = [e.view() for e in self.live.values()]
        decision = adversary.decide(cycle, offered)
        for mode, ids in decision.acts:
            tally.add(mode)
            tally.add("entries-acted-on", len(ids))
        outcome = self.apply(decision.as_reply())
        outcome.modes = {i: mode for mode, ids in decision.acts for i in ids}
        return outcome

    def apply(self, reply: dict[str, Any]) -> NaiveOutcome:
        outcome = NaiveOutcome()
        doomed: list[str] = []
        for save in reply["toSave"]:
            doomed += save.get("sourceIds", [])
        doomed += reply["toDelete"]
        for entry_id in doomed:  # delete everything up front (the seed's latent bug lives here)
            removed = self.live.pop(entry_id, None)
            if removed is not None:
                outcome.deleted += 1
                outcome.removed.append(removed)
        for save in reply["toSave"]:
            content = save.get("content") or ""
            if not content.strip():
                outcome.blank_skipped += 1
                continue
            self._next += 1
            new_id = f"naive{self._next:07x}"
            self.live[new_id] = NaiveEntry(
                new_id,
                content,
                save.get("category"),
                tuple(save.get("tags") or ()),
                float(save.get("importance") or 0.5),
                1,
            )
            outcome.saved += 1
        return outcome
