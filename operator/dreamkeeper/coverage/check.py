"""The merge coverage check: every specific of every source must survive in the merged text.

Biased toward rejection on purpose: a false rejection keeps a duplicate one more cycle; a false acceptance
destroys the only record of a fact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from dreamkeeper.coverage.inventory import Inventory
from dreamkeeper.coverage.specifics import Specific, extract_specifics, merge_specifics
from dreamkeeper.coverage.vocabulary import DEFAULT_VOCABULARY, Vocabulary


@dataclass(frozen=True, slots=True)
class SourceText:
    """One source of a merge: its content and its category (which decides numeric exemption)."""

    text: str
    category: str | None = None


def required_specifics(sources: Sequence[SourceText], vocabulary: Vocabulary = DEFAULT_VOCABULARY) -> list[Specific]:
    """The union of the sources' specifics; lowercase evidence comes from all sources together."""
    evidence = "\n".join(source.text for source in sources)
    return merge_specifics(
        extract_specifics(source.text, source.category, vocabulary, evidence=evidence) for source in sources
    )


def _order(text: str) -> tuple[str, str]:
    return (text.casefold(), text)


# The offline proposer asks whether one host text covers each of its cluster's candidates, validation asks again
# for each merge it accepts, the census and the loss measurement for each successor: the same merged text many
# times. An inventory is a few kilobytes, so the memo is smaller than the specifics memo: it serves the proposer's
# clusters and a cycle's merges in plan order (at 100k entries about 7k successors).
INVENTORY_MEMO_SIZE: Final = 1 << 13


@lru_cache(maxsize=INVENTORY_MEMO_SIZE)
def merged_inventory(merged: str) -> Inventory:
    """The inventory of one text, shared: callers only read it (`covers`); never add to or remove from it."""
    return Inventory.of(merged)


def find_missing_specifics(
    sources: Sequence[SourceText], merged: str, vocabulary: Vocabulary = DEFAULT_VOCABULARY
) -> list[str]:
    """Specifics of ``sources`` that ``merged`` drops, ordered case-insensitively ("Alpha, Boston, Mike, Zulu").

    Empty means the merge keeps everything. No sources means nothing is required: a caller must refuse a merge
    without valid sources before asking (it would otherwise be a new entry with no provenance).
    """
    inventory = merged_inventory(merged)
    missing = [specific.text for specific in required_specifics(sources, vocabulary) if not inventory.covers(specific)]
    return sorted(missing, key=_order)
