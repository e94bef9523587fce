"""A second candidate signal: two entries naming the same rare specifics (issue 23).

Paraphrases of one fact are not lexical near-duplicates ("Mateo Okafor is a Producer at Tailspin Toys; email …" and
"Mateo Okafor (Producer, Tailspin Toys) — …" are at Jaccard 0.8), and a small embedding model puts template
sentences about different people closer than it puts two wordings of one ("Met X at KubeCon on …"). What two
wordings of one fact do share is their specifics: the person, the e-mail, the host, the date, the version. Here a
specific is read cheaply (:func:`specifics_of`: capitalised words, tokens with a digit, e-mail addresses, case-folded),
not with the coverage check's full extraction: the scan reads every live entry every cycle, and the full extraction
costs ~18x more per entry (measured on the sample replicated to 5,680 entries: 114 us against ~2,100 us at load 12),
for the same links on the sample (107 of its 113 same-fact pairs at 0.5 either way; 0 pairs of different facts with
these keys, 1 with the coverage check's). A pair of different facts sharing only one rare name ("Ingrid prefers
Signal", "Met Ingrid at Build") stays apart.

A link is a pair that shares at least two specifics and whose **idf-weighted Jaccard** over their specifics (a
specific's weight ``log(N / df)``, df the number of scanned entries naming it) reaches the threshold. A link only
*offers* two entries together: it never makes them near-duplicates for subsumption (gating.near_duplicates uses the
similarity measures alone), so a model still decides, and the coverage check still guards every merge. Links also
tell an over-large component where to split (:mod:`.assembly`): along pairs that name the same things.

Only **rare** specifics propose a pair and count towards the two shared: named by at least two entries and by at most
5% of them (and never more than ``_COMMON_DF``: their pairs would be quadratic). In a corpus of fewer than 40 entries
nothing is rare: there idf cannot tell a topic the agent keeps returning to (its dog, its podcast) from a fact.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter, defaultdict
from collections.abc import Sequence

from dreamkeeper.consolidation.clustering.model import ClusterItem

_COMMON_DF = 64  # a specific named by more entries than this proposes no pair (it still weighs in the union)
_RARE_SHARE = 0.05  # a specific named by more than this share of the entries is a topic, not a rare specific
_MIN_SHARED = 2  # one shared name ("Ingrid") is a topic, not a fact


# A token holding a digit (dates, versions, hosts, IPs, phone groups, flight numbers), an e-mail address, or a
# capitalised word (names, places, products). A sentence's first word is capitalised too; it is common, so not rare.
_SPECIFIC = re.compile(r"[\w.@+-]*\d[\w.@+-]*|[\w.+-]+@[\w.-]+|\b[A-Z][\w'-]+")
_EDGES = ".-+'"


def specifics_of(item: ClusterItem) -> frozenset[str]:
    """The specifics of one entry as case-folded strings (trailing and leading ``.-+'`` cut: "Paul." is "paul")."""
    # One set comprehension, then the length filter on the (fewer) distinct keys: the scan reads every live entry,
    # and two chained generators cost as much as the pattern itself (issue 27). Same keys as filtering each match.
    found = {match.strip(_EDGES).casefold() for match in _SPECIFIC.findall(item.content)}
    return frozenset(key for key in found if len(key) >= 2)


def specifics_links(items: Sequence[ClusterItem], threshold: float) -> list[tuple[int, int, float]]:
    """Pairs of ``items`` (indices into the sequence, left < right) that share at least two rare specifics and
    whose idf-weighted Jaccard over all their specifics is >= ``threshold``, with that value; sorted.
    ``threshold`` <= 0 or > 1 links nothing."""
    if not 0.0 < threshold <= 1.0 or len(items) < 2:
        return []
    named = [specifics_of(item) for item in items]
    df = Counter(key for keys in named for key in keys)
    total = len(items)
    weight = {key: math.log(total / count) for key, count in df.items()}
    rare = min(_COMMON_DF, int(total * _RARE_SHARE))
    holders: dict[str, list[int]] = defaultdict(list)
    for index, keys in enumerate(named):
        for key in keys:
            if 2 <= df[key] <= rare:
                holders[key].append(index)
    shared: Counter[tuple[int, int]] = Counter()
    for indices in holders.values():
        shared.update(itertools.combinations(indices, 2))
    links: list[tuple[int, int, float]] = []
    for (left, right), count in shared.items():
        if count < _MIN_SHARED:
            continue
        both, either = named[left] & named[right], named[left] | named[right]
        union = sum(weight[key] for key in either)
        value = sum(weight[key] for key in both) / union if union > 0 else 0.0
        if value >= threshold:
            links.append((left, right, value))
    links.sort()
    return links


__all__ = ["specifics_links", "specifics_of"]
