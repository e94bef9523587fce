"""What a merge's successor does not hold of its sources' own specifics: the census's first question, asked while
validation still holds the successor's inventory (issue 27).

The census (census.py) asks, for every merge of the plan, which of its sources' specifics (each source on its own
lowercase evidence) the successor's text does not hold; only those are looked up in the corpus. Validation built
the successor's inventory moments before, for the coverage check; by the time the census runs, a large cycle has
checked more merges than the shared inventory memo held (8,192 then; ~14,000 merges at 100,000 entries), asked in
the same order, so every one was built again. Asked at validation instead, the answer is kept with the exact texts and
vocabulary it was computed from, and the census uses it only when those are the texts and vocabulary of the merge
it judges; anything else is computed afresh, exactly as before.
"""

from __future__ import annotations

from dataclasses import dataclass

from dreamkeeper.consolidation.plan import MergeAction
from dreamkeeper.coverage import Specific, Vocabulary, extract_specifics, merged_inventory


def _texts(merge: MergeAction) -> tuple[tuple[str, str | None], ...]:
    return tuple((s.entry.content, s.entry.category) for s in merge.sources)


@dataclass(frozen=True, slots=True)
class SuccessorGaps:
    """The specifics of ``sources`` (in the census's order: source by source, each in extraction order) that the
    text ``successor`` does not hold, under ``vocabulary``."""

    successor: str
    sources: tuple[tuple[str, str | None], ...]
    vocabulary: Vocabulary
    uncovered: tuple[Specific, ...]

    def answers_for(self, merge: MergeAction, vocabulary: Vocabulary) -> bool:
        """Whether this is the answer for ``merge``: the same successor text, the same source texts and categories
        in the same order, the same vocabulary (by content, as the extraction memo keys it)."""
        return (
            self.successor == merge.successor.content
            and self.sources == _texts(merge)
            and self.vocabulary == vocabulary
        )


def successor_gaps(merge: MergeAction, vocabulary: Vocabulary) -> SuccessorGaps:
    successor = merged_inventory(merge.successor.content)
    sources = _texts(merge)
    uncovered = tuple(
        specific
        for text, category in sources
        for specific in extract_specifics(text, category, vocabulary)
        if not successor.covers(specific)
    )
    return SuccessorGaps(merge.successor.content, sources, vocabulary, uncovered)


__all__ = ["SuccessorGaps", "successor_gaps"]
