"""Subsumption: near-duplicates settled with no model, when one member already says everything (issue 23).

On the sample agent 23 of the 35 clusters a cold cycle offers have a member that holds every specific of the
others: the coverage check itself says keeping that one loses nothing, yet a small model asked about them declined
all 35. Such a cluster needs no model. Its other members are archived ``merged into`` the member that holds
everything (the merge is folded into that live entry: its text is kept byte for byte, its counters and provenance
take in theirs), and the merge goes through the census, the floor and the blast radius like any other.

Who takes in whom, and how a contradiction is ruled out (the issue asks to say how it is decided):

* inside one near-duplicate component (every chunk RockBot's rule cut it into), a member may take in each other
  member that is its own near-duplicate (similar at the threshold, not merely linked through a third entry) and
  has at least one specific, all of which its text holds (the coverage check, with the cycle's vocabulary). The
  member that can take in the most goes first, and of equals **the newest** (``createdAt``, then id): when two
  statements hold the same specifics, the later one is how the agent says it now. A whole cluster so settled is
  the issue's case; in a larger component of several facts (the sample's twelve Postgres servers) only the copies
  of one fact are;
* a member **newer** than the one that would take it in is left alone when it says a word the older one does not
  that can turn a statement round: a negation, a cancellation, an ending, a correction (``CHANGE_WORDS``). "Met
  Bob in Oslo on 2026-05-01" and, later, "the 2026-05-01 meeting with Bob was cancelled" share the later one's
  specifics, but it is news, not a copy: the model is asked, as for any cluster.

An older member saying the opposite of a newer one that holds its specifics is settled by recency, as a merge
would settle it; its text stays in the archive, restorable, with its id in the survivor's ``mergedFrom``. What is
left of a component, when two or more entries are, goes to the model (gating.make_batches).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from dreamkeeper.consolidation.clustering import Cluster
from dreamkeeper.consolidation.fold import reinforcement_sum, tag_union
from dreamkeeper.consolidation.plan import MergeAction
from dreamkeeper.coverage import (
    Inventory,
    Specific,
    Vocabulary,
    extract_specifics,
    keep_inventory,
    known_inventory,
    offer_inventory,
)
from dreamkeeper.memory import (
    BOOKKEEPING_KEYS,
    MERGED_AT,
    MERGED_FROM,
    REVIEWED_AT,
    REVIEWED_HASH,
    UNUSABLE_AT,
    UNUSABLE_COUNT,
    UNUSABLE_HASH,
    Entry,
    StoredEntry,
    format_timestamp,
    ordinal_key,
    review_hash,
    shown,
)

log = logging.getLogger(__name__)

# Words that can reverse or end what a statement with the same specifics said. Lowercase; matched as whole words.
CHANGE_WORDS = frozenset(
    """
    not no never nor none nobody nothing cannot can't won't isn't aren't wasn't weren't doesn't don't didn't hasn't
    haven't hadn't shouldn't wouldn't couldn't longer anymore cancel cancelled canceled cancels cancelling
    cancellation postponed postpone rescheduled reschedule delayed moved moving left leaving quit quits former
    formerly previously ex retired retire ended ends stopped stops replaced replaces instead changed changes switched
    wrong incorrect mistaken outdated obsolete deprecated removed deleted closed dropped declined rejected lost
    expired revoked dead died divorced fired resigned sold broke broken failed fails but however although though
    except unless actually correction corrected update updated
    """.split()  # noqa: SIM905 (a word list reads better as text)
)
_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")


def words(text: str) -> set[str]:
    return {w.lower().replace("’", "'") for w in _WORD.findall(text)}


@dataclass(frozen=True)
class Subsumption:
    """``kept`` takes in ``covered``: members of one near-duplicate component whose every specific it holds."""

    kept: StoredEntry
    covered: tuple[StoredEntry, ...]


def _key(stored: StoredEntry) -> tuple[datetime, bytes]:
    return (stored.entry.created_at, ordinal_key(stored.id))


_DIGITS = re.compile(r"\d+")


class _Member:
    """What the pairwise checks of one component ask about a member, computed at most once per member: a component
    of k members is checked pair by pair (k² pairs), and re-reading a text's specifics, numbers and words for every
    pair was most of the subsumption stage's CPU on a large corpus (issue 27)."""

    __slots__ = ("_inventory", "_specifics", "_vocabulary", "_words", "digits", "stored")

    def __init__(self, stored: StoredEntry, vocabulary: Vocabulary) -> None:
        self.stored = stored
        self.digits = frozenset(_DIGITS.findall(stored.entry.content))
        self._vocabulary = vocabulary
        self._specifics: tuple[Specific, ...] | None = None
        self._inventory: Inventory | None = None
        self._words: set[str] | None = None

    @property
    def specifics(self) -> tuple[Specific, ...]:
        """Its specifics as the coverage check reads them (the cycle's vocabulary, its own lowercase evidence)."""
        if self._specifics is None:
            entry = self.stored.entry
            self._specifics = tuple(extract_specifics(entry.content, entry.category, self._vocabulary))
        return self._specifics

    @property
    def inventory(self) -> Inventory:
        """Its text's tokens: the shared memo's if it has them (read only here), else built and offered to it as a
        text merely read, which the memo drops before any merge's. At 100,000 entries subsumption tries ~27,000
        hosts: put in the memo as merges were, they pushed out the inventories validation and the end-of-run check
        ask for again, and ~13,000 were built twice (issue 27). ``subsume_component`` hands over the hosts it merges
        into, as the offline proposer does."""
        if self._inventory is None:
            text = self.stored.entry.content
            known = known_inventory(text)
            if known is None:
                known = Inventory.of(text)
                offer_inventory(text, known)
            self._inventory = known
        return self._inventory

    @property
    def words(self) -> set[str]:
        if self._words is None:
            self._words = words(self.stored.entry.content)
        return self._words


