"""The holes of RockBot's check (reference §6.1, §6.2, §6.6), each with a merge RockBot accepts and we reject.

`rockbot_missing` is an independent re-implementation of RockBot's documented check (bench/rockbot_reference.py);
each case first asserts that it really accepts the lossy merge, so the test shows the hole, then asserts ours
names exactly what was lost.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from bench.rockbot_reference import rockbot_missing

from dreamkeeper.coverage import SourceText, extract_specifics, find_missing_specifics


@dataclass(frozen=True)
class Hole:
    name: str
    source: str
    merged: str
    lost: tuple[str, ...]
    category: str | None = None


HOLES = [
    # §6.1 substring coverage
    Hole(
        "prose-covers-rose",
        "Rose runs the bakery on Main Street.",
        "She runs the Main Street bakery and writes prose.",
        ("Rose",),
    ),
    Hole("maybe-covers-may", "The draft went to Dr. May for approval.", "Maybe the draft needs approval.", ("May",)),
    Hole("2010-covers-10", "The meeting moved to the 10th.", "The meeting moved, as in 2010.", ("10",)),
    Hole("npm-covers-pm", "Deploys run at 9 PM nightly.", "Deploys run nightly through npm.", ("PM",)),
    # §6.2 unprotected specifics
    Hole(
        "email",
        "Reach Allen at allen@xebia.com or atconway@bellsouth.net.",
        "Reach Allen at allen@xebia.com.",
        ("atconway@bellsouth.net",),
    ),
    Hole(
        "url",
        "Slides are at https://example.com/talks/blazor and code at https://github.com/marimer/demo.",
        "Slides are at https://example.com/talks/blazor.",
        ("https://github.com/marimer/demo",),
    ),
    Hole("host", "Mail is hosted on lhotka.net and marimer.com.", "Mail is hosted on lhotka.net.", ("marimer.com",)),
    Hole(
        "path",
        "Backups go to /data/agent/backups and ~/archive/old.",
        "Backups go to /data/agent/backups.",
        ("~/archive/old",),
    ),
    Hole(
        "lowercase-identifier",
        "Connected accounts include marimer-work and rockyl.",
        "Connected accounts include marimer-work.",
        ("rockyl",),
    ),
    Hole(
        "hyphenated-identifier",
        "Mail goes out through marimer-work.",
        "Mail goes out through work.",
        ("marimer-work",),
    ),
    Hole("model-name", "The agent plans with gpt-4o.", "The agent plans with gpt-4.", ("gpt-4o",)),
    Hole("tax-form", "Rocky filed the W-9 form.", "Rocky filed the W-2 form.", ("W-9",)),
    Hole("letter-digit-code", "Backups live in S3.", "Backups live in the cloud.", ("S3",)),
    Hole("handle", "Follow @rockylhotka for updates.", "Follow Rocky for updates.", ("@rockylhotka",)),
    Hole(
        "phone-as-a-whole",
        "Her mobile is +33 6 12 34 56 78.",
        "Her mobile is +33 7 12 34 56 78.",
        ("+33 6 12 34 56 78",),
    ),
    Hole(
        "phone-digits-scattered",
        "Call Allen on +1 386 299 4605.",
        "Allen booked room 386 for 299 guests; the invoice was 4605, call +1 for help.",
        ("+1 386 299 4605",),
    ),
    Hole("two-letter-names", "Al and Ed joined the call.", "Two colleagues joined the call.", ("Al", "Ed")),
    Hole("chinese-name", "会议由王小明主持。", "会议已经开始。", ("会议由王小明主持",)),
    Hole("japanese-name", "田中さんは東京に住んでいます。", "田中さんは大阪に住んでいます。", ("東京",)),
    Hole("arabic-name", "اجتمع أحمد مع سارة", "اجتمع أحمد", ("سارة", "مع")),
    Hole("hebrew-name", "דוד נסע לחיפה", "דוד נסע", ("לחיפה",)),
    Hole(
        "name-only-inside-an-address",
        "Allen Conway is the new contact at Xebia.",
        "The new contact at Xebia is allen.conway@xebia.com.",
        ("Allen", "Conway"),
    ),
    # §6.6 numeric exemption also dropped ISO dates
    Hole(
        "iso-date-in-exempt-category",
        "Escalations spiked on 2026-08-19 at 8.33 per hour.",
        "Escalations spiked at a high rate.",
        ("2026-08-19",),
        category="anti-patterns/routing",
    ),
    # date equivalence that ignored the day, and a month credited although one occurrence was a person
    Hole("date-day-must-match", "The show is on August 3, 2026.", "The show is on 2026-08-04.", ("August",)),
    Hole(
        "single-digit-day-changed",
        "The show is on August 3, 2026.",
        "The show is on August 4, 2026.",
        ("August",),
    ),
    Hole(
        "month-person-beside-a-date",
        "August joined the band on August 19, 2026.",
        "The band gained a member on 2026-08-19.",
        ("August",),
    ),
]


@pytest.mark.parametrize("hole", HOLES, ids=lambda h: h.name)
def test_rockbot_accepts_what_we_reject(hole: Hole) -> None:
    sources = [SourceText(hole.source, hole.category)]
    assert rockbot_missing(sources, hole.merged) == [], "the case must show a RockBot false acceptance"
    assert find_missing_specifics(sources, hole.merged) == list(hole.lost)


@pytest.mark.parametrize("hole", HOLES, ids=lambda h: h.name)
def test_lossless_rewrite_of_the_same_source_is_accepted(hole: Hole) -> None:
    """The new rules must not reject the source itself, nor a merge that keeps it and adds to it."""
    sources = [SourceText(hole.source, hole.category)]
    assert find_missing_specifics(sources, hole.source) == []
    assert find_missing_specifics(sources, f"Summary: {hole.merged}\n{hole.source} (confirmed)") == []


@pytest.mark.parametrize(
    ("source", "merged"),
    [
        ("Her number is 612-555-1234.", "Her number is (612) 555-1234."),
        ("Her number is 612-555-1234.", "Her number is 612.555.1234."),
        ("Her number is 612-555-1234.", "Her number is +1 612 555 1234."),  # a country code added
        ("The invoice was 1,000 dollars.", "The invoice was 1000 dollars."),
        ("The summit ran on 2026-08-19.", "The summit ran on 2026/08/19."),
        ("The summit ran on 2026-08-19.", "The summit ran on 19 August 2026."),
        ("The summit ran on August 19th, 2026.", "The summit ran on 2026-08-19."),
        ("Rocky's account is marimer-work.", "The account (marimer-work) is Rocky's."),
        ("Accounts: marimer-work/xebia.", "Accounts: marimer-work and xebia."),
        ("Write to allen@xebia.com.", "Write to Allen.Conway or allen@XEBIA.com."),
        ("The host is xebia.com.", "Mail allen@xebia.com for access."),
        ("Uses STRASSE data.", "Uses straße data."),
        ("Mary-Jane called.", "Mary called, then Jane."),
        ("Email Allen at allen@xebia.com.", "Allen's work address is allen@xebia.com."),  # an opener verb
        ("The show is on August 19, 2026.", "The show is on Aug. 19, 2026."),
        ("The show is on August 19, 2026.", "The show is on Wednesday, 19th of August 2026."),
    ],
)
def test_equivalent_spellings_are_accepted(source: str, merged: str) -> None:
    assert find_missing_specifics([SourceText(source)], merged) == []


@pytest.mark.parametrize(
    ("source", "merged", "lost"),
    [
        ("Her number is +1 612-555-1234.", "Her number is 612-555-1234.", "+1 612-555-1234"),  # country code lost
        ("The summit ran on 2026-08-19.", "The summit ran on 8/19/2026.", "2026-08-19"),  # M/D vs D/M ambiguity
        ("The summit ran on 2026-08-19.", "The summit ran on 08-19.", "2026-08-19"),  # partial numerics never
        ("The recording starts at 2:00 PM.", "The recording starts at 14:00.", "2:00"),  # clock reformatting
        ("The account is marimer-work.", "The account is marimer work.", "marimer-work"),
        ("The meeting was on the 19th.", "The meeting was on 2019-01-01.", "19"),  # a number inside a date
        ("The show is on August 19, 2026.", "The show is on August 19.", "August"),  # the year is gone
        ("The show is on August 19, 2026.", "The show is on August 19, 2027.", "August"),
    ],
)
def test_non_equivalent_spellings_are_rejected(source: str, merged: str, lost: str) -> None:
    assert lost in find_missing_specifics([SourceText(source)], merged)


def test_lowercase_host_does_not_demote_a_surname() -> None:
    """RockBot's evidence rule read "lhotka" in "lhotka.net" as proof that "Lhotka" is an ordinary word."""
    found = {s.text: s.kind for s in extract_specifics("Rocky Lhotka owns lhotka.net.")}
    assert found == {"Rocky": "name", "Lhotka": "name", "lhotka.net": "host"}


