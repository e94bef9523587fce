"""Token classes: the members of a scope group grouped by identical token set, so each set is hashed and
compared once, and how an accepted pair of classes becomes node edges (twin nodes, embedded entries)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from dreamkeeper.consolidation.clustering.arrays import mix64, ragged, seed_words
from dreamkeeper.consolidation.clustering.corpus import Corpus
from dreamkeeper.consolidation.clustering.graph import Edges
from dreamkeeper.consolidation.clustering.model import JACCARD, F64Array, IntArray


@dataclass(slots=True)
class TokenClasses:
    """Members of one scope group grouped by identical token set; classes in order of their first member.

    Within a class, the entries without a usable embedding form one node (a twin class when >= 2); each
    embedded entry is its own node, because its pairs with other embedded entries may be cosine pairs.
    """

    reps: IntArray  # first (lowest) entry of each class: the one that is hashed and compared
    twin_node: IntArray  # node of the class's non-embedded entries, -1 when it has none
    twin_size: IntArray  # how many non-embedded entries that node holds
    embedded_ptr: IntArray  # CSR offsets into embedded (per class)
    embedded: IntArray  # the class's embedded entries, ascending
    embedded_dim: IntArray  # one dimension shared by all of the class's embedded entries, -1 if they differ
    pure_dim: IntArray  # dimension when every entry of the class is embedded with it (no Jaccard pair inside)


def token_classes(corpus: Corpus, members: IntArray, twins: dict[int, list[int]]) -> TokenClasses:
    """Group ``members`` (ascending, non-empty token sets) by token set; registers twin classes in ``twins``.

    Sets are matched by a 128-bit order-free hash and then compared exactly; a (vanishingly rare) collision
    only leaves the colliding entries in classes of their own, which is still correct: identical sets in two
    classes are found by the scan as a pair at Jaccard 1.0.
    """
    counts = corpus.token_counts[members]
    tokens = corpus.token_ids[ragged(corpus.token_ptr[members], counts)]
    starts = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
    salt = seed_words(0x7A11, 4, 1)[0]
    first = np.add.reduceat(mix64(corpus.token_hashes[tokens]), starts)
    second = np.add.reduceat(mix64(corpus.token_hashes[tokens] ^ salt), starts)
    order = np.lexsort((second, first, counts))  # stable: equal sets stay in ascending entry order
    s_first, s_second, s_counts = first[order], second[order], counts[order]
    new_key = np.ones(len(order), dtype=bool)
    new_key[1:] = (s_first[1:] != s_first[:-1]) | (s_second[1:] != s_second[:-1]) | (s_counts[1:] != s_counts[:-1])
    head = order[np.maximum.accumulate(np.where(new_key, np.arange(len(order)), 0))]  # first member of the key
    # Exact check of every member against the head of its key.
    check = np.flatnonzero(~new_key)
    if len(check):
        mine = tokens[ragged(starts[order[check]], s_counts[check])]
        theirs = tokens[ragged(starts[head[check]], s_counts[check])]
        mismatched = np.bincount(np.repeat(np.arange(len(check)), s_counts[check]), weights=mine != theirs)
        head[check[mismatched > 0]] = order[check[mismatched > 0]]
    class_of = np.empty(len(order), dtype=np.int64)
    class_of[order] = head  # class label = local position of its first member
    labels, class_index = np.unique(class_of, return_inverse=True)  # ascending first member = ascending entry
    n_classes = len(labels)
    dims = corpus.dims[members]
    plain = dims < 0
    twin_size = np.bincount(class_index[plain], minlength=n_classes).astype(np.int64)
    twin_node = np.full(n_classes, -1, dtype=np.int64)
    plain_positions = np.flatnonzero(plain)  # ascending, so the first of each class is its lowest entry
    plain_classes = class_index[plain_positions]
    _, first_plain = np.unique(plain_classes, return_index=True)
    twin_node[plain_classes[first_plain]] = members[plain_positions[first_plain]]
    # Twin lists in one pass: plain members sorted by class (stable, so ascending within each class).
    by_plain_class = plain_positions[np.argsort(plain_classes, kind="stable")]
    bounds = np.concatenate(([0], np.cumsum(twin_size))).astype(np.int64)
    for label in np.flatnonzero(twin_size >= 2).tolist():
        twins[int(twin_node[label])] = members[by_plain_class[bounds[label] : bounds[label + 1]]].tolist()
    embedded_positions = np.flatnonzero(~plain)
    embedded_classes = class_index[embedded_positions]
    by_class = np.argsort(embedded_classes, kind="stable")
    embedded_count = np.bincount(embedded_classes, minlength=n_classes).astype(np.int64)
    embedded_ptr = np.concatenate(([0], np.cumsum(embedded_count))).astype(np.int64)
    embedded_dims = dims[embedded_positions[by_class]]
    low = np.full(n_classes, np.iinfo(np.int64).max, dtype=np.int64)
    high = np.full(n_classes, -1, dtype=np.int64)
    np.minimum.at(low, embedded_classes[by_class], embedded_dims)
    np.maximum.at(high, embedded_classes[by_class], embedded_dims)
    embedded_dim = np.where((embedded_count > 0) & (low == high), high, -1)
    return TokenClasses(
        reps=members[labels],
        twin_node=twin_node,
        twin_size=twin_size,
        embedded_ptr=embedded_ptr,
        embedded=members[embedded_positions[by_class]],
        embedded_dim=embedded_dim,
        pure_dim=np.where(twin_size == 0, embedded_dim, -1),
    )


def inside_classes(classes: TokenClasses, dims: IntArray, edges: Edges) -> int:
    """Edges inside each token class (Jaccard 1.0); returns the entry pairs they stand for, twin cliques included.

    Twin node to each embedded entry of its class, and embedded entries of different dimensions to each other.
    """
    sizes = classes.twin_size
    logical = int((sizes * (sizes - 1) // 2).sum())
    counts = np.diff(classes.embedded_ptr)
    with_twins = np.repeat(classes.twin_node, counts)
    keep = with_twins >= 0
    edges.add(with_twins[keep], classes.embedded[keep], np.ones(int(keep.sum())), JACCARD)
    logical += int(np.repeat(sizes, counts)[keep].sum())
    lefts: list[int] = []
    rights: list[int] = []
    for label in np.flatnonzero((counts >= 2) & (classes.embedded_dim < 0)).tolist():
        inside = classes.embedded[classes.embedded_ptr[label] : classes.embedded_ptr[label + 1]].tolist()
        for a, b in itertools.combinations(inside, 2):
            if dims[a] != dims[b]:
                lefts.append(a)
                rights.append(b)
    edges.add(np.asarray(lefts, np.int64), np.asarray(rights, np.int64), np.ones(len(lefts)), JACCARD)
    return logical + len(lefts)


def across_classes(
    classes: TokenClasses, dims: IntArray, left: IntArray, right: IntArray, weight: F64Array, edges: Edges
) -> int:
    """Edges for accepted pairs of classes (local class numbers) at ``weight``; returns the entry pairs they stand for.

    Twin node to twin node, twin node to each embedded entry of the other class, and embedded entries of the two
    classes to each other where their dimensions differ (same-dimension pairs are cosine pairs).
    """
    twin_node, twin_size = classes.twin_node, classes.twin_size
    counts = np.diff(classes.embedded_ptr)
    both = (twin_node[left] >= 0) & (twin_node[right] >= 0)
    edges.add(twin_node[left][both], twin_node[right][both], weight[both], JACCARD)
    logical = int((twin_size[left][both] * twin_size[right][both]).sum())
    for source, target in ((left, right), (right, left)):
        has = twin_node[source] >= 0
        source, target, with_weight = source[has], target[has], weight[has]
        spread = counts[target]
        others = classes.embedded[ragged(classes.embedded_ptr[target], spread)]
        edges.add(np.repeat(twin_node[source], spread), others, np.repeat(with_weight, spread), JACCARD)
        logical += int((twin_size[source] * spread).sum())
    same = (classes.embedded_dim[left] >= 0) & (classes.embedded_dim[left] == classes.embedded_dim[right])
    need = (counts[left] > 0) & (counts[right] > 0) & ~same
    lefts: list[int] = []
    rights: list[int] = []
    weights: list[float] = []
    for a_class, b_class, w in zip(left[need].tolist(), right[need].tolist(), weight[need].tolist(), strict=True):
        ptr = classes.embedded_ptr
        for a in classes.embedded[ptr[a_class] : ptr[a_class + 1]].tolist():
            for b in classes.embedded[ptr[b_class] : ptr[b_class + 1]].tolist():
                if dims[a] != dims[b]:
                    lefts.append(a)
                    rights.append(b)
                    weights.append(w)
    edges.add(np.asarray(lefts, np.int64), np.asarray(rights, np.int64), np.asarray(weights, np.float64), JACCARD)
    return logical + len(lefts)
