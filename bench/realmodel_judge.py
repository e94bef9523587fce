"""An independent judge of a cycle's decisions, for the real-model bench (#18 item 8).

It shares no code with dreamkeeper's checks (``dreamkeeper.coverage``): its facts are found by its own regular
expressions, and what counts as a name comes from the corpus itself, not from a dictionary or a stoplist. A word is
a name when the corpus writes it capitalised where a sentence does not start and never writes it in lowercase (so
"Tomasz" is a name wherever it stands, "Met" never is); in a merged text, a capitalised word mid-sentence that no
source has is a new name too ("John Smith"). Dates are compared as calendar days, phones by their digits (a
country code may be added), numbers without thousands separators. Everything else is lowercase comparison.

Declines are graded too, by the ground truth of the corpus (the bench passes which declined clusters held two
entries of one fact): a missed duplicate counts against the cycle as a false rejection does.

Verdicts: an accepted merge is *lossy* when a source fact is missing from it and *inventive* when it states a fact
no source states; a rejected merge neither lossy nor inventive is a *false rejection*; an allowed prune *removed a
last mention* when a name, e-mail, phone or date of the entry is said by no live entry after the cycle; a refused
prune was *needed* when allowing it would have done that.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

MONTHS = {
    name: i
    for i, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_EMAIL = re.compile(r"[\w.+'-]+@[\w-]+(?:\.[\w-]+)+")
_HOST = re.compile(r"(?<![@\w.])(?:https?://)?(?:[\w-]+\.)+[a-z]{2,}(?:/[^\s,;)]*)?", re.I)
_ISO = re.compile(r"(?<!\d)(\d{4})[-/](\d{1,2})[-/](\d{1,2})(?!\d)")
_MDY = re.compile(r"(?<!\d)(\d{1,2})/(\d{1,2})/(\d{4})(?!\d)")
_MONTH_FIRST = re.compile(rf"\b({_MONTH})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I)
_DAY_FIRST = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH})\.?,?\s+(\d{{4}})\b", re.I)
_PHONE = re.compile(r"(?<![\w-])\+?\(?\d[\d\s().-]{5,}\d")  # not inside a host name (gpu-03 (10.0.40.70)
_NUMBER = re.compile(r"(?<![\w.])\d[\d,.:]*\d(?![\w])")
_CAPITALISED = re.compile(r"\b[A-Z][A-Za-z'’]*\b")
_LOWER_WORD = re.compile(r"\b[a-z][a-z'’]*\b")

Fact = tuple[str, str]  # (kind, key)
IDENTITY = ("name", "email", "phone", "date")  # what a prune must not take out of the live corpus


def _sentence_start(text: str, start: int) -> bool:
    """After the start, a sentence end, a colon or semicolon, a new line or a bullet (no abbreviation rules)."""
    i = start - 1
    while i >= 0 and text[i] in " \t\"'(“‘":
        i -= 1
    return i < 0 or text[i] in ".!?:;\n-*•"


def _word(token: str) -> str:
    lowered = token.lower()
    return lowered[:-2] if lowered.endswith(("'s", "’s")) else lowered


@dataclass(frozen=True)
class Lexicon:
    """The corpus's own names: written capitalised mid-sentence somewhere and never in lowercase."""

    names: frozenset[str]

    @classmethod
    def of(cls, texts: Iterable[str]) -> Lexicon:
        capitalised: set[str] = set()
        lowercase: set[str] = set()
        for text in texts:
            prose = _HOST.sub(" ", _EMAIL.sub(" ", text))  # "tomasz.whitfield@..." is no lowercase "tomasz"
            lowercase.update(m.group().lower() for m in _LOWER_WORD.finditer(prose))
            for match in _CAPITALISED.finditer(text):
                if len(match.group()) > 1 and not _sentence_start(text, match.start()):
                    capitalised.add(_word(match.group()))
        return cls(frozenset(capitalised - lowercase))


def _iso(year: str, month: int, day: str) -> str:
    return f"{int(year):04d}-{month:02d}-{int(day):02d}"


def facts(text: str, lexicon: Lexicon, *, new_names: bool = False) -> set[Fact]:
    """The facts a text states. ``new_names``: capitalised mid-sentence words count as names even when the corpus
    never wrote them (what a merge invents)."""
    found: set[Fact] = set()
    spans: list[tuple[int, int]] = []

    def taken(start: int, end: int) -> bool:
        return any(s < end and start < e for s, e in spans)

    def add(kind: str, key: str, start: int, end: int) -> None:
        found.add((kind, key))
        spans.append((start, end))

    for m in _EMAIL.finditer(text):
        add("email", m.group().lower().rstrip("."), *m.span())
    for m in _HOST.finditer(text):
        if not taken(*m.span()) and not m.group()[0].isdigit():
            add("host", m.group().lower().rstrip("."), *m.span())
    for m in _ISO.finditer(text):
        add("date", _iso(m.group(1), int(m.group(2)), m.group(3)), *m.span())
    for m in _MDY.finditer(text):
        if not taken(*m.span()):
            add("date", _iso(m.group(3), int(m.group(1)), m.group(2)), *m.span())
    for m in _MONTH_FIRST.finditer(text):
        add("date", _iso(m.group(3), MONTHS[m.group(1).lower()], m.group(2)), *m.span())
    for m in _DAY_FIRST.finditer(text):
        if not taken(*m.span()):
            add("date", _iso(m.group(3), MONTHS[m.group(2).lower()], m.group(1)), *m.span())
    for m in _PHONE.finditer(text):
        digits = re.sub(r"\D", "", m.group())
        if 7 <= len(digits) <= 15 and not taken(*m.span()):
            add("phone", digits, *m.span())
    for m in _NUMBER.finditer(text):
        if not taken(*m.span()):
            add("number", m.group().replace(",", "").rstrip(".:"), *m.span())
    for m in _CAPITALISED.finditer(text):
        word = _word(m.group())
        if taken(*m.span()) or len(word) < 2 or word in MONTHS:
            continue
        if word in lexicon.names or (new_names and not _sentence_start(text, m.start()) and not word.isdigit()):
            found.add(("name", word))
    return found


