"""Splitting an over-large component into chunks of at most ``max_cluster_size`` entries, two ways.

* ``rockbot`` (the engine's default): RockBot's fixed chunks in id order, so cluster identities — and the decline
  stamps keyed on them — are the same in both engines (:func:`rockbot_chunks`).
* ``neighbours``: chunks that keep every entry next to one of its near-duplicates: a greedy grows the chunks, then
  each entry it stranded joins the chunk of its strongest neighbour, so no entry is offered to a proposer without a
  duplicate beside it (:func:`split_component`). Better offers for a corpus dreamkeeper alone consolidates; its
  clusters (and decline stamps) mean nothing to RockBot's dream.
"""

from __future__ import annotations

import heapq

Adjacency = dict[int, dict[int, tuple[float, int]]]  # node -> neighbour node -> (weight, measure code)
Stranded = list[tuple[int, int]]  # (entry, node) of seeds that found no remaining neighbour


def strength_units(weight: float) -> int:
    """A weight as an exact integer, so a node's strength is the same whatever order its edges are summed in.

    Multiplying by a power of two is exact and every double above 2**-12 becomes an integer; smaller weights
    (never near a real threshold) are truncated, which still gives one order-free value.
    """
    return int(weight * 2.0**64)


_FULL_STRENGTH = strength_units(1.0)


def rockbot_chunks(members: dict[int, list[int]], max_size: int) -> list[list[int]]:
    """RockBot's split (FileMemoryStore ``FindNearDuplicateClustersAsync``, MarimerLLC/rockbot@8a7e360e): the
    component's entries in id order, cut into consecutive chunks of ``max_size``; a chunk of one (only the last can
    be) is dropped. Each chunk is its own cluster for offering, hashing and decline stamps, so splitting the same way
    is what lets a decline stamp written by one engine be read by the other. Entry indices follow id order."""
    ordered = sorted(entry for entries in members.values() for entry in entries)
    chunks = [ordered[start : start + max_size] for start in range(0, len(ordered), max_size)]
    return [chunk for chunk in chunks if len(chunk) >= 2]


def split_component(adjacency: Adjacency, members: dict[int, list[int]], max_size: int) -> list[list[int]]:
    """Split an over-large component into chunks that keep each entry next to a near-duplicate.

    Greedy over entries: seed = remaining entry with most remaining neighbours (then strongest total similarity,
    then id); grow by the strongest edge into the chunk (Prim's order, ties by id) up to ``max_size``. An entry
    left with no remaining neighbour would be a singleton; instead it joins the chunk holding its strongest
    neighbour, so a new entry is always offered together with a duplicate. That is the only way a chunk exceeds
    ``max_size`` (by one per stranded entry; a star-shaped component can strand many on its hub's chunk).

    It runs on nodes (``members``: a node's entries, ascending; >= 2 means a twin class, an implicit clique at
    1.0). Twins are interchangeable, so they are taken lowest id first and every remaining twin has the same
    degree and strength: one heap entry per node stands for all its remaining entries, and a class of thousands
    of twins costs as much as its chunks, not its pairs. The chunks are those of the entry-level greedy.
    Entry indices follow id order, so they stand in for ids in every tie-break.
    """
    chunks, stranded = _Greedy(adjacency, members).grow_chunks(max_size)
    _attach_stranded(chunks, stranded, adjacency, members)
    return chunks


