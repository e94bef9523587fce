"""Property: whatever an adversarial proposer says, over any number of cycles, every specific of every entry is
still in a live entry or in an entry archived with the logged ephemeral reason, and no file is ever deleted."""

from __future__ import annotations

import asyncio
import random
from datetime import timedelta
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dreamkeeper.consolidation.cycle import CycleOptions, run_cycle
from dreamkeeper.consolidation.proposal import Batch, Proposal, ProposalRequest
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.coverage import CoverageIndex, Vocabulary, extract_specifics
from dreamkeeper.memory import REASON_EPHEMERAL, MemoryStore
from dreamkeeper.proposers import ScriptedProposer
from tests.consolidation.corpus import BASE_TIME, Seed, entry_files, write_corpus

FACTS = [
    "Allen Conway works at Xebia as Principal Consultant.",
    "Allen Conway's email is Allen.Conway@xebia.com.",
    "Trish Roberts runs PWOP Productions in Las Vegas.",
    "Rockford Duane Lhotka uses timezone America/Chicago.",
    "The BlazorHol class starts on 2026-08-19 in Atlanta.",
    "Carl Franklin hosts .NET Rocks; call +1 386-299-4605.",
    "Tripit holds the itinerary for the VS Live trip.",
    "Rocky has a Sheltie named Milo.",
    "Rocky has a dog named Milo.",
    "The user prefers concise status updates.",
    "Estimated taxes are due 2026-09-10 for Marimer LLC.",
    "Matt and Lacey join the Friday 12:30 PM call.",
    "Lunch was fine today.",
    "IMAP delivery is configured for the rockbotagent account.",
]
CATEGORIES = ["people", "project-context", "user-preferences", "observations", "agent-knowledge/infrastructure"]


class Adversary:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def __call__(self, batch: Batch, request: ProposalRequest) -> Proposal | dict[str, object] | str | None:
        rng = self.rng
        roll = rng.random()
        if roll < 0.1:
            return None
        if roll < 0.15:
            return "{ garbage"
        ids = [o.entry.id for o in batch.entries]
        texts = {o.entry.id: o.entry.content for o in batch.entries}
        saves = []
        for _ in range(rng.randint(0, 3)):
            sources = rng.sample(ids, k=min(len(ids), rng.randint(1, 4)))
            mode = rng.choice(["good", "lossy", "drop-word", "blank", "invented"])
            if mode == "good":
                content = " ".join(texts[s] for s in sources)
            elif mode == "lossy":
                content = texts[sources[0]]
            elif mode == "drop-word":
                words = " ".join(texts[s] for s in sources).split()
                words.pop(rng.randrange(len(words)))
                content = " ".join(words)
            elif mode == "blank":
                content = " "
            else:
                content = "Something vague about people."
            if rng.random() < 0.3:
                sources.append("invented-" + str(rng.randrange(1000)))
            saves.append({"content": content, "sourceIds": sources, "importance": rng.random()})
        deletes = [*rng.sample(ids, k=rng.randint(0, len(ids))), "ghost-" + str(rng.randrange(99))]
        return {"toSave": saves, "toDelete": deletes}


def _specific_survives(store: MemoryStore, originals: list[tuple[str, str | None]]) -> list[str]:
    vocabulary = Vocabulary()
    index = CoverageIndex()
    for stored in store.scan().entries:
        entry = stored.entry
        if entry.is_live or entry.archive_reason == REASON_EPHEMERAL:
            index.add(entry.content)
    missing = []
    for text, category in originals:
        for specific in extract_specifics(text, category, vocabulary):
            if not index.covers(specific):
                missing.append(specific.text)
    return missing


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), cycles=st.integers(1, 4), size=st.integers(2, 10))
def test_no_specific_is_ever_lost(tmp_path_factory: object, seed: int, cycles: int, size: int) -> None:
    rng = random.Random(seed)
    agent = Path(tmp_path_factory.mktemp("adv"))  # type: ignore[attr-defined]
    seeds = [
        Seed(f"e{i}", rng.choice(FACTS), rng.choice(CATEGORIES), round(rng.random(), 2), rng.randint(1, 8))
        for i in range(size)
    ]
    write_corpus(agent, seeds)
    originals = [(s.content, s.category) for s in seeds]
    written = {s.id for s in seeds}
    store = MemoryStore(agent / "memory")
    for n in range(cycles):
        options = CycleOptions(
            agent_dir=agent,
            settings=CycleSettings(min_interval_hours=0, retention_days=0, batch_max_entries=rng.randint(2, 8)),
            now=BASE_TIME + timedelta(days=3 * n),
        )
        outcome = asyncio.run(run_cycle(options, ScriptedProposer(Adversary(rng), repair=lambda r: None)))
        assert outcome.report.hard_deletes == 0
        assert outcome.report.specifics_lost == 0
        written |= {s.id for s in store.scan().entries}
        # mining adds a restatement now and then
        extra = Seed(f"mined{n}", rng.choice(FACTS), rng.choice(CATEGORIES))
        write_corpus(agent, [extra])
        originals.append((extra.content, extra.category))
        written.add(extra.id)
        assert _specific_survives(store, originals) == []
    assert entry_files(agent) >= written  # no file was deleted, ever