def _said(fact: Fact, said: set[Fact], words: set[str]) -> bool:
    kind, key = fact
    if fact in said:
        return True
    if kind == "name":
        return key in words
    if kind == "phone":
        return any(k == "phone" and (key.endswith(v) and len(key) - len(v) <= 3) for k, v in said)
    if kind == "number":
        return ("phone", key) in said
    return False


def _words(texts: Iterable[str]) -> set[str]:
    """Every word the texts use, in lowercase, with and without a possessive."""
    tokens = [t for text in texts for t in re.findall(r"[A-Za-z][A-Za-z'’]*", text)]
    return {t.lower() for t in tokens} | {_word(t) for t in tokens}


def missing(sources: Iterable[str], merged: str, lexicon: Lexicon) -> list[str]:
    """Source facts the merged text does not state."""
    kept = facts(merged, lexicon, new_names=True)
    words = _words([merged])
    wanted = set().union(*(facts(s, lexicon) for s in sources))
    return sorted(f"{k}:{v}" for k, v in wanted if not _said((k, v), kept, words))


def invented(sources: Iterable[str], merged: str, lexicon: Lexicon, shown: Iterable[str] = ()) -> list[str]:
    """Facts of the merged text no source (nor what the offer showed about them) states."""
    texts = [*sources, *shown]
    said = set().union(*(facts(s, lexicon, new_names=True) for s in texts))
    words = _words(texts)
    return sorted(f"{k}:{v}" for k, v in facts(merged, lexicon, new_names=True) if not _said((k, v), said, words))


def last_mentions(entry: str, live: Iterable[str], lexicon: Lexicon) -> list[str]:
    """Identity facts (names, e-mails, phones, dates) of ``entry`` that no text of ``live`` states."""
    texts = list(live)
    said = set().union(*(facts(t, lexicon, new_names=True) for t in texts)) if texts else set()
    words = _words(texts)
    return sorted(f"{k}:{v}" for k, v in facts(entry, lexicon) if k in IDENTITY and not _said((k, v), said, words))


@dataclass
class CycleVerdicts:
    """The judge's counts for one cycle, with examples (at most a few of each)."""

    merges_accepted: int = 0
    lossy_accepts: int = 0
    inventive_accepts: int = 0
    merges_rejected: int = 0
    false_rejections: int = 0
    prunes_allowed: int = 0
    prunes_removing_last_mention: int = 0
    prunes_refused: int = 0
    refusals_needed: int = 0
    # Declined clusters (shown, or settled by a rejection, and left whole), graded by the corpus's ground truth:
    # one that held two entries of one fact is a missed duplicate (issue 23: "0 lossy, 0 false rejections" hid 30).
    declines: int = 0
    missed_duplicates: int = 0
    examples: dict[str, list[dict[str, object]]] = field(default_factory=dict)

    def example(self, kind: str, **detail: object) -> None:
        shown = self.examples.setdefault(kind, [])
        if len(shown) < 3:
            shown.append(detail)


@dataclass(frozen=True)
class Decision:
    """What the cycle decided, as plain texts (the bench fills it from the plan and the report)."""

    accepted: list[tuple[list[str], str, list[str]]]  # (source texts, merged text, what the offer showed)
    rejected: list[tuple[list[str], str, list[str]]]
    pruned: list[str]  # contents of entries archived with no replacement
    refused: list[str]  # contents of entries whose prune was refused (floor, category or census)
    # Clusters declined this cycle: for each, whether the corpus's ground truth says it held a duplicate.
    declined: list[bool] = field(default_factory=list)


def judge(decision: Decision, live_after: Mapping[str, str], lexicon: Lexicon) -> CycleVerdicts:
    """Every decision of one cycle, judged against the live corpus after it (``live_after``: id -> content)."""
    v = CycleVerdicts()
    for sources, merged, shown in decision.accepted:
        v.merges_accepted += 1
        lost, added = missing(sources, merged, lexicon), invented(sources, merged, lexicon, shown)
        if lost:
            v.lossy_accepts += 1
            v.example("lossy_accept", missing=lost, merged=merged, sources=sources)
        if added:
            v.inventive_accepts += 1
            v.example("inventive_accept", invented=added, merged=merged, sources=sources)
    for sources, merged, shown in decision.rejected:
        v.merges_rejected += 1
        if not missing(sources, merged, lexicon) and not invented(sources, merged, lexicon, shown):
            v.false_rejections += 1
            v.example("false_rejection", merged=merged, sources=sources)
    for held_duplicate in decision.declined:
        v.declines += 1
        v.missed_duplicates += held_duplicate
    live = list(live_after.values())
    for content in decision.pruned:
        v.prunes_allowed += 1
        gone = last_mentions(content, live, lexicon)
        if gone:
            v.prunes_removing_last_mention += 1
            v.example("prune_removed_last_mention", gone=gone, content=content)
    for content in decision.refused:
        v.prunes_refused += 1
        others = list(live)
        if content in others:  # the refused entry is still live: would its prune have taken a last mention?
            others.remove(content)
        if last_mentions(content, others, lexicon):
            v.refusals_needed += 1
        else:
            v.example("needless_refusal", content=content)
    return v