def test_merged_text_cannot_demote_a_source_name() -> None:
    """Evidence comes from the sources only; the model's own wording must not switch off protection."""
    from dreamkeeper.coverage import required_specifics

    keys = {s.key for s in required_specifics([SourceText("Rose chairs the board.")])}
    assert "rose" in keys


@pytest.mark.parametrize(
    "text",
    [
        "Use e.g. the default, i.e. the U.S. plan at 9 a.m. today.",
        "The user prefers email and/or chat, a T-shirt, an e-mail, the top-10 list, low-signal words.",
        "The service runs 24/7 at 3pm, 16GB, 1080p, on the 2nd and 10th.",
        "Don't re-read what isn't needed; it's rock'n'roll.",
    ],
)
def test_ordinary_text_has_no_technical_specifics(text: str) -> None:
    technical = {"email", "url", "host", "path", "identifier", "phone", "caseless"}
    assert [s for s in extract_specifics(text) if s.kind in technical] == []


def test_a_number_ending_an_identifier_is_not_the_day_of_a_following_month() -> None:
    """ "W-9 May 2026" is the form W-9 and May 2026; read as 9 May 2026 it made a specific no single word held."""
    source = "Duane filed the W-9 May 2026."
    assert find_missing_specifics([SourceText(source)], "Duane filed the W-9 in May 2026.") == []
    assert "W-9" in find_missing_specifics([SourceText(source)], "Duane filed it in May 2026.")


def test_a_decimal_after_a_phone_is_not_part_of_it() -> None:
    """ "+1 386-299-4605 8.33": the phone and a value, not one 14-digit phone no part of the text states alone."""
    source = "Call Trish at +1 386-299-4605 8.33 times a week."
    assert find_missing_specifics([SourceText(source)], "Trish: +1 386-299-4605, 8.33 times a week.") == []
    assert "8.33" in find_missing_specifics([SourceText(source)], "Call Trish at +1 386-299-4605.")


def test_a_spaced_number_after_a_dashed_phone_is_not_part_of_it() -> None:
    """ "+1 386-299-4605 42": the phone and a count (a phone keeps one style once its groups are dashed)."""
    source = "Trish (+1 386-299-4605 42 times) called."
    assert find_missing_specifics([SourceText(source)], "Trish called 42 times from +1 386-299-4605.") == []
    assert "+1 386-299-4605" in find_missing_specifics([SourceText(source)], "Trish called 42 times.")
    assert find_missing_specifics([SourceText("Call +44 20 7946 0958.")], "Call +44 20 7946 0958.") == []
