"""A seeded adversarial proposer whose every decision is a pure function of what it is shown.

"The same proposal stream" for two arms that are offered different things is defined as follows. Every decision
is drawn from a hash of (seed, cycle, decision kind, subject): the subject of a per-entry decision (prune, harm,
drift) is the entry's category and content, the subject of a merge decision is the fact family (the ``fact:`` tag
the miner wrote, standing in for a model's understanding that two notes say the same thing). So an entry, or a
family, offered to both arms in the same cycle meets exactly the same decision in both, regardless of offer order,
batching or ids. The arms differ only in what they are offered (the naive arm: the whole live corpus, every cycle;
dreamkeeper: its gated batches) and in what they then do with the reply.

Decisions, per offered entry, first match wins:
* status notes (``episodes/status``) are pruned with probability ``ephemeral_prune`` — the legitimate prune;
* with probability ``harm_rate`` a hostile act on the entry: prune it (whatever its importance or category),
  merge its offered family into a text that drops a name, a number or an e-mail, a blank merge of the family, or a
  merge whose source ids are invented;
* with probability ``drift_rate`` a rewrite in other words, which loses one specific with probability
  ``drift_loss``;
and per family with two or more untouched offered members, a content-preserving merge with probability
``merge_rate``. Per batch: a made-up id in ``toDelete`` and, when the request has other batches, an id that was only
offered in another batch.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.sim.world import EPHEMERAL_CATEGORY, FACT_TAG
from dreamkeeper.coverage import DEFAULT_VOCABULARY, SourceText, extract_specifics, find_missing_specifics

HARM_MODES: tuple[tuple[str, float], ...] = (
    ("prune", 0.40),
    ("drop-name", 0.15),
    ("drop-number", 0.15),
    ("drop-email", 0.10),
    ("blank", 0.10),
    ("invented", 0.10),
)
DESTRUCTIVE = {"prune", "drop-name", "drop-number", "drop-email", "blank", "drift-lossy"}

_SYNONYMS = {
    "prefers": "likes", "likes": "prefers", "uses": "relies on", "runs": "operates", "discussed": "talked about",
    "main": "primary", "primary": "main", "currently": "right now", "wants": "would like", "always": "reliably",
    "is": "is", "usual": "regular", "regular": "usual", "quick": "short", "short": "quick", "also": "as well",
    "fallback": "backup", "backup": "fallback", "agreed": "promised", "promised": "agreed", "flies": "travels",
    "travels": "flies", "contact": "point of contact", "returns": "gives back", "serves": "hosts", "hosts": "serves",
    "next": "upcoming", "upcoming": "next", "lives": "is kept", "met": "ran into", "orders": "gets", "gets": "orders",
}  # fmt: skip
_WORD = re.compile(r"[a-z]+")


@dataclass(frozen=True, slots=True)
class View:
    """What the adversary is shown of one offered entry (the fields a model would see)."""

    id: str
    content: str
    category: str | None
    tags: tuple[str, ...]
    importance: float
    reinforcement: int

    @property
    def family(self) -> str:
        for tag in self.tags:
            if tag.startswith(FACT_TAG):
                return tag
        return "solo:" + self.content

    @property
    def key(self) -> str:
        return f"{self.category}\x00{self.content}"


@dataclass
class Rates:
    # Defaults put the naive arm near the seed's 99.9% per-cycle row (one misjudgement in a thousand).
    harm_rate: float = 0.0017
    drift_rate: float = 0.017
    drift_loss: float = 0.1
    merge_rate: float = 0.3
    ephemeral_prune: float = 0.2
    ghost_ids: float = 0.5
    cross_batch_ids: float = 0.3
    repair_good: float = 0.4
    repair_bad: float = 0.2


@dataclass
class Tally:
    """What one arm was asked to do (counted when proposed, not when applied)."""

    counts: Counter[str] = field(default_factory=Counter)

    def add(self, what: str, n: int = 1) -> None:
        self.counts[what] += n


@dataclass
class Decision:
    """The reply for one batch, in RockBot's schema, plus what kind of act each part was."""

    to_save: list[dict[str, Any]] = field(default_factory=list)
    to_delete: list[str] = field(default_factory=list)
    acts: list[tuple[str, list[str]]] = field(default_factory=list)  # (mode, ids acted on)

    def as_reply(self) -> dict[str, Any]:
        return {"toSave": self.to_save, "toDelete": self.to_delete}


