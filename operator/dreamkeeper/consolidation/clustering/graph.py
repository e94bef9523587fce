"""The accepted edges of a scan: collected per group (:class:`Edges`), then one graph whose nodes are entries
or whole twin classes (:class:`Graph`), so a class of thousands is never expanded into its pairs."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from dreamkeeper.consolidation.clustering.model import MEASURE_CODES, SPECIFICS, F64Array, IntArray


@dataclass(frozen=True, slots=True)
class SimilarPair:
    """One accepted edge: two entries at or above the threshold (``a < b``)."""

    a: str
    b: str
    similarity: float
    measure: str  # "cosine" | "jaccard"


@dataclass(slots=True)
class Edges:
    left: list[IntArray] = field(default_factory=list)
    right: list[IntArray] = field(default_factory=list)
    weight: list[F64Array] = field(default_factory=list)
    measure: list[npt.NDArray[np.int8]] = field(default_factory=list)

    def add(self, left: IntArray, right: IntArray, weight: F64Array, measure: int) -> None:
        if len(left):
            self.left.append(left)
            self.right.append(right)
            self.weight.append(weight)
            self.measure.append(np.full(len(left), measure, dtype=np.int8))

    def arrays(self) -> tuple[IntArray, IntArray, F64Array, npt.NDArray[np.int8]]:
        if not self.left:
            return (
                np.empty(0, np.int64),
                np.empty(0, np.int64),
                np.empty(0, np.float64),
                np.empty(0, np.int8),
            )
        return (
            np.concatenate(self.left),
            np.concatenate(self.right),
            np.concatenate(self.weight),
            np.concatenate(self.measure),
        )


@dataclass(slots=True)
class Graph:
    """The accepted edges, with twin classes kept whole.

    A node is one entry or a twin class: entries of one scope group with the same non-empty token set and no
    usable embedding. Every pair involving a twin is a Jaccard pair decided by the token set alone, so twins
    are pairwise at 1.0 and equally similar to everything else; one edge between nodes stands for every entry
    pair across them, and a twin class is an implicit clique at 1.0. A node is named by its lowest entry index.
    """

    ids: list[str]
    left: IntArray  # node pairs (each pair once)
    right: IntArray
    weight: F64Array
    measure: npt.NDArray[np.int8]
    twins: dict[int, list[int]]  # twin class node -> its entries (>= 2, ascending)
    # Node pairs (lower first) that name the same rare specifics (:mod:`.specifics_links`): where an over-large
    # component is split first (:mod:`.assembly`). Empty when that signal is off.
    links: frozenset[tuple[int, int]] = frozenset()

    def members(self, node: int) -> list[int]:
        return self.twins.get(node) or [node]

    def node_of(self, entry: int) -> int:
        """The node holding ``entry`` (its twin class's lowest entry, or the entry itself)."""
        return self._node_map().get(entry, entry)

    def _node_map(self) -> dict[int, int]:
        return {entry: node for node, entries in self.twins.items() for entry in entries}

    def with_links(self, links: list[tuple[int, int, float]]) -> Graph:
        """This graph with the entry pairs of ``links`` as node pairs: each becomes a SPECIFICS edge unless the two
        nodes are one twin class or already an edge, and every one is recorded in ``links``."""
        if not links:
            return self
        node_map = self._node_map()
        existing = {(min(a, b), max(a, b)) for a, b in zip(self.left.tolist(), self.right.tolist(), strict=True)}
        linked: set[tuple[int, int]] = set()
        added: list[tuple[int, int, float]] = []
        for a, b, value in links:
            u, v = node_map.get(a, a), node_map.get(b, b)
            if u == v:
                continue
            pair = (min(u, v), max(u, v))
            if pair not in linked and pair not in existing:
                added.append((pair[0], pair[1], value))
            linked.add(pair)
        if not added:
            return replace(self, links=frozenset(linked))
        return replace(
            self,
            left=np.concatenate((self.left, np.asarray([a for a, _, _ in added], dtype=np.int64))),
            right=np.concatenate((self.right, np.asarray([b for _, b, _ in added], dtype=np.int64))),
            weight=np.concatenate((self.weight, np.asarray([w for _, _, w in added], dtype=np.float64))),
            measure=np.concatenate((self.measure, np.full(len(added), SPECIFICS, dtype=np.int8))),
            links=frozenset(linked),
        )

    def edge_list(self) -> list[tuple[int, int, float, int]]:
        return list(
            zip(self.left.tolist(), self.right.tolist(), self.weight.tolist(), self.measure.tolist(), strict=True)
        )

    def entry_pairs(self) -> list[SimilarPair]:
        """Every entry pair the graph stands for, twin classes expanded, sorted by ``(a, b)``.

        The edges as pairs, for tests and benchmarks that hold them against pairwise ``similarity()``;
        clustering itself never expands a class.
        """
        ids = self.ids
        # Entries are in id order, so the lower index holds the lower id.
        pairs = [
            SimilarPair(ids[min(a, b)], ids[max(a, b)], w, MEASURE_CODES[m])
            for u, v, w, m in self.edge_list()
            for a in self.members(u)
            for b in self.members(v)
        ]
        for twins in self.twins.values():
            pairs.extend(SimilarPair(ids[a], ids[b], 1.0, "jaccard") for a, b in itertools.combinations(twins, 2))
        pairs.sort(key=lambda pair: (pair.a, pair.b))
        return pairs
