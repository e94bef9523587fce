"""The purge's last-record rule: an archived entry is hard-deleted only when every specific it holds is still said by
some live entry (or it holds none). Otherwise it is the last record of something and stays archived, counted, and
``dreamkeeper memory list --archived`` says what it is the last record of.

RockBot's purge (``RunArchivePurgePassAsync``, DreamService.cs @05346ff0; MemoryArchiveTests @a1d39992) deletes every
entry archived before the retention cutoff that is below the high-value floor, with no other check: an ephemeral
prune whose specifics existed nowhere else (the seed's Trish Roberts, PWOP Productions, Las Vegas) was only lost 90
days later instead of at once. This rule lives here rather than in ``memory``: it needs the coverage package
(memory ← coverage ← consolidation); the store's purge takes it as a ``keep`` rule.

The check is the census's coverage (whole tokens, date spellings, ...) asked of each live text on its own, found
through a cheap index of word runs: sound (nothing is deleted while a live text still lacks one of its specifics),
and never more than a few inventories per specific. A specific said only *jointly* by two live texts (a month name
credited by dates in both) counts as absent: the entry is kept, never wrongly deleted.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from dreamkeeper.consolidation.declines import later
from dreamkeeper.coverage import Inventory, Specific, Vocabulary, extract_specifics, fold, load_vocabulary
from dreamkeeper.memory import HELD_FOR, HELD_IMPORTANCE, Entry, HighValueFloor, StoredEntry

log = logging.getLogger(__name__)

# Runs of digits and runs of letters, apart: any text covering a specific holds its probe runs among these (a number
# is found inside "DL393", so "DL393" must give "393" a run of its own).
_RUN = re.compile(r"\d+|[^\W\d_]+")
VERIFY_PER_SPECIFIC = 64  # live texts checked for one specific before it counts as absent (the entry is kept)
LAST_RECORD = "last record of"


def runs(text: str) -> set[str]:
    return set(_RUN.findall(fold(text)))


def probe_sets(specific: Specific) -> list[frozenset[str]]:
    """Runs a live text covering ``specific`` on its own must contain, strictest first (filters, never the verdict).

    The runs of its key first, then of its text as written (a phone's key is its digits run together, which no text
    writes); a date, or a month name that stood in dates, may be respelled ("2026-08-19" is kept by "August 19,
    2026"), so those are then looked for by their year alone."""
    exact = frozenset(_RUN.findall(specific.key))
    written = frozenset(_RUN.findall(fold(specific.text)))
    sets = [s for s in dict.fromkeys((exact, written)) if s]
    if specific.kind == "date" or specific.date_contexts:
        years = {p for p in _RUN.findall(specific.key) if len(p) == 4 and p.isdigit()}
        years |= {str(d.year) for d in specific.date_contexts if d.year is not None}
        if len(years) == 1 and frozenset(years) not in sets:
            sets.append(frozenset(years))
    return sets


@dataclass
class LastRecords:
    """The live corpus, asked whether it still says each specific of an archived entry."""

    texts: Sequence[str] | Callable[[], Sequence[str]]  # the live entries' texts, or how to list them when asked
    vocabulary: Vocabulary
    _index: dict[str, list[int]] | None = None
    _inventories: dict[int, Inventory] = field(default_factory=dict)

    @classmethod
    def of(cls, entries: Iterable[Entry], vocabulary: Vocabulary) -> LastRecords:
        return cls([e.content for e in entries if e.is_live], vocabulary)

    @classmethod
    def of_stored(cls, stored: Sequence[StoredEntry], vocabulary: Vocabulary) -> LastRecords:
        """Over a scan's entries, listed only when first asked: a cycle with no archived entry due never asks, and
        the list was a pass over the whole corpus (``stored`` must not change meanwhile: a scan's list does not)."""
        return cls(lambda: [s.entry.content for s in stored if s.entry.is_live], vocabulary)

    @property
    def live(self) -> Sequence[str]:
        texts = self.texts
        if callable(texts):
            texts = self.texts = texts()
        return texts

    def missing(self, entry: Entry) -> list[str]:
        """The specifics of ``entry`` no live entry says (first spelling each, in order): empty when it may go."""
        specifics = extract_specifics(entry.content, entry.category, self.vocabulary)
        if not specifics:
            return []
        self._build([entry])
        return [s.text for s in specifics if not self._said(s)]

    def keep(self, candidates: Sequence[StoredEntry]) -> dict[str, str]:
        """The store's ``keep`` rule: id -> why, for each candidate that is the last record of something."""
        self._build([s.entry for s in candidates])
        kept: dict[str, str] = {}
        for stored in candidates:
            missing = self.missing(stored.entry)
            if missing:
                kept[stored.id] = f"{LAST_RECORD} {', '.join(missing)}"
        return kept

    def _build(self, entries: Sequence[Entry]) -> None:
        """Index the live texts by the probe runs of these entries' specifics (once per new probe set)."""
        wanted: set[str] = set()
        for entry in entries:
            for specific in extract_specifics(entry.content, entry.category, self.vocabulary):
                for probe in probe_sets(specific):
                    wanted |= probe
        if self._index is not None and wanted <= self._index.keys():
            return
        index: dict[str, list[int]] = defaultdict(list)
        known = set(self._index) if self._index is not None else set()
        wanted |= known
        for position, text in enumerate(self.live):
            for run in runs(text) & wanted:
                index[run].append(position)
        for run in wanted:
            index.setdefault(run, [])
        self._index = dict(index)
        log.debug("purge: indexed %d live text(s) by %d probe run(s)", len(self.live), len(wanted))

    def _said(self, specific: Specific) -> bool:
        assert self._index is not None
        for probe in probe_sets(specific) or [frozenset()]:
            if probe:
                lists = sorted((self._index.get(p, []) for p in probe), key=len)
                candidates: Iterable[int] = sorted(set(lists[0]).intersection(*lists[1:]))
            else:
                candidates = range(len(self.live))  # nothing to narrow with: the first texts, then keep
            for checked, position in enumerate(candidates):
                if checked >= VERIFY_PER_SPECIFIC:
                    break
                inventory = self._inventories.get(position)
                if inventory is None:
                    inventory = self._inventories[position] = Inventory.of(self.live[position])
                if inventory.covers(specific):
                    return True
        return False


def archived_state(
    entry: Entry, retention_days: int, floor: HighValueFloor, rule: LastRecords, now: datetime
) -> tuple[str, str]:
    """What the purge would do with an archived entry now, and why: for ``memory list --archived``."""
    if entry.archived_at is None:
        return "live", ""
    held = entry.meta(HELD_FOR)
    if held is not None:
        return "kept", f"held above RockBot's floor ({held}; own importance {entry.meta(HELD_IMPORTANCE)})"
    if retention_days <= 0:
        return "kept", "retention 0: archived entries are kept forever"
    due = later(entry.archived_at, timedelta(days=retention_days))
    if due > now:
        return "not due", f"purge from {due.date().isoformat()}"
    if floor.protects(entry):
        return "kept", f"above the high-value floor ({floor.describe(entry)})"
    missing = rule.missing(entry)
    if missing:
        return "kept", f"{LAST_RECORD} {', '.join(missing)}"
    return "due", "every specific is still said by a live entry"


def agent_vocabulary(agent_dir: Path, vocabulary_path: str) -> Vocabulary:
    """The agent's coverage vocabulary, as a cycle loads it (falling back to the built-in one)."""
    path = Path(vocabulary_path)
    return load_vocabulary(path if path.is_absolute() else agent_dir / path).vocabulary


__all__ = [
    "LAST_RECORD",
    "LastRecords",
    "agent_vocabulary",
    "archived_state",
    "probe_sets",
]
