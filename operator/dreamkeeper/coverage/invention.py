"""The invention check: a merged text may state no specific that none of its sources states (#18 finding 7).

The coverage check asks whether every source specific survives; it never asks whether new ones appear, so a merge
that added "(2017-03-04)" or a made-up contact "John Smith ... johnsmc_johnsales.com" passed. Here the merged text's
own specifics (extracted with no numeric exemption: any number counts) are looked up in the inventory of what the
model was shown about its sources — their texts and the header values of their offer (category, tags, dates).

Biased toward refusal like the coverage check: a false rejection keeps the sources one more cycle; a false
acceptance puts a fact nobody stated into the memory. The same spelling equivalences apply in reverse (a source's
"August 19, 2026" lets the merge say "2026-08-19" or "8/19/2026"; "$1,250" lets it say "$1250"), and a
capitalised ordinary word opening a sentence is no specific (`specifics.is_ordinary_opener`), so a merge may
start its sentences differently from its sources.
"""

from __future__ import annotations

from collections.abc import Sequence

from dreamkeeper.coverage import dates
from dreamkeeper.coverage.check import SourceText
from dreamkeeper.coverage.inventory import Inventory
from dreamkeeper.coverage.specifics import Specific, extract_specifics
from dreamkeeper.coverage.vocabulary import DEFAULT_VOCABULARY, Vocabulary


def said_by(sources: Sequence[SourceText], shown: Sequence[str] = ()) -> Inventory:
    """The inventory of everything the sources say: their texts, and ``shown`` (what the offer showed about them)."""
    inventory = Inventory()
    for source in sources:
        inventory.add(source.text)
    for text in shown:
        inventory.add(text)
    return inventory


def _states(specific: Specific, said: Inventory) -> bool:
    """Whether the sources state ``specific``: the coverage rule, and any spelling of a calendar date they state
    (the coverage rule refuses M/D/YYYY for an ISO date on the loss side, where ambiguity could hide a loss; here
    the date's own reading is looked up), a stated phone with a country code added or its digits run together."""
    if said.covers(specific):
        return True
    if specific.kind == "date":
        numeric = dates.numeric_date(specific.key)
        return numeric is not None and numeric.date.projection() in said.date_keys
    if specific.kind == "phone" and specific.text.startswith("+"):
        # "+1 612-555-1234" for a stated "612-555-1234": a country code added, as the coverage check allows.
        return any(specific.key[n:] in said.phones for n in (1, 2, 3))
    # "6125551234" is the phone "612-555-1234" written without separators.
    return specific.kind == "number" and specific.key.isdigit() and specific.key in said.phones


def find_invented_specifics(
    sources: Sequence[SourceText],
    merged: str,
    vocabulary: Vocabulary = DEFAULT_VOCABULARY,
    shown: Sequence[str] = (),
) -> list[str]:
    """Specifics of ``merged`` that no source states, first spelling once each, ordered case-insensitively.

    ``shown`` are further texts the model was shown about the sources (the offer's header values): a merge may
    repeat them. Lowercase evidence comes from the merged text and its sources together.
    """
    if any(source.text == merged for source in sources):
        # A source's own text states nothing its sources do not: every specific of a text is covered by that text's
        # tokens (tests/coverage/test_properties.py), and the sources' inventory holds them. The offline proposer's
        # merges are all such, and building the sources' inventory cost half of validation's CPU (issue 27).
        return []
    return invented_specifics(sources, merged, vocabulary, shown)


def invented_specifics(
    sources: Sequence[SourceText],
    merged: str,
    vocabulary: Vocabulary = DEFAULT_VOCABULARY,
    shown: Sequence[str] = (),
) -> list[str]:
    """`find_invented_specifics` computed in full, whatever the merged text is."""
    evidence = "\n".join([merged, *(source.text for source in sources)])
    said = said_by(sources, shown)
    invented = [s.text for s in extract_specifics(merged, None, vocabulary, evidence=evidence) if not _states(s, said)]
    return sorted(dict.fromkeys(invented), key=lambda text: (text.casefold(), text))
