"""The invariant between the unit records and the agent's files, checked after a render (and by the tests).

* every unit in the agent's files is spoken for by exactly one record: a live one, or an archived one that is
  still in its file (an append-only log's history, or a removal the render could not do yet);
* every live record is in its file, where its identity says (or waits to be written, with the reason the render
  gave);
* every record that is not in a file is archived with its text: nothing the agent or a cycle wrote is only in
  memory, nothing is only in a file nobody speaks for.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from dreamkeeper.formats import records as rec
from dreamkeeper.formats.layout import Unreadable, list_files, read_file
from dreamkeeper.formats.profile import Profile
from dreamkeeper.formats.units import UnitKey
from dreamkeeper.memory import MemoryStore


@dataclass
class Consistency:
    units: int = 0
    records: int = 0
    unclaimed: list[str] = field(default_factory=list)  # units in a file no record speaks for
    doubly_claimed: list[str] = field(default_factory=list)  # units two records claim
    missing: list[str] = field(default_factory=list)  # live records whose unit is not in its file
    pending: list[str] = field(default_factory=list)  # live records waiting to be written

    @property
    def problems(self) -> list[str]:
        return [
            *(f"unit in a file with no record: {x}" for x in self.unclaimed),
            *(f"unit claimed by several records: {x}" for x in self.doubly_claimed),
            *(f"live record not in its file: {x}" for x in self.missing),
        ]


def consistency(agent_dir: Path, profile: Profile, store: MemoryStore) -> Consistency:
    result = Consistency()
    present: Counter[UnitKey] = Counter()
    unreadable: set[str] = set()
    for agent_file in list_files(agent_dir, profile):
        read = read_file(agent_file, profile)
        if isinstance(read, Unreadable):
            unreadable.add(agent_file.relative)
            continue
        for unit in read.units:
            present[unit.key] += 1
    result.units = sum(present.values())
    claims: Counter[UnitKey] = Counter()
    for stored in store.scan().entries:
        result.records += 1
        entry = stored.entry
        key = rec.key_of(entry)
        if entry.is_live and rec.needs_placing(entry):
            result.pending.append(entry.id)
            continue
        if key is None or rec.placement_of(entry) != rec.IN_FILE:
            continue
        claims[key] += 1
        if key.file in unreadable:
            continue
        if key not in present and entry.is_live:
            result.missing.append(f"{entry.id} ({key.describe()})")
    result.unclaimed = [k.describe() for k in present if claims[k] == 0]
    result.doubly_claimed = [k.describe() for k, n in claims.items() if n > 1]
    return result


__all__ = ["Consistency", "consistency"]
