"""A small agent corpus shared by the proposer cycle and CLI tests: two near-duplicate pairs and two singles."""

from __future__ import annotations

from typing import Any

from tests.consolidation.corpus import Seed

MILO = "Milo the Sheltie was adopted from Prairie Rescue in 2019."
MILO_2 = "Milo, the Sheltie, was adopted from Prairie Rescue in 2019!"
ALLEN = "Allen Conway works at Xebia as Principal Consultant, phone +1 386-299-4605."
ALLEN_2 = "Allen Conway now works at Xebia as a Principal Consultant; phone +1 386-299-4605."
SEEDS = [
    Seed("milo1", MILO, "pets"),
    Seed("milo2", MILO_2, "pets"),
    Seed("allen1", ALLEN, "people/allen"),
    Seed("allen2", ALLEN_2, "people/allen"),
    Seed("solo1", "The Blazor online class runs every Friday at 12:30 PM Central.", "project-context/blazor"),
    Seed("solo2", "Status: waiting on the Tripit export for the Las Vegas trip.", "active-plans/travel"),
]
ALL_IDS = {s.id for s in SEEDS}
EMPTY: dict[str, list[Any]] = {"toDelete": [], "toSave": []}


def merge(content: str, *ids: str, category: str | None = None) -> dict[str, Any]:
    return {"content": content, "category": category, "tags": [], "sourceIds": list(ids), "importance": None}


GOOD = {"toDelete": [], "toSave": [merge(MILO, "milo1", "milo2", category="pets"), merge(ALLEN, "allen1", "allen2")]}