class Adversary:
    def __init__(self, seed: int, rates: Rates | None = None) -> None:
        self.seed = seed
        self.rates = rates or Rates()

    # ---- randomness keyed on what is shown ------------------------------------------------------------------

    def u(self, cycle: int, kind: str, subject: str) -> float:
        digest = hashlib.blake2b(f"{self.seed}|{cycle}|{kind}|{subject}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") / 2**64

    def _pick(self, cycle: int, kind: str, subject: str, options: Sequence[tuple[str, float]]) -> str:
        roll = self.u(cycle, kind, subject) * sum(w for _, w in options)
        for name, weight in options:
            roll -= weight
            if roll < 0:
                return name
        return options[-1][0]

    # ---- the decision function ------------------------------------------------------------------------------

    def decide(self, cycle: int, offered: Sequence[View], elsewhere: Sequence[View] = ()) -> Decision:
        """The reply to one batch. ``elsewhere``: entries offered only in the request's other batches."""
        rates = self.rates
        decision = Decision()
        families: dict[str, list[View]] = {}
        for view in offered:
            families.setdefault(view.family, []).append(view)
        consumed: set[str] = set()
        for family in sorted(families):
            members = sorted(families[family], key=lambda v: (v.key, v.id))
            for view in members:
                if view.id in consumed:
                    continue
                if view.category == EPHEMERAL_CATEGORY:
                    if self.u(cycle, "ephemeral", view.key) < rates.ephemeral_prune:
                        decision.to_delete.append(view.id)
                        decision.acts.append(("ephemeral-prune", [view.id]))
                        consumed.add(view.id)
                    continue
                if self.u(cycle, "harm", view.key) < rates.harm_rate:
                    mode = self._pick(cycle, "mode", view.key, HARM_MODES)
                    group = [m for m in members if m.id not in consumed]
                    self._harm(cycle, mode, view, group, decision)
                    consumed.update(ids for _, acted in decision.acts[-1:] for ids in acted)
                    consumed.add(view.id)
                    continue
                if self.u(cycle, "drift", view.key) < rates.drift_rate:
                    lossy = self.u(cycle, "drift-loss", view.key) < rates.drift_loss
                    text = paraphrase(view.content, self.u(cycle, "drift-words", view.key))
                    if lossy:
                        text = drop_specific(text, view.category, "any", self.u(cycle, "drift-drop", view.key))
                    self._merge(decision, "drift-lossy" if lossy else "drift", [view], text)
                    consumed.add(view.id)
            rest = [m for m in members if m.id not in consumed]
            if len(rest) >= 2 and self.u(cycle, "merge", family) < rates.merge_rate:
                self._merge(decision, "good-merge", rest, good_merge_text(rest))
                consumed.update(m.id for m in rest)
        subject = ",".join(sorted(v.key for v in offered))
        if self.u(cycle, "ghost", subject) < rates.ghost_ids:
            decision.to_delete.append(f"{int(self.u(cycle, 'ghost-id', subject) * 2**48):012x}")
            decision.acts.append(("ghost-id", []))
        if elsewhere and self.u(cycle, "cross", subject) < rates.cross_batch_ids:
            ordered = sorted(elsewhere, key=lambda v: (v.key, v.id))
            other = ordered[int(self.u(cycle, "cross-id", subject) * len(ordered))].id
            decision.to_delete.append(other)
            decision.acts.append(("cross-batch-id", [other]))
        return decision

    def _harm(self, cycle: int, mode: str, view: View, group: list[View], decision: Decision) -> None:
        if mode == "prune":
            decision.to_delete.append(view.id)
            decision.acts.append(("prune", [view.id]))
        elif mode == "blank":
            self._merge(decision, "blank", group, "")
        elif mode == "invented":
            invented = f"{int(self.u(cycle, 'invented', view.key) * 2**48):012x}"
            decision.to_save.append(
                {"content": f"Summary of notes about {view.content.split()[0]}.", "sourceIds": [invented]}
            )
            decision.acts.append(("invented", []))
        else:
            kind = mode.removeprefix("drop-")
            text = drop_specific(good_merge_text(group), view.category, kind, self.u(cycle, "drop", view.key))
            self._merge(decision, mode, group, text)

    def _merge(self, decision: Decision, mode: str, sources: list[View], text: str) -> None:
        ids = [s.id for s in sources]
        tags: list[str] = []
        for source in sources:
            tags += [t for t in source.tags if t not in tags]
        decision.to_save.append(
            {
                "content": text,
                "category": sources[0].category,
                "tags": tags,
                "sourceIds": ids,
                "importance": max(s.importance for s in sources),
            }
        )
        decision.to_delete.extend(ids)  # RockBot's prompt asks for every source in toDelete too
        decision.acts.append((mode, ids))

    def repair(self, cycle: int, content: str, missing: Sequence[str]) -> str | None:
        """Asked to restore dropped specifics: sometimes does, sometimes declines, sometimes returns it unchanged."""
        roll = self.u(cycle, "repair", content)
        if roll < self.rates.repair_good:
            return content.rstrip() + " (Also: " + ", ".join(missing) + ".)"
        if roll < self.rates.repair_good + self.rates.repair_bad:
            return content
        return None


# ---- text operations ------------------------------------------------------------------------------------------


def good_merge_text(sources: Sequence[View]) -> str:
    """A merge that keeps everything: the one text that already covers the rest, else the distinct texts joined."""
    texts: list[str] = []
    for source in sorted(sources, key=lambda s: -len(s.content)):
        if source.content not in texts:
            texts.append(source.content)
    whole = [SourceText(s.content, s.category) for s in sources]
    if not find_missing_specifics(whole, texts[0]):
        return texts[0]
    return " ".join(texts)


_KINDS = {"name": {"name", "caseless"}, "number": {"number", "date", "phone"}, "email": {"email"}}


def drop_specific(text: str, category: str | None, kind: str, roll: float) -> str:
    """Remove every occurrence of one specific of ``kind`` (any kind when there is none of it)."""
    found = extract_specifics(text, category, DEFAULT_VOCABULARY)
    wanted = [s for s in found if s.kind in _KINDS.get(kind, set())] or found
    if not wanted:
        return text
    victim = wanted[int(roll * len(wanted))].text
    pattern = re.compile(r"(?<![\w@.])" + re.escape(victim) + r"(?:['’]s)?(?![\w@])")
    dropped = pattern.sub("", text)
    if dropped == text:
        dropped = text.replace(victim, "")
    return re.sub(r"\s{2,}", " ", dropped).strip()


def paraphrase(text: str, roll: float) -> str:
    """Swap some ordinary words for others (never a capitalised word, a number or an address)."""
    words = text.split(" ")
    step = 2 + int(roll * 3)
    for index in range(int(roll * 7) % step, len(words), step):
        core = _WORD.fullmatch(words[index].rstrip(",.;:"))
        if core and core.group() in _SYNONYMS:
            tail = words[index][len(core.group()) :]
            words[index] = _SYNONYMS[core.group()] + tail
    out = " ".join(words)
    return out if out != text else "Noted: " + text
