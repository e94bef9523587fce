"""#18 finding 8: a capitalised ordinary word that opens a sentence is no specific ("Met", "Repo", "Merge"), so a
merge may start its sentences differently from its sources — but names that are words stay protected there."""

from __future__ import annotations

import pytest

from dreamkeeper.coverage import SourceText, Vocabulary, extract_specifics, find_missing_specifics
from dreamkeeper.coverage.lexicon import is_plain_english_word


def texts(text: str, vocabulary: Vocabulary | None = None) -> list[str]:
    return [s.text for s in extract_specifics(text, vocabulary=vocabulary or Vocabulary())]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Met Tomasz Whitfield on 2026-04-19.", ["Tomasz", "Whitfield", "2026-04-19"]),
        ("Repo moved to the new organisation. Merge freeze starts Friday.", ["Friday"]),
        ("Tailspin hired Priya.", ["Priya"]),  # a word that is no listed name, alone, opens a sentence
        ("She prefers agendas. Booked the Lisbon flight.", ["Lisbon"]),
        ("Asked Trish about the W-9. Called Allen twice.", ["Trish", "W-9", "Allen"]),
    ],
)
def test_finding8_ordinary_sentence_openers_are_not_specifics(text: str, expected: list[str]) -> None:
    assert texts(text) == expected


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("Rose prefers tea. Hunter called.", {"Rose", "Hunter"}),  # names that are words
        ("Slack is down again.", {"Slack"}),  # products that are words
        ("Hector phoned. I thanked Hector.", {"Hector"}),  # named mid-sentence in the same text
        ("Personal OneDrive holds the notes.", {"Personal", "OneDrive"}),  # first word of a multi-word name
        ("Briefing and Triage completed", {"Briefing", "Triage"}),  # coordinated names (RockBot's vector)
        ("March 3 is the deadline.", {"March"}),  # a month in a date
    ],
)
def test_names_that_are_words_stay_protected_at_sentence_start(text: str, kept: set[str]) -> None:
    assert kept <= set(texts(text))


def test_a_deployments_always_specific_word_wins_at_sentence_start() -> None:
    assert texts("Tailspin hired Priya.", Vocabulary(always_specific_words=("Tailspin",))) == ["Tailspin", "Priya"]


def test_finding8_a_merge_that_opens_differently_is_not_a_loss() -> None:
    sources = [SourceText("Met Tomasz Whitfield on 2026-04-19 about the renewal.", "people/tomasz")]
    assert find_missing_specifics(sources, "Tomasz Whitfield: renewal meeting on 2026-04-19.") == []
    # Dropping the person is still caught.
    assert find_missing_specifics(sources, "Renewal meeting on 2026-04-19.") == ["Tomasz", "Whitfield"]


def test_plain_english_words_are_regular_inflections_only() -> None:
    assert all(is_plain_english_word(w) for w in ("met", "merged", "asked", "repos", "boxes", "booking", "she"))
    # The loose lowercase rule reads these as jam+es and and+ers; names must not be demoted that way.
    assert not any(is_plain_english_word(w) for w in ("james", "anders", "walters"))
