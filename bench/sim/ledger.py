"""Measuring survival: which specifics ever mined are still said somewhere in an arm's live corpus.

Both arms are measured by the same code with the same coverage semantics the engine's census uses
(:class:`dreamkeeper.coverage.CoverageIndex`), on the arm's own view of its live corpus: the naive arm's dict, and
dreamkeeper's store as read back from disk after each cycle (not its report).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from bench.sim.world import MinedEntry
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.coverage import DEFAULT_VOCABULARY, CoverageIndex, Specific, extract_specifics

Key = tuple[str, str]  # (kind, comparison key) of a specific


def is_protected(settings: CycleSettings, importance: float, reinforcement: int, category: str | None) -> bool:
    """Above the high-value floor or in a protected category: what dreamkeeper never prunes standalone."""
    floor = settings.floor
    return (
        importance >= floor.importance
        or reinforcement >= floor.reinforcement
        or settings.is_protected_category(category)
    )


class Ledger:
    """Every specific ever mined, which are protected, and which entries carry which (shared by both arms)."""

    def __init__(self, settings: CycleSettings) -> None:
        self.settings = settings
        self.specifics: dict[Key, Specific] = {}
        self.protected: set[Key] = set()
        self.entry_keys: dict[str, frozenset[Key]] = {}  # mined, non-ephemeral entries with specifics
        self.entry_cycle: dict[str, int] = {}
        self.mined: set[Key] = set()  # every specific ever mined
        self._cache: dict[tuple[str | None, str], frozenset[Key]] = {}

    def keys_of(self, content: str, category: str | None) -> frozenset[Key]:
        cached = self._cache.get((category, content))
        if cached is None:
            found = extract_specifics(content, category, DEFAULT_VOCABULARY)
            cached = frozenset((s.kind, s.key) for s in found)
            for specific in found:
                self.specifics.setdefault((specific.kind, specific.key), specific)
            self._cache[(category, content)] = cached
        return cached

    def record(self, mined: MinedEntry, cycle: int) -> None:
        keys = self.keys_of(mined.content, mined.category)
        self.mined |= keys
        if is_protected(self.settings, mined.importance, mined.reinforcement, mined.category):
            self.protected |= keys
        if keys and not mined.ephemeral:
            self.entry_keys[mined.id] = keys
            self.entry_cycle[mined.id] = cycle


@dataclass
class ArmMeasure:
    """One arm's live-corpus coverage, kept incrementally, and its loss history."""

    name: str
    ledger: Ledger
    index: CoverageIndex = field(default_factory=CoverageIndex)
    held: dict[str, str] = field(default_factory=dict)  # entry id -> text in the index
    covered: set[Key] = field(default_factory=set)
    known: set[Key] = field(default_factory=set)  # specifics mined so far
    cause: dict[Key, str] = field(default_factory=dict)  # why an uncovered specific went missing
    ever_lost: Counter[str] = field(default_factory=Counter)  # disappearances by cause, protected or not
    ever_lost_protected: Counter[str] = field(default_factory=Counter)
    lost_examples: dict[str, list[str]] = field(default_factory=dict)
    first_lost: dict[str, int] = field(default_factory=dict)  # entry id -> cycle its content first went missing
    at_risk_total: int = 0
    losses_total: int = 0

    def sync(self, live: Mapping[str, str]) -> None:
        """Make the index hold exactly ``live`` (id -> content)."""
        for entry_id in [i for i in self.held if i not in live or live[i] != self.held[i]]:
            self.index.remove(self.held.pop(entry_id))
        for entry_id, text in live.items():
            if entry_id not in self.held:
                self.index.add(text)
                self.held[entry_id] = text

    def measure(self, cycle: int, known: set[Key], explain: Callable[[Specific], str]) -> list[Key]:
        """Recompute coverage of every specific mined so far; returns the ones that went missing this cycle.

        ``explain`` names the cause of one disappearance (it is asked only about specifics that went missing).
        """
        specifics = self.ledger.specifics
        covered = {key for key in known if self.index.covers(specifics[key])}
        vanished = sorted(k for k in (self.covered - covered) if k in known)
        for key in vanished:
            why = explain(specifics[key])
            self.cause[key] = why
            self.ever_lost[why] += 1
            if key in self.ledger.protected:
                self.ever_lost_protected[why] += 1
            examples = self.lost_examples.setdefault(why, [])
            if len(examples) < 12:
                examples.append(specifics[key].text)
        for key in covered:
            self.cause.pop(key, None)
        self.covered = covered
        self.known = known
        # Entry-level: an entry survives while every specific it was mined with is still said somewhere.
        at_risk = 0
        for entry_id, keys in self.ledger.entry_keys.items():
            if entry_id in self.first_lost or self.ledger.entry_cycle[entry_id] > cycle:
                continue
            at_risk += 1
            if not keys <= covered:
                self.first_lost[entry_id] = cycle
                self.losses_total += 1
        self.at_risk_total += at_risk
        return vanished

    def uncovered_by_cause(self, protected_only: bool = False) -> Counter[str]:
        out: Counter[str] = Counter()
        for key in self.known - self.covered:
            if protected_only and key not in self.ledger.protected:
                continue
            out[self.cause.get(key, "unexplained")] += 1
        return out

    @property
    def per_cycle_survival(self) -> float:
        return 1.0 - (self.losses_total / self.at_risk_total) if self.at_risk_total else 1.0

    def cohort_alive(self, cohort: Iterable[str]) -> float:
        ids = list(cohort)
        return sum(1 for i in ids if i not in self.first_lost) / len(ids) if ids else 1.0