def _covers(host: _Member, other: _Member) -> bool:
    """Every specific of ``other`` is in ``host``'s text; ``other`` has at least one (a text with none says nothing
    the coverage check can hold, so it is never taken in on that check alone); and every number ``other`` writes,
    even one the coverage check does not count (a single digit), is written in ``host`` too: "Fact number 3 about
    the NAS backup job" is not a copy of "Fact number 12 about the NAS backup job", though the 3 is no specific.
    With no model asked, a difference the check cannot see must not be settled by it.

    The coverage check of one source against one text (``find_missing_specifics([other], host)``) is exactly "every
    specific ``other`` has on its own evidence is covered by ``host``'s inventory": asked that way, per member,
    not per pair. The cheap number test goes first: it needs no extraction."""
    if not other.digits <= host.digits:
        return False
    required = other.specifics
    if not required:
        return False
    inventory = host.inventory
    return all(inventory.covers(specific) for specific in required)


def _news(host: _Member, other: _Member) -> list[str]:
    """Words a member newer than its host says and the host does not, that can turn a statement round."""
    if _key(other.stored) <= _key(host.stored):
        return []
    return sorted((other.words - host.words) & CHANGE_WORDS)


def subsume_component(
    members: Sequence[StoredEntry], vocabulary: Vocabulary, near: Callable[[str, str], bool]
) -> list[Subsumption]:
    """Within one near-duplicate component: the member that can take in the most others goes first (ties: the
    newest), then the next among what is left. A member takes in another that is its own near-duplicate (``near``:
    similar at the threshold, not only linked through a third) and whose every specific it holds, unless that other
    is newer and may be news (``CHANGE_WORDS``). A member taken in, or that took others in, is settled; what is left
    of the component goes to the model."""
    ordered = sorted(members, key=_key, reverse=True)
    checked = [_Member(stored, vocabulary) for stored in ordered]
    # ``near`` is symmetric (a cosine or a Jaccard, and the same category rule both ways): asked once per pair.
    nearness: dict[tuple[str, str], bool] = {}
    takes: dict[str, list[StoredEntry]] = {}
    for member in checked:
        host_id = member.stored.id
        takes[host_id] = []
        for candidate in checked:
            other_id = candidate.stored.id
            if other_id == host_id or not candidate.digits <= member.digits:
                # ``_covers``'s cheapest refusal, asked before the similarity: in a large component most pairs write
                # numbers the other does not (83% at 10,000 entries), and a measure per pair grew with its square.
                continue
            pair = (host_id, other_id) if host_id < other_id else (other_id, host_id)
            is_near = nearness.get(pair)
            if is_near is None:
                is_near = nearness[pair] = near(host_id, other_id)
            if not is_near or not _covers(member, candidate):
                continue
            news = _news(member, candidate)
            if news:
                log.info(
                    "%s not subsumed into %s: it is newer and says %s, which %s does not",
                    other_id,
                    host_id,
                    ", ".join(repr(w) for w in news),
                    host_id,
                )
                continue
            takes[host_id].append(candidate.stored)
    found: list[Subsumption] = []
    settled: set[str] = set()
    while True:
        best: tuple[int, StoredEntry, list[StoredEntry]] | None = None
        for host in ordered:  # newest first: the first of the largest wins ties
            if host.id in settled:
                continue
            covered = [o for o in takes[host.id] if o.id not in settled]
            if covered and (best is None or len(covered) > best[0]):
                best = (len(covered), host, covered)
        if best is None:
            break
        _, host, covered = best
        found.append(Subsumption(host, tuple(covered)))
        settled.add(host.id)
        settled.update(c.id for c in covered)
    by_id = {member.stored.id: member for member in checked}
    for subsumption in found:
        # A host took another in, so ``_covers`` built its inventory: the successor's text, which validation's census
        # question and the end-of-run check read again.
        keep_inventory(subsumption.kept.entry.content, by_id[subsumption.kept.id].inventory)
    return found


