"""The invention check (#18 finding 7): a merge may state no specific that none of its sources states."""

from __future__ import annotations

import pytest

from dreamkeeper.coverage import SourceText, extract_specifics, find_invented_specifics

TOMASZ = [
    SourceText("Met Tomasz Whitfield on 2026-04-19 about the Tailspin renewal.", "people/tomasz"),
    SourceText("Tomasz's e-mail is tomasz.whitfield@tailspin.example; phone 612-555-1234.", "people/tomasz"),
]


@pytest.mark.parametrize(
    ("merged", "invented"),
    [
        # The two SmolLM2 merges of finding 7: a date no source had, a made-up contact.
        ("Met Tomasz Whitfield (2017-03-04) about the Tailspin renewal.", ["2017-03-04"]),
        ("Tomasz Whitfield; contact John Smith at johnsmc_johnsales.com.", ["John", "johnsmc_johnsales.com", "Smith"]),
        ("Tomasz Whitfield's phone is 612-555-9876.", ["612-555-9876"]),
        ("Tomasz Whitfield's phone is +44 612-555-1234.", []),  # a country code added, as coverage allows
        ("Tomasz Whitfield's phone is +1 712-555-1234.", ["+1 712-555-1234"]),
        ("Tomasz Whitfield renews for $12,500 on 2026-04-19.", ["12,500"]),
        ("Tomasz Whitfield of Contoso renews on 2026-04-19.", ["Contoso"]),
        ("Tomasz Whitfield, tomasz@tailspin.example, 2026-04-19.", ["tomasz@tailspin.example"]),
    ],
)
def test_finding7_specifics_no_source_states_are_invented(merged: str, invented: list[str]) -> None:
    assert find_invented_specifics(TOMASZ, merged) == invented


@pytest.mark.parametrize(
    "merged",
    [
        "Met Tomasz Whitfield on 2026-04-19 about the Tailspin renewal. Tomasz's e-mail is "
        "tomasz.whitfield@tailspin.example; phone 612-555-1234.",
        # Other spellings of what the sources say: date, phone, possessive; a different sentence opener.
        "Tomasz Whitfield (tomasz.whitfield@tailspin.example, (612) 555-1234): renewal meeting April 19, 2026.",
        "Renewal: met Tomasz Whitfield on 4/19/2026. Reach him at 6125551234 or tomasz.whitfield@tailspin.example.",
        "Meeting notes. Tomasz Whitfield discussed the Tailspin renewal on 2026-04-19.",
        "Tomasz Whitfield, +1 612-555-1234, tomasz.whitfield@tailspin.example: Tailspin renewal, 2026-04-19.",
    ],
)
def test_content_preserving_restatements_invent_nothing(merged: str) -> None:
    assert find_invented_specifics(TOMASZ, merged) == []


def test_what_the_offer_showed_about_the_sources_may_be_repeated() -> None:
    merged = "Tomasz Whitfield (first noted 2026-03-02): Tailspin renewal on 2026-04-19."
    assert find_invented_specifics(TOMASZ, merged) == ["2026-03-02"]
    assert find_invented_specifics(TOMASZ, merged, shown=["people/tomasz 2026-03-02"]) == []


def test_numbers_count_in_every_category() -> None:
    # No numeric exemption for the merged text: a number the telemetry sources never said is still invented...
    sources = [SourceText("Routing to Fabrikam took 42 ms.", "anti-patterns/routing")]
    assert find_invented_specifics(sources, "Routing to Fabrikam took 97 ms.") == ["97"]
    # ...while the sources' own numbers, never specifics there, are stated by them.
    assert extract_specifics(sources[0].text, sources[0].category) == extract_specifics("Fabrikam")
    assert find_invented_specifics(sources, "Routing to Fabrikam: 42 ms.") == []
