"""Proposals refused before any check runs, because they are useless or misleading (issue 23 item 3).

Measured with Qwen2.5-Coder 1.5B: without the grammar it wrote 17 single-source "merges" (6 verbatim copies of
their source, one prefixing "Met " to a job title, which changed its meaning); offered one cluster in the full offer
layout it wrote the offer's header line as the merged text, with ``"ID:083200b7a724"`` as its source; and it
prefixed a merged text with a source id (``[7d2eb8c68286] …``). Each passes or confuses the coverage check (the
header line holds the sources' dates; an id is an "invented" specific, so a repair request is spent on it), and a
single-source rewrite consolidates nothing while risking a reworded fact. So they are refused first, each with
its reason, counted (``refusedRestating``, ``refusedLayout``, ``refusedNotation``) and logged with the text; the
sources are shielded from pruning as for any refused merge, and nothing is stamped declined on their account.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Literal

from dreamkeeper.memory import StoredEntry

Refusal = Literal["restates", "layout", "notation"]

# How a refusal's reason starts in the report, by kind (its count in ``Decisions.counts``).
REASON_PREFIX: dict[Refusal, str] = {
    "restates": "useless",
    "layout": "copies the offer",
    "notation": "offer notation",
}

# The offer's entry header (prompts.entry_header): "3. [ID:abc] category=… importance=0.88 reinforced=7× first=…".
_HEADER_KEYS = re.compile(r"\b(?:category|importance|reinforced|first|last|tags)=", re.I)
MIN_ID_CHARS = 8  # RockBot's ids are 12 hex characters
# A placeholder a model copied from a reply format: "<the one entry>" (Qwen2.5-Coder 0.5B), "...", "<text>".
_PLACEHOLDER = re.compile(r"<[^<>]{0,60}>|\.{3}|…|\[[^\[\]]{0,60}\]")
_ID_NOTATION = re.compile(r"\[\s*ID\s*:", re.I)
_NUMBERED_ID = re.compile(r"^\s*\d+\.\s*\[", re.M)
_OFFER_HEADING = re.compile(
    r"There are \d+ memory entries|Near-duplicate cluster( \(offered again\))?:|Other entries:"
    r"|Consolidate only what is shown"
)


def in_offer_notation(raw: object) -> bool:
    """An id written as the offer writes it (``ID:…`` or ``[ID:…]``), not as the id itself."""
    text = str(raw).strip().lstrip("[").strip()
    return text[:3].lower() == "id:"


def _normalised(text: str) -> str:
    return " ".join(text.split()).casefold()


def copies_layout(content: str, offered_ids: Iterable[str], sources: Sequence[str] = ()) -> str | None:
    """What of the offer's own layout the merged text copies, if any (an id its sources themselves say is no copy)."""
    if _PLACEHOLDER.fullmatch(content.strip()):
        return "a placeholder, not a text"
    if _ID_NOTATION.search(content):
        return "an [ID:…] marker"
    if _NUMBERED_ID.search(content):
        return "a numbered entry line"
    if len(_HEADER_KEYS.findall(content)) >= 2:
        return "the entry header line (category=, importance=…)"
    if _OFFER_HEADING.search(content):
        return "the offer's heading"
    said = " ".join(sources)
    # Every offered id is looked for in every merge: compiling a pattern per id and merge was a sixth of validation's
    # CPU on a cold cycle (issue 27). In an ASCII text an ASCII id can only match (case-insensitively) where its
    # lowercase is a substring of the text's lowercase, so ids failing that are skipped; any other text or id is
    # asked the pattern, since re.IGNORECASE matches beyond ASCII case ("ſ" matches "s", "K" (Kelvin) matches "k").
    lowered = content.lower() if content.isascii() else None
    for entry_id in offered_ids:
        if len(entry_id) < MIN_ID_CHARS:
            continue  # a short id ("a", "milo1") is an ordinary word as often as it is an id
        if lowered is not None and entry_id.isascii() and entry_id.lower() not in lowered:
            continue
        word = re.compile(rf"(?<!\w){re.escape(entry_id)}(?!\w)", re.I)
        if word.search(content) and not word.search(said):
            return f"the id {entry_id}"
    return None


def useless(
    content: str,
    raw_source_ids: Sequence[object],
    sources: Sequence[StoredEntry],
    offered_ids: Iterable[str],
    restates_another: bool = False,
) -> tuple[Refusal, str] | None:
    """Why a merge is refused before it is checked, or None. ``restates_another``: the text is another live entry's,
    word for word: a merge of one source into it (RockBot folds it into that entry) consolidates, it is no rewording."""
    notation = [str(raw) for raw in raw_source_ids if in_offer_notation(raw)]
    if notation:
        return "notation", f"names its source(s) in the offer's notation ({', '.join(notation[:3])}), not as ids"
    layout = copies_layout(content, offered_ids, [s.entry.content for s in sources])
    if layout is not None:
        return "layout", f"its text copies the offer's layout ({layout})"
    if len(sources) == 1 and not restates_another:
        if _normalised(content) == _normalised(sources[0].entry.content):
            return "restates", "a merge of one entry that only repeats it"
        return "restates", "a merge of one entry that only rewords it (nothing is consolidated)"
    return None


__all__ = ["REASON_PREFIX", "Refusal", "copies_layout", "in_offer_notation", "useless"]