class _Greedy:
    """Step one: the greedy's state over one component's nodes, and the chunks it grows from it."""

    __slots__ = ("degree", "head", "members", "offers", "seeds", "size", "strength", "taken", "units")

    def __init__(self, adjacency: Adjacency, members: dict[int, list[int]]) -> None:
        self.members = members
        self.size = {node: len(entries) for node, entries in members.items()}
        self.taken = dict.fromkeys(members, 0)  # a node's entries are taken in ascending order
        # a node's lowest remaining entry, -1 when none left
        self.head = {node: entries[0] for node, entries in members.items()}
        size = self.size
        self.units = {
            node: {other: strength_units(w) for other, (w, _) in near.items()} for node, near in adjacency.items()
        }
        # a node's neighbours with the frontier weight, the node itself first when it is a twin class
        self.offers = {
            node: ([(-1.0, node)] if size[node] >= 2 else []) + [(-w, other) for other, (w, _) in near.items()]
            for node, near in adjacency.items()
        }
        self.degree: dict[int, int] = {}
        self.strength: dict[int, int] = {}
        for node, near in self.units.items():
            self.degree[node] = size[node] - 1 + sum(size[other] for other in near)
            self.strength[node] = (size[node] - 1) * _FULL_STRENGTH + sum(size[other] * u for other, u in near.items())
        self.seeds = [(-self.degree[v], -self.strength[v], self.head[v], v) for v in adjacency]
        heapq.heapify(self.seeds)

    def grow_chunks(self, max_size: int) -> tuple[list[list[int]], Stranded]:
        """Chunks from the best remaining seed each, and the seeds left alone (every neighbour already taken)."""
        chunks: list[list[int]] = []
        stranded: Stranded = []
        while (seed := self._next_seed()) is not None:
            entry, node = seed
            chunk, placed = self._grow(entry, node, max_size)
            if len(chunk) == 1:
                stranded.append(seed)
                continue
            self._consume(node, placed)
            chunks.append(chunk)
        return chunks, stranded

    def _take(self, node: int) -> None:
        self.taken[node] += 1
        self.head[node] = self.members[node][self.taken[node]] if self.taken[node] < self.size[node] else -1

    def _next_seed(self) -> tuple[int, int] | None:
        """The best remaining seed (entry, node), None when every entry is taken.

        One seed entry per node. Degree and strength only fall and the head only rises, so a stored key never
        exceeds the node's current one: a stale entry is re-pushed when it surfaces, and an entry that surfaces
        current is the true best seed (lazy decrease-key; no push per neighbour per chunk).
        """
        seeds, head, degree, strength = self.seeds, self.head, self.degree, self.strength
        while seeds:
            neg_degree, neg_strength, entry, node = heapq.heappop(seeds)
            if head[node] < 0:
                continue
            if entry != head[node] or -neg_degree != degree[node] or -neg_strength != strength[node]:
                heapq.heappush(seeds, (-degree[node], -strength[node], head[node], node))
                continue
            return entry, node
        return None

    def _grow(self, entry: int, node: int, max_size: int) -> tuple[list[int], dict[int, int]]:
        """The chunk grown from seed ``entry`` of ``node``, and how many entries it took from each node."""
        head, take = self.head, self._take
        take(node)
        chunk = [entry]
        placed = {node: 1}
        # One frontier entry per neighbour node stands for all its remaining entries at that weight.
        frontier = [(neg_w, head[other], other) for neg_w, other in self.offers[node] if head[other] >= 0]
        heapq.heapify(frontier)
        while frontier and len(chunk) < max_size:
            neg_w, candidate, other = heapq.heappop(frontier)
            current = head[other]
            if current < 0:
                continue
            if candidate != current:  # that entry was taken; the node's next one has the same weight
                heapq.heappush(frontier, (neg_w, current, other))
                continue
            take(other)
            chunk.append(candidate)
            if other in placed:
                placed[other] += 1
            else:
                placed[other] = 1
                self._offer_neighbours(other, frontier)
            if head[other] >= 0:
                heapq.heappush(frontier, (neg_w, head[other], other))
        return chunk, placed

    def _offer_neighbours(self, node: int, frontier: list[tuple[float, int, int]]) -> None:
        """A node joined the chunk: its remaining neighbours (and twins) join the frontier."""
        head = self.head
        for offer_w, neighbour in self.offers[node]:
            if head[neighbour] >= 0:
                heapq.heappush(frontier, (offer_w, head[neighbour], neighbour))

    def _consume(self, seed_node: int, placed: dict[int, int]) -> None:
        """A chunk was kept: the entries it took no longer count towards anyone's degree or strength."""
        head, degree, strength, size = self.head, self.degree, self.strength, self.size
        for source, count in placed.items():
            if size[source] >= 2 and head[source] >= 0:
                degree[source] -= count
                strength[source] -= count * _FULL_STRENGTH
            for other, unit in self.units[source].items():
                if head[other] >= 0:
                    degree[other] -= count
                    strength[other] -= count * unit
        if head[seed_node] >= 0:  # the seed's own entry was consumed; its remaining twins need one
            heapq.heappush(self.seeds, (-degree[seed_node], -strength[seed_node], head[seed_node], seed_node))


def _attach_stranded(
    chunks: list[list[int]], stranded: Stranded, adjacency: Adjacency, members: dict[int, list[int]]
) -> None:
    """Step two: each stranded entry joins the chunk holding its strongest neighbour (ties: lowest entry).

    A stranded entry's neighbours were all taken by earlier chunks (seeds go by descending degree, so once
    one entry is stranded every later one is too, and none of them neighbour each other).
    """
    chunk_of = {member: index for index, chunk in enumerate(chunks) for member in chunk}
    for entry, node in sorted(stranded):
        options = [(-w, members[other][0]) for other, (w, _) in adjacency[node].items()]
        twins = members[node]
        if len(twins) >= 2:
            options.append((-1.0, twins[0] if twins[0] != entry else twins[1]))
        chunks[chunk_of[min(options)[1]]].append(entry)
