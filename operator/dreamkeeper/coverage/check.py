"""The merge coverage check: every specific of every source must survive in the merged text.

Biased toward rejection on purpose: a false rejection keeps a duplicate one more cycle; a false acceptance
destroys the only record of a fact.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from dreamkeeper.coverage.inventory import Inventory
from dreamkeeper.coverage.specifics import Specific, merge_specifics, sources_specifics
from dreamkeeper.coverage.vocabulary import DEFAULT_VOCABULARY, Vocabulary


@dataclass(frozen=True, slots=True)
class SourceText:
    """One source of a merge: its content and its category (which decides numeric exemption)."""

    text: str
    category: str | None = None


def required_specifics(sources: Sequence[SourceText], vocabulary: Vocabulary = DEFAULT_VOCABULARY) -> list[Specific]:
    """The union of the sources' specifics; lowercase evidence comes from all sources together."""
    # `sources_specifics` is each source's `extract_specifics` with the joined texts as evidence, read once a merge.
    return merge_specifics(sources_specifics([(source.text, source.category) for source in sources], vocabulary))


def _order(text: str) -> tuple[str, str]:
    return (text.casefold(), text)


class _InventoryMemo:
    """Inventories of single texts by text, least recently used dropped first. Entries are shared: read-only."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._inventories: OrderedDict[str, Inventory] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, text: str) -> Inventory:
        inventory = self._inventories.get(text)
        if inventory is not None:
            self.hits += 1
            self._inventories.move_to_end(text)
            return inventory
        self.misses += 1
        inventory = Inventory.of(text)
        self.put(text, inventory)
        return inventory

    def peek(self, text: str) -> Inventory | None:
        """The memo's inventory of ``text`` if it has one, leaving the order of what it keeps as it is."""
        return self._inventories.get(text)

    def put(self, text: str, inventory: Inventory) -> None:
        self._inventories[text] = inventory
        self._inventories.move_to_end(text)
        if len(self._inventories) > self._size:
            self._inventories.popitem(last=False)

    def clear(self) -> None:
        self._inventories.clear()
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._inventories)


# Validation asks about each merge's text, then the census and the post-apply loss check about each successor: a
# cycle's merges in plan order (about 7k at 100k entries). An inventory is a few kilobytes, so the memo holds about
# that many; the offline proposer keeps its hosts' inventories per cluster and hands over only those it merges
# into (`keep_inventory`), so its many trial hosts do not push a cycle's merges out.
INVENTORY_MEMO_SIZE: Final = 1 << 13
_INVENTORIES: Final = _InventoryMemo(INVENTORY_MEMO_SIZE)


def merged_inventory(merged: str) -> Inventory:
    """The inventory of one text, shared: callers only read it (`covers`); never add to or remove from it."""
    return _INVENTORIES.get(merged)


def known_inventory(text: str) -> Inventory | None:
    """The shared inventory of ``text`` if one was built already (read only, like `merged_inventory`'s), else None:
    for a caller that would build its own and must not push the cycle's merges out of the memo by asking."""
    return _INVENTORIES.peek(text)


def keep_inventory(merged: str, inventory: Inventory) -> None:
    """Offer the memo an inventory already built for ``merged``: it must be ``Inventory.of(merged)``, untouched."""
    _INVENTORIES.put(merged, inventory)


def inventory_memo_info() -> tuple[int, int, int]:
    """(hits, misses, current size) of the merged-text inventory memo: for tests and benchmarks."""
    return _INVENTORIES.hits, _INVENTORIES.misses, len(_INVENTORIES)


def clear_inventory_memo() -> None:
    _INVENTORIES.clear()


def missing_from(
    inventory: Inventory, sources: Sequence[SourceText], vocabulary: Vocabulary = DEFAULT_VOCABULARY
) -> list[str]:
    """Specifics of ``sources`` that the text ``inventory`` was built from drops, ordered case-insensitively."""
    missing = [specific.text for specific in required_specifics(sources, vocabulary) if not inventory.covers(specific)]
    return sorted(missing, key=_order)


def find_missing_specifics(
    sources: Sequence[SourceText], merged: str, vocabulary: Vocabulary = DEFAULT_VOCABULARY
) -> list[str]:
    """Specifics of ``sources`` that ``merged`` drops, ordered case-insensitively ("Alpha, Boston, Mike, Zulu").

    Empty means the merge keeps everything. No sources means nothing is required: a caller must refuse a merge
    without valid sources before asking (it would otherwise be a new entry with no provenance).
    """
    return missing_from(merged_inventory(merged), sources, vocabulary)
