"""Source-less ``toSave`` items: a new entry the model writes from what it was shown, not from merged entries.

RockBot saves them (DreamService.cs @05346ff0, ``RunMemoryConsolidationPassAsync``: a ``toSave`` whose
``sourceIds`` resolve to nothing has no sources to cover, so the coverage check passes, and it is saved as a new
entry: ``createdAt``/``lastSeenAt`` now, reinforcement 1, importance the model's or 0.5, category and tags the
model's, no provenance). Its built-in directive asks for exactly that: anti-pattern entries
(``anti-patterns/{domain}``, tag ``anti-pattern``) written from the Correction feedback signals the prompt shows.
dreamkeeper refused them, and that learning was lost.

They are saved here too, behind the safeguards that fit a text with no sources (the coverage and invention checks
compare a merge with its sources, so they do not apply):

* **something to derive it from**: the cycle offered feedback signals (without them there is nothing a new
  entry could come from but the model's imagination);
* **the census, for additions**: every identity specific the text states (a name, acronym, e-mail, phone, account
  id) is said by the live corpus or by the feedback signals shown; a name from nowhere is refused;
* **a per-cycle cap** (``sourceless_saves_max_per_cycle``, default 5; 0 refuses them all, dreamkeeper's old rule);
* **provenance**: ``derivedFrom: feedback`` and the cycle's id in the new entry's metadata;
* **the blast radius**: a saved entry never offsets what a plan takes out (blast.py counts only successors of
  merges with sources);
* a text that restates a live entry exactly is folded into it, as RockBot's ``FindExactDuplicateAsync`` does.

Each save and each refusal is logged at INFO with the text, and counted (``sourcelessSaved``,
``sourcelessRefused``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from dreamkeeper.coverage import IDENTITY_KINDS, CoverageIndex, Inventory, Specific, Vocabulary, extract_specifics
from dreamkeeper.memory import (
    CREATED_BY_CYCLE,
    REVIEWED_AT,
    REVIEWED_HASH,
    Entry,
    InvalidCategoryError,
    StoredEntry,
    format_timestamp,
    review_hash,
    shown,
    shown_all,
    validate_category,
)

log = logging.getLogger(__name__)

DERIVED_FROM = "derivedFrom"
FROM_FEEDBACK = "feedback"
DEFAULT_IMPORTANCE = 0.5  # RockBot: ``applied.Importance ?? 0.5f`` when there are no sources


@dataclass
class SourcelessGate:
    """One cycle's source-less saves: what they may be derived from, and how many were taken."""

    feedback: Sequence[str]  # the feedback lines the cycle showed the model
    cap: int
    saved: int = 0
    refused: int = 0
    _index: CoverageIndex | None = None
    _feedback: Inventory | None = None
    _live: Sequence[StoredEntry] = field(default_factory=tuple)

    def bind(self, live: Sequence[StoredEntry]) -> None:
        self._live = live

    def refusal(self, content: str, category: str | None, vocabulary: Vocabulary) -> str | None:
        """Why this text may not be saved, or None."""
        if self.cap <= 0:
            return "source-less saves are off (sourceless_saves_max_per_cycle 0)"
        if not self.feedback:
            return "no feedback signals were shown this cycle: nothing to derive a new entry from"
        if self.saved >= self.cap:
            return f"the cycle's cap of {self.cap} source-less save(s) is reached"
        identity = [s for s in extract_specifics(content, category, vocabulary) if s.kind in IDENTITY_KINDS]
        unknown = [s.text for s in identity if not self._said(s)]
        if unknown:
            return f"states {len(unknown)} identity specific(s) no live entry or feedback signal says: " + ", ".join(
                unknown
            )
        return None

    def _said(self, specific: Specific) -> bool:
        if self._feedback is None:
            self._feedback = Inventory()
            for line in self.feedback:
                self._feedback.add(line)
        if self._feedback.covers(specific):
            return True
        if self._index is None:
            self._index = CoverageIndex()
            for stored in self._live:
                self._index.add(stored.entry.content)
        return self._index.covers(specific)


def sourceless_entry(
    entry_id: str,
    content: str,
    category: str | None,
    tags: Sequence[str],
    importance: float | None,
    cycle_id: str,
    now: datetime,
) -> Entry:
    """The new entry, with RockBot's arithmetic for a save with no sources and dreamkeeper's provenance."""
    now_text = format_timestamp(now)
    kept_tags: list[str] = []
    for tag in tags:
        if isinstance(tag, str) and tag.strip() and tag not in kept_tags:
            kept_tags.append(tag)
    value = DEFAULT_IMPORTANCE if importance is None else min(1.0, max(0.0, float(importance)))
    return Entry(
        id=entry_id,
        content=content,
        category=_category(category),
        tags=kept_tags,
        created_at=now,
        updated_at=now,
        last_seen_at=now,
        reinforcement_count=1,
        importance_score=value,
        metadata={
            DERIVED_FROM: FROM_FEEDBACK,
            CREATED_BY_CYCLE: cycle_id,
            # Stamped reviewed, as dreamkeeper's merge outputs are: it was written by this review.
            REVIEWED_HASH: review_hash(content),
            REVIEWED_AT: now_text,
        },
    )


def _category(raw: str | None) -> str | None:
    if raw is None or not raw.strip():
        return None
    try:
        return validate_category(raw.strip().strip("/"))
    except InvalidCategoryError as exc:
        log.warning("source-less save proposed an invalid category (%s); saved uncategorized", exc)
        return None


def log_saved(entry: Entry) -> None:
    log.info(
        "saved source-less entry %s (%s, derived from feedback; importance=%.2f): %s",
        entry.id,
        entry.category or "uncategorized",
        entry.importance_score,
        shown(entry.content),
    )


def log_refused(content: str, source_ids: Sequence[str], why: str) -> None:
    named = f" (sourceIds {shown_all(repr(str(i)) for i in source_ids)} name nothing offered)" if source_ids else ""
    log.info("refused source-less save%s — %s: %s", named, why, shown(content))


__all__ = ["DERIVED_FROM", "FROM_FEEDBACK", "SourcelessGate", "log_refused", "log_saved", "sourceless_entry"]