def find_subsumptions(
    clusters: Sequence[Cluster],
    eligible: Sequence[StoredEntry],
    vocabulary: Vocabulary,
    near: Callable[[str, str], bool],
) -> list[Subsumption]:
    """Subsumptions inside every offered near-duplicate component (all its chunks, and any entry RockBot's
    chunking left over)."""
    by_id = {s.id: s for s in eligible}
    components: dict[int, set[str]] = {}
    for index, cluster in enumerate(clusters):
        key = cluster.component if cluster.component >= 0 else -1 - index
        components.setdefault(key, set()).update(i for i in (*cluster.ids, *cluster.leftover) if i in by_id)
    found: list[Subsumption] = []
    for ids in components.values():
        if len(ids) >= 2:
            found += subsume_component([by_id[i] for i in sorted(ids)], vocabulary, near)
    return found


def successor_of(kept: Entry, covered: Sequence[Entry], now: datetime) -> Entry:
    """What the kept entry becomes: its text untouched, the others' counters and provenance taken in (RockBot's
    fold arithmetic), and stamped reviewed (its text was judged this cycle)."""
    entries = [kept, *covered]
    metadata = dict(kept.metadata or {})
    for other in covered:
        for key, value in (other.metadata or {}).items():
            if key not in BOOKKEEPING_KEYS and key not in metadata:
                metadata[key] = value
    provenance = [x for x in (metadata.get(MERGED_FROM) or "").split(",") if x]
    known = {x.casefold() for x in provenance}
    provenance += [e.id for e in covered if e.id.casefold() not in known]
    now_text = format_timestamp(now)
    metadata.update(
        {
            MERGED_FROM: ",".join(provenance),
            MERGED_AT: now_text,
            REVIEWED_HASH: review_hash(kept.content),
            REVIEWED_AT: now_text,
        }
    )
    for key in (UNUSABLE_HASH, UNUSABLE_AT, UNUSABLE_COUNT):  # reviewed: any back-off after unusable replies ends
        metadata.pop(key, None)
    return kept.evolve(
        tags=tag_union(kept.tags, *(e.tags for e in covered)),
        metadata=metadata,
        created_at=min(e.created_at for e in entries),
        importance_score=max(e.importance_score for e in entries),
        last_seen_at=max(e.seen_at for e in entries),
        reinforcement_count=reinforcement_sum(entries),
    )


def merge_of(found: Subsumption, now: datetime) -> MergeAction:
    successor = successor_of(found.kept.entry, [c.entry for c in found.covered], now)
    log.info(
        "subsumed [%s] into %s (%s) — it holds every specific of theirs, no model asked: %s",
        ", ".join(c.id for c in found.covered),
        found.kept.id,
        found.kept.entry.category or "uncategorized",
        shown(found.kept.entry.content),
    )
    return MergeAction(successor, list(found.covered), into=found.kept, subsumed=True)


__all__ = ["CHANGE_WORDS", "Subsumption", "find_subsumptions", "merge_of", "subsume_component", "successor_of", "words"]
