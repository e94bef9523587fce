"""Every acceptance vector of RockBot's coverage check (reference §3.8), table-driven.

`exact` vectors must produce exactly the listed result; `superset` vectors must contain at least the listed
specifics (our check protects more kinds of specifics than RockBot did, so extra ones are allowed there).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from dreamkeeper.coverage import (
    SourceText,
    Specific,
    Vocabulary,
    extract_specifics,
    find_missing_specifics,
    load_vocabulary,
)
from dreamkeeper.coverage.stoplist import BASELINE_COMMON_WORDS


def texts(specifics: list[Specific]) -> set[str]:
    return {s.text for s in specifics}


# --- extraction --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Extraction:
    name: str
    text: str
    includes: frozenset[str] = frozenset()
    excludes: frozenset[str] = frozenset()
    empty: bool = False
    vocabulary: Vocabulary = field(default_factory=Vocabulary)


EXTRACTION = [
    Extraction(
        "pwop-w9",
        "Rocky filed the PWOP Productions W-9 on 2026-08-02 with Trish Roberts.",
        includes=frozenset({"Rocky", "PWOP", "Productions", "Trish", "Roberts", "2026-08-02"}),
    ),
    Extraction("zero-plain", "The user prefers email. This is a durable preference. Should always apply.", empty=True),
    Extraction(
        "zero-openers",
        "Candidate low-signal words were reviewed. Adding them is wrong. Flagged entries were checked against "
        "telemetry. Validated ones stayed.",
        empty=True,
    ),
    Extraction("zero-ids", "IDs vary by mailbox. Downloading works. Enjoys music.", empty=True),
    Extraction(
        "validated-mid-sentence",
        "Flagged entries were Validated against telemetry.",
        includes=frozenset({"Validated"}),
    ),
    Extraction(
        "validated-extra-common",
        "Flagged entries were Validated against telemetry.",
        empty=True,
        vocabulary=Vocabulary(extra_common_words=("Validated",)),
    ),
    Extraction(
        "load-bearing-words",
        "Personal OneDrive holds the Blazor Online Class notes and the MVP Azure Extended Benefit task.",
        includes=frozenset(
            {"Personal", "OneDrive", "Blazor", "Online", "Class", "MVP", "Azure", "Extended", "Benefit"}
        ),
    ),
    Extraction(
        "briefing-extra-common",
        "Briefing and Triage completed",
        empty=True,
        vocabulary=Vocabulary(extra_common_words=("briefing", "triage")),
    ),
    Extraction("briefing-default", "Briefing and Triage completed", includes=frozenset({"Briefing", "Triage"})),
    Extraction(
        "may-will-rose-default",
        "May left at dawn. Will followed her. Rose waited by the gate.",
        includes=frozenset({"Rose"}),
        excludes=frozenset({"May", "Will"}),
    ),
    Extraction(
        "may-will-rose-always-specific",
        "May left at dawn. Will followed her. Rose waited by the gate.",
        includes=frozenset({"May", "Will", "Rose"}),
        vocabulary=Vocabulary(always_specific_words=("May", "Will", "Rose")),
    ),
    Extraction(
        "always-specific-beats-extra-common",
        "Rose arrived",
        includes=frozenset({"Rose"}),
        vocabulary=Vocabulary(extra_common_words=("rose",), always_specific_words=("Rose",)),
    ),
    Extraction(
        "abbreviations-do-not-end-sentences",
        "The show is in St. Paul with Dr. May attending.",
        includes=frozenset({"Paul", "May"}),
    ),
    Extraction(
        "bullet-is-sentence-start",
        "Accounts:\n- Direct billing applies",
        excludes=frozenset({"Direct"}),
        vocabulary=Vocabulary(extra_common_words=("Direct",)),
    ),
]


@pytest.mark.parametrize("vector", EXTRACTION, ids=lambda v: v.name)
def test_extraction_vector(vector: Extraction) -> None:
    found = texts(extract_specifics(vector.text, vocabulary=vector.vocabulary))
    if vector.empty:
        assert found == set()
    assert vector.includes <= found
    assert not (vector.excludes & found)


def test_malformed_vocabulary_still_extracts(tmp_path: Path) -> None:
    path = tmp_path / "merge-coverage-vocabulary.json"
    path.write_text("{ not json")
    loaded = load_vocabulary(path)
    assert loaded.status == "fallback" and loaded.error
    assert "Rockford" in texts(extract_specifics("Rockford filed", vocabulary=loaded.vocabulary))


def test_absent_vocabulary_has_default_word_count(tmp_path: Path) -> None:
    loaded = load_vocabulary(tmp_path / "merge-coverage-vocabulary.json")
    assert loaded.status == "absent" and loaded.error is None
    assert loaded.vocabulary.common_word_count == len(BASELINE_COMMON_WORDS) == 238


# --- coverage ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Coverage:
    name: str
    sources: tuple[str, ...]
    merged: str
    missing: tuple[str, ...] = ()
    exact: bool = True  # False: `missing` must be a subset of the result
    excludes: frozenset[str] = frozenset()
    category: str | None = None
    vocabulary: Vocabulary = field(default_factory=Vocabulary)


COVERAGE = [
    Coverage(
        "possessive",
        ("Rocky's Blazor Online Class launches soon",),
        "The Blazor Online Class run by Rocky launches soon",
    ),
    Coverage("single-digit", ("Review the top 3 items",), "Review the top three items"),
    Coverage(
        "ordinal-and-year", ("The deadline is the 10th, in 2026",), "The deadline is soon", ("10", "2026"), exact=False
    ),
    Coverage(
        "clock-reformatting-is-not-equivalent",
        ("The recording runs 2:00 PM to 3:00 PM",),
        "The recording runs 14:00 to 15:00",
        ("2:00", "PM"),
        exact=False,
    ),
    Coverage("lowercase-only", ("the user prefers concise replies",), "user prefers brevity"),
    Coverage(
        "milo-sheltie",
        ("Rocky has a dog named Milo", "Rocky has a Sheltie named Milo"),
        "Rocky has a dog — a Sheltie (Shetland Sheepdog) named Milo",
    ),
    Coverage(
        "rockford-duane-regression",
        (
            "Rocky Lhotka also appears in travel and calendar data as Rockford Duane Lhotka. Connected accounts "
            "include marimer-work, lhotka.net and xebia.",
        ),
        "Rocky's connected communications infrastructure includes the accounts marimer-work, lhotka.net and xebia.",
        ("Duane", "Rockford"),
        exact=False,
    ),
    Coverage(
        "iso-date-dropped",
        ("Estimated taxes are due 2026-09-10",),
        "Estimated taxes are due in the autumn",
        ("2026-09-10",),
        exact=False,
    ),
    Coverage(
        "multi-word-and-year-in-iso-date",
        ("Rockford filed in 2026",),
        "Rockford Duane Lhotka filed on 2026-04-15",
    ),
    Coverage(
        "allen-trish",
        ("Allen Conway works at Xebia", "Trish Roberts works at Xebia"),
        "Allen Conway works at Xebia",
        ("Roberts", "Trish"),
    ),
    Coverage(
        "ordered-case-insensitively",
        ("Zulu Alpha Mike went to Boston",),
        "someone travelled",
        ("Alpha", "Boston", "Mike", "Zulu"),
    ),
    Coverage(
        "rejected-source-sweep",
        ("Allen Conway is a Xebia collaborator", "Allen Conway uses accountId rockyl"),
        "Allen Conway uses accountId rockyl",
        ("Xebia",),
        exact=False,
    ),
    Coverage(
        "new-orleans",
        ("The venue moved to New Orleans last spring.",),
        "The venue moved to Orleans last spring.",
        ("New",),
        exact=False,
    ),
    Coverage(
        "valid-extra-common",
        ("Valid email-capable account IDs include marimer-work and xebia.",),
        "Email-capable account IDs are marimer-work and xebia.",
        vocabulary=Vocabulary(extra_common_words=("Valid",)),
    ),
    Coverage(
        "rose-always-specific",
        ("Rose left the harbour before dawn.",),
        "She left the harbour before dawn.",
        ("Rose",),
        vocabulary=Vocabulary(extra_common_words=("Rose",), always_specific_words=("Rose",)),
    ),
    Coverage(
        "imap",
        ("IMAP delivery is configured for the rockbotagent account.",),
        "Delivery is configured for the rockbotagent account.",
        ("IMAP",),
        exact=False,
    ),
    Coverage(
        "named-date-to-iso",
        ("A Red Fletcher show at White Rock Lounge on August 19, 2026.",),
        "A Red Fletcher show at White Rock Lounge on 2026-08-19.",
    ),
    Coverage(
        "iso-to-named-date",
        ("A Red Fletcher show at White Rock Lounge on 2026-08-19.",),
        "A Red Fletcher show at White Rock Lounge on August 19, 2026.",
    ),
    Coverage("summit-iso-to-named", ("The summit ran on 2026-08-19.",), "The summit ran on August 19, 2026."),
    Coverage(
        "august-wilson-is-a-person",
        ("August Wilson wrote the play; the ticket is dated 2026-08-19.",),
        "The ticket is dated 2026-08-19.",
        ("August",),
        exact=False,
    ),
    Coverage(
        "named-date-dropped",
        ("The show is on August 19, 2026.",),
        "The show is scheduled for later this year.",
        ("August",),
        exact=False,
    ),
    Coverage(
        "month-year-mismatch",
        ("The contract was signed in August 2026.",),
        "The contract was signed on 2025-08-04.",
        ("August",),
        exact=False,
    ),
    Coverage(
        "month-mismatch",
        ("The show is on October 3, 2026.",),
        "The show is on 2026-08-19.",
        ("October",),
        exact=False,
    ),
    Coverage(
        "corpus-evidence-todo",
        (
            "Todo items are not accepted for updates. Marking a task complete needs the id.",
            "The agent keeps marking finished todos so the list stays short.",
        ),
        "Todo items are not accepted for updates; completing one needs the id, and the agent keeps finished todos "
        "off the list.",
    ),
    Coverage(
        "corpus-evidence-ids",
        ("Contact IDs are account-scoped, so the contact ids differ per mailbox.",),
        "Contacts are account-scoped and differ per mailbox.",
        excludes=frozenset({"IDs"}),
        exact=False,
    ),
    Coverage(
        "eventbrite",
        ("The Eventbrite listing was set up by Xebia for the Austin workshop.",),
        "The listing was set up for a workshop.",
        ("Austin", "Eventbrite", "Xebia"),
        exact=False,
    ),
    Coverage(
        "may-always-specific-beats-evidence",
        ("May said the crossing may take three days.",),
        "The crossing takes three days.",
        ("May",),
        exact=False,
        vocabulary=Vocabulary(always_specific_words=("May",)),
    ),
    Coverage(
        "numeric-exempt-routing",
        ("Balanced sessions average 8.33 tool calls before escalating.",),
        "Balanced sessions make many tool calls before escalating.",
        category="anti-patterns/routing",
    ),
    Coverage(
        "numeric-not-exempt-elsewhere",
        ("Balanced sessions average 8.33 tool calls before escalating.",),
        "Balanced sessions make many tool calls before escalating.",
        ("8.33",),
        exact=False,
        category="agent-knowledge/infrastructure",
    ),
    Coverage(
        "numeric-exempt-from-file",
        ("Spend averaged 5.67 per run.",),
        "Spend averaged little per run.",
        category="metrics/cost",
        vocabulary=Vocabulary(numeric_exempt_categories=("metrics/cost",)),
    ),
    Coverage(
        "metrics-cost-not-exempt-by-default",
        ("Spend averaged 5.67 per run.",),
        "Spend averaged little per run.",
        ("5.67",),
        category="metrics/cost",
    ),
    Coverage(
        "builtin-exemption-survives-file",
        ("Balanced sessions average 8.33 tool calls before escalating.",),
        "Balanced sessions make many tool calls before escalating.",
        category="anti-patterns/routing/high-tier",
        vocabulary=Vocabulary(numeric_exempt_categories=("metrics/cost",)),
    ),
    Coverage(
        "month-name-dates-protected-in-exempt-category",
        ("The routing review ran on August 19, 2026.",),
        "The routing review ran recently.",
        ("August",),
        exact=False,
        category="anti-patterns/routing",
    ),
    Coverage(
        "live-rejection-xebia",
        tuple(f"Allen Conway note {n}: Xebia sponsors the meetup." for n in "ABCDEFGHI"),
        "Allen Conway notes A to I: a sponsor backs the meetup.",
        ("Xebia",),
    ),
    Coverage(
        "live-rejection-seven-in-order",
        (
            "Routing scores were 0.77536025 and 5.67 across runs.",
            "Each session averaged 8.33 calls.",
            "The report has the columns Adding, Candidate, Flagged and Validated.",
            "Routing scores across runs were tracked.",
        ),
        "Routing scores across runs were tracked in a report.",
        ("0.77536025", "5.67", "8.33", "Adding", "Candidate", "Flagged", "Validated"),
    ),
    Coverage(
        "repair-lossy",
        ("Rockford Duane Lhotka uses timezone America/Chicago.", "Accounts span Microsoft and Marimer LLC."),
        "The user has accounts across providers and a default timezone.",
        ("America", "Chicago", "Duane", "LLC", "Lhotka", "Marimer", "Microsoft", "Rockford"),
        exact=False,
    ),
    Coverage(
        "repair-restored",
        ("Rockford Duane Lhotka uses timezone America/Chicago.", "Accounts span Microsoft and Marimer LLC."),
        "Rockford Duane Lhotka uses timezone America/Chicago; accounts span Microsoft and Marimer LLC.",
    ),
    Coverage(
        "repair-still-lossy",
        ("Rockford Duane Lhotka uses timezone America/Chicago.", "Accounts span Microsoft and Marimer LLC."),
        "Rockford Duane Lhotka has accounts and a timezone.",
        ("America", "Chicago", "LLC", "Marimer", "Microsoft"),
        exact=False,
    ),
]


@pytest.mark.parametrize("vector", COVERAGE, ids=lambda v: v.name)
def test_coverage_vector(vector: Coverage) -> None:
    sources = [SourceText(text, vector.category) for text in vector.sources]
    missing = find_missing_specifics(sources, vector.merged, vector.vocabulary)
    if vector.exact:
        assert missing == list(vector.missing)
    else:
        assert set(vector.missing) <= set(missing), missing
        assert missing == sorted(missing, key=lambda s: (s.casefold(), s))
    assert not (vector.excludes & set(missing))
