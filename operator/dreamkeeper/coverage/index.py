"""`CoverageIndex`: the union of many texts' tokens, for the corpus-wide census ("is this specific still said
anywhere?"). Token-set based: `covers` is a handful of hash look-ups, so it stays fast at 100k entries."""

from __future__ import annotations

from dreamkeeper.coverage.inventory import Inventory
from dreamkeeper.coverage.specifics import Specific


class CoverageIndex:
    """A multiset index: ``add`` and ``remove`` the same text any number of times; ``covers`` answers for the
    union of the texts currently held, with exactly the semantics of `find_missing_specifics`."""

    __slots__ = ("_inventory", "_size")

    def __init__(self) -> None:
        self._inventory = Inventory()
        self._size = 0

    def add(self, text: str) -> None:
        self._inventory.add(text)
        self._size += 1

    def remove(self, text: str) -> None:
        """Remove one copy of a text previously added (removing a text never added corrupts the counts)."""
        self._inventory.remove(text)
        self._size -= 1

    def covers(self, specific: Specific) -> bool:
        return self._inventory.covers(specific)

    def __len__(self) -> int:
        return self._size
