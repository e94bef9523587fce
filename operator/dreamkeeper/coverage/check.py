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
    """Inventories of single texts by text, least recently used dropped first. Entries are shared: read-only.

    Two kinds of entry: a merge's text (``get``, ``put``), and a text merely read (``offer``: a member subsumption
    tried as a host). When the memo is full, texts merely read go first, so however many a large cycle tries, they
    cannot push out the merges validation and the end-of-run check ask for again; a merge's text asked for
    (``get``) after it was offered becomes one."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._inventories: OrderedDict[str, Inventory] = OrderedDict()  # merges' texts
        self._offered: OrderedDict[str, Inventory] = OrderedDict()  # texts merely read, dropped first
        self.hits = 0
        self.misses = 0

    def get(self, text: str) -> Inventory:
        inventory = self._inventories.get(text)
        if inventory is not None:
            self.hits += 1
            self._inventories.move_to_end(text)
            return inventory
        inventory = self._offered.get(text)
        if inventory is not None:
            self.hits += 1
        else:
            self.misses += 1
            inventory = Inventory.of(text)
        self.put(text, inventory)
        return inventory

    def peek(self, text: str) -> Inventory | None:
        """The memo's inventory of ``text`` if it has one, leaving the order of what it keeps as it is."""
        inventory = self._inventories.get(text)
        return self._offered.get(text) if inventory is None else inventory

    def put(self, text: str, inventory: Inventory) -> None:
        self._offered.pop(text, None)
        self._inventories[text] = inventory
        self._inventories.move_to_end(text)
        self._trim()

    def offer(self, text: str, inventory: Inventory) -> None:
        """Keep ``inventory`` (``Inventory.of(text)``, untouched) while there is room: it goes before any merge's."""
        if text in self._inventories:
            return
        self._offered[text] = inventory
        self._offered.move_to_end(text)
        self._trim()

    def _trim(self) -> None:
        while len(self._inventories) + len(self._offered) > self._size:
            (self._offered if self._offered else self._inventories).popitem(last=False)

    def clear(self) -> None:
        self._inventories.clear()
        self._offered.clear()
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._inventories) + len(self._offered)


# Validation asks about each merge's text, then the census and the end-of-run check about each successor: a cycle's
# merges in plan order (~13,700 at 100k entries on a cold start: ~8,000 subsumed, ~5,700 proposed). Asked in the
# order they were put, a memo smaller than that keeps none of them (each miss pushes out the next one asked), so it
# holds 16,384: ~2 KB an inventory with its keys interned (inventory.py), ~33 MB full, less than the 8,192 held
# before them. Subsumption offers the memo the members it tried as hosts (`offer_inventory`: the first to go) and
# hands over those it merges into (`keep_inventory`), as the offline proposer does with its own hosts, so the many
# hosts merely tried (~27,000 at 100k entries) do not push a cycle's merges out.
INVENTORY_MEMO_SIZE: Final = 1 << 14
_INVENTORIES: Final = _InventoryMemo(INVENTORY_MEMO_SIZE)


def merged_inventory(merged: str) -> Inventory:
    """The inventory of one text, shared: callers only read it (`covers`); never add to or remove from it."""
    return _INVENTORIES.get(merged)


def known_inventory(text: str) -> Inventory | None:
    """The shared inventory of ``text`` if one was built already (read only, like `merged_inventory`'s), else None:
    for a caller that would build its own and must not push the cycle's merges out of the memo by asking."""
    return _INVENTORIES.peek(text)


def keep_inventory(merged: str, inventory: Inventory) -> None:
    """Give the memo an inventory already built for a merge's text ``merged``: it must be ``Inventory.of(merged)``,
    untouched."""
    _INVENTORIES.put(merged, inventory)


def offer_inventory(text: str, inventory: Inventory) -> None:
    """Offer the memo an inventory built for a text merely read (``Inventory.of(text)``, untouched): kept while there
    is room, dropped before any merge's text (a later ``merged_inventory`` of it makes it one)."""
    _INVENTORIES.offer(text, inventory)


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
