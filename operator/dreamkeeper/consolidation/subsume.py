"""Subsumption: a near-duplicate cluster settled with no model, when one member already says everything (issue 23).

On the sample agent 23 of the 35 clusters a cold cycle offers have a member that holds every specific of the
others: the coverage check itself says keeping that one loses nothing, yet a small model asked about them declined
all 35. Such a cluster needs no model. Its other members are archived ``merged into`` the member that holds
everything (the merge is folded into that live entry: its text is kept byte for byte, its counters and provenance
take in theirs), and the merge goes through the census, the floor and the blast radius like any other.

Which member, and how a contradiction is ruled out (the issue asks to say how it is decided):

* every member a candidate whose text covers every specific of every other member of the component (the
  coverage check, with the cycle's vocabulary), and **the newest candidate** (``createdAt``, then id) is kept:
  when two statements hold the same specifics, the later one is how the agent says it now;
* a member **newer** than the one kept may only be taken in when it adds no word that can turn a statement round:
  a negation, a cancellation, an ending, a correction (``CHANGE_WORDS``). "Met Bob on 2026-05-01" and, later, "the
  2026-05-01 meeting with Bob was cancelled" share every specific; the later one is no duplicate, it is news.
  Such a cluster is not settled here; the model is asked, as for any other cluster.

An older member saying the opposite of the newest is settled by recency, as a merge would settle it; its text stays
in the archive, restorable, with its id in the survivor's ``mergedFrom``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from dreamkeeper.consolidation.clustering import Cluster
from dreamkeeper.consolidation.fold import reinforcement_sum, tag_union
from dreamkeeper.consolidation.plan import MergeAction
from dreamkeeper.coverage import SourceText, Vocabulary, find_missing_specifics
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
    """One cluster (a whole near-duplicate component) settled: ``kept`` takes in ``covered``."""

    clusters: tuple[tuple[str, ...], ...]  # the cluster ids of the component (its chunks)
    kept: StoredEntry
    covered: tuple[StoredEntry, ...]


def _newest_first(members: Sequence[StoredEntry]) -> list[StoredEntry]:
    return sorted(members, key=lambda s: (s.entry.created_at, ordinal_key(s.id)), reverse=True)


def subsumer(members: Sequence[StoredEntry], vocabulary: Vocabulary) -> StoredEntry | None:
    """The member that takes the others in, or None (no member covers them all, or a newer one may say news)."""
    for candidate in _newest_first(members):
        others = [m for m in members if m.id != candidate.id]
        texts = [SourceText(text=m.entry.content, category=m.entry.category) for m in others]
        if find_missing_specifics(texts, candidate.entry.content, vocabulary):
            continue
        said = words(candidate.entry.content)
        newer = [m for m in others if (m.entry.created_at, ordinal_key(m.id)) > _key(candidate)]
        news = sorted({w for m in newer for w in words(m.entry.content) - said} & CHANGE_WORDS)
        if news:
            log.info(
                "not subsumed into %s: newer member(s) [%s] say %s, which it does not; the model is asked",
                candidate.id,
                ", ".join(m.id for m in newer),
                ", ".join(repr(w) for w in news),
            )
            return None
        return candidate
    return None


def _key(stored: StoredEntry) -> tuple[datetime, bytes]:
    return (stored.entry.created_at, ordinal_key(stored.id))


def find_subsumptions(
    clusters: Sequence[Cluster], eligible: Sequence[StoredEntry], vocabulary: Vocabulary
) -> list[Subsumption]:
    """Every offered near-duplicate component (all its chunks together) that one member covers."""
    by_id = {s.id: s for s in eligible}
    components: dict[int, list[Cluster]] = {}
    for index, cluster in enumerate(clusters):
        components.setdefault(cluster.component if cluster.component >= 0 else -1 - index, []).append(cluster)
    found = []
    for chunks in components.values():
        ids = sorted({i for c in chunks for i in c.ids})
        if any(i not in by_id for i in ids):
            continue
        members = [by_id[i] for i in ids]
        kept = subsumer(members, vocabulary)
        if kept is not None:
            covered = tuple(m for m in members if m.id != kept.id)
            found.append(Subsumption(tuple(c.ids for c in chunks), kept, covered))
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


__all__ = ["CHANGE_WORDS", "Subsumption", "find_subsumptions", "merge_of", "subsumer", "successor_of", "words"]
