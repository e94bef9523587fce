"""The vocabulary file: absent, loaded (JSON with comments), malformed and unreadable, and its semantics."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from dreamkeeper.coverage import (
    DEFAULT_VOCABULARY,
    VOCABULARY_FILE,
    SourceText,
    Vocabulary,
    extract_specifics,
    find_missing_specifics,
    load_vocabulary,
)
from dreamkeeper.coverage.vocabulary import strip_json_comments


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / VOCABULARY_FILE


def test_absent_file_is_the_baseline_silently(path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="dreamkeeper.coverage"):
        loaded = load_vocabulary(path)
    assert (loaded.status, loaded.error, loaded.path) == ("absent", None, path)
    assert loaded.vocabulary == DEFAULT_VOCABULARY
    assert caplog.records == []


@pytest.mark.parametrize("content", ["", "   \n", "// only a comment\n/* and another */\n"])
def test_empty_file_is_the_baseline_silently(path: Path, content: str, caplog: pytest.LogCaptureFixture) -> None:
    path.write_text(content)
    with caplog.at_level(logging.DEBUG, logger="dreamkeeper.coverage"):
        loaded = load_vocabulary(path)
    assert loaded.status == "absent" and not loaded.fell_back
    assert caplog.records == []


SHIPPED_STYLE = """\ufeff// merge-coverage-vocabulary.json: tune which words the merge coverage check protects.
{
  /* Ordinary words for this deployment, in any position. */
  "ExtraCommonWords": ["briefing", "triage", "  ", "",],
  // Names a stoplist would otherwise swallow; wins over everything.
  "alwaysspecificwords": ["May", "Will", "Rose",],
  "numericExemptCategories": ["/metrics/cost/", "  "],   // trailing comma below too
}
"""


def test_loaded_file_with_comments_trailing_commas_and_any_case(path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path.write_text(SHIPPED_STYLE, encoding="utf-8")
    with caplog.at_level(logging.INFO, logger="dreamkeeper.coverage"):
        loaded = load_vocabulary(path)
    assert loaded.status == "loaded" and loaded.error is None
    vocabulary = loaded.vocabulary
    assert vocabulary.extra_common_words == ("briefing", "triage")
    assert vocabulary.always_specific_words == ("May", "Will", "Rose")
    assert vocabulary.exempt_categories == ("anti-patterns/routing", "metrics/cost")
    [record] = caplog.records
    assert record.levelno == logging.INFO
    assert record.getMessage() == (
        f"merge-coverage vocabulary from {path} — 240 common words, 3 reclaimed as specifics (May, Will, Rose), "
        "2 numeric-exempt categories"
    )
    assert extract_specifics("Briefing and Triage completed", vocabulary=vocabulary) == []
    assert {s.text for s in extract_specifics("May left. Will stayed.", vocabulary=vocabulary)} == {"May", "Will"}


@pytest.mark.parametrize(
    ("content", "error_part"),
    [
        ("{ not json", "malformed (Expecting property name enclosed in double quotes at line 1 column 3)"),
        ('["briefing"]', "malformed (the top level must be an object, not list)"),
        ('{"extraCommonWords": "briefing"}', "malformed ('extraCommonWords' must be an array of strings)"),
        ('{"alwaysSpecificWords": ["May", 3]}', "malformed ('alwaysSpecificWords' must be an array of strings)"),
        ('{"extraCommonWords": ["a"] /* unterminated', "malformed ("),
    ],
)
def test_malformed_file_falls_back_with_a_warning(
    path: Path, content: str, error_part: str, caplog: pytest.LogCaptureFixture
) -> None:
    path.write_text(content)
    with caplog.at_level(logging.INFO, logger="dreamkeeper.coverage"):
        loaded = load_vocabulary(path)
    assert loaded.status == "fallback" and loaded.fell_back
    assert loaded.vocabulary == DEFAULT_VOCABULARY
    assert loaded.error is not None and str(path) in loaded.error and error_part in loaded.error
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert record.getMessage() == f"{loaded.error}; using the built-in vocabulary"
    # Bad configuration never disables the check.
    assert find_missing_specifics([SourceText("Rockford filed")], "Someone filed", loaded.vocabulary) == ["Rockford"]


def test_non_utf8_file_falls_back(path: Path) -> None:
    path.write_bytes(b'{"extraCommonWords": ["caf\xe9"]}')
    loaded = load_vocabulary(path)
    assert loaded.status == "fallback"
    assert loaded.error is not None and "not UTF-8" in loaded.error and str(path) in loaded.error


def test_unreadable_file_falls_back(path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path.mkdir()  # reading a directory fails even as root, unlike a chmod 000 file
    with caplog.at_level(logging.WARNING, logger="dreamkeeper.coverage"):
        loaded = load_vocabulary(path)
    assert loaded.status == "fallback"
    assert loaded.error is not None and loaded.error.startswith(f"could not read {path}")
    assert caplog.records[0].levelno == logging.WARNING and str(path) in caplog.records[0].getMessage()


def test_unknown_property_is_named_but_the_rest_loads(path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path.write_text('{"alwaysSpecificWord": ["Rose"], "extraCommonWords": ["briefing"]}')
    with caplog.at_level(logging.INFO, logger="dreamkeeper.coverage"):
        loaded = load_vocabulary(path)
    assert loaded.status == "loaded"
    assert loaded.vocabulary.extra_common_words == ("briefing",)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        f"{path}: ignoring unknown property 'alwaysSpecificWord' (known: extraCommonWords, alwaysSpecificWords, "
        "numericExemptCategories)"
    ]


def test_file_is_reread_on_every_load(path: Path) -> None:
    path.write_text('{"extraCommonWords": ["briefing"]}')
    assert load_vocabulary(path).vocabulary.extra_common_words == ("briefing",)
    path.write_text('{"extraCommonWords": ["triage"]}')
    assert load_vocabulary(path).vocabulary.extra_common_words == ("triage",)


@pytest.mark.parametrize(
    ("category", "exempt"),
    [
        ("anti-patterns/routing", True),
        ("anti-patterns/routing/high-tier", True),
        ("Anti-Patterns/Routing/", True),
        ("anti-patterns/routing-notes", False),
        ("anti-patterns", False),
        (None, False),
        ("metrics/cost", True),
        ("metrics/cost/daily", True),
        ("metrics/costs", False),
        ("metrics", False),
    ],
)
def test_numeric_exemption_is_a_segment_aware_prefix(category: str | None, exempt: bool) -> None:
    vocabulary = Vocabulary(numeric_exempt_categories=(" metrics/cost ",))
    assert vocabulary.is_numeric_exempt(category) is exempt


def test_builtin_exemption_cannot_be_removed() -> None:
    assert Vocabulary(numeric_exempt_categories=()).is_numeric_exempt("anti-patterns/routing")


def test_extra_common_words_also_make_a_lowercase_word_ordinary() -> None:
    text = "Results are deduped by the kubelet."
    assert {s.text for s in extract_specifics(text)} == {"kubelet"}
    assert extract_specifics(text, vocabulary=Vocabulary(extra_common_words=("kubelet",))) == []


def test_comment_stripping_keeps_offsets_and_strings() -> None:
    text = '{"a": "x // not a comment", /* c */ "b": [1, 2,],}\n// end'
    stripped = strip_json_comments(text)
    assert len(stripped) == len(text)
    assert '"x // not a comment"' in stripped and "/*" not in stripped and "end" not in stripped
    import json

    assert json.loads(stripped) == {"a": "x // not a comment", "b": [1, 2]}


def test_always_specific_protects_a_code_made_of_english_words() -> None:
    """ "tailspin-main" reads as two English words; only the deployment can say it is an account id."""
    sources = [SourceText("Rockford uses the account tailspin-main.")]
    merged = "Rockford uses an account."
    assert find_missing_specifics(sources, merged) == []
    vocabulary = Vocabulary(always_specific_words=("tailspin-main",))
    assert find_missing_specifics(sources, merged, vocabulary) == ["tailspin-main"]
    # A plain word listed for its capitalised use ("May") does not make the lowercase verb a specific.
    may = Vocabulary(always_specific_words=("May",))
    assert find_missing_specifics([SourceText("It may rain.")], "Rain is possible.", may) == []


def test_shipped_template_loads_as_the_baseline(caplog: pytest.LogCaptureFixture) -> None:
    from importlib import resources

    template = resources.files("dreamkeeper").joinpath("data/coverage/merge-coverage-vocabulary.json")
    with resources.as_file(template) as shipped, caplog.at_level(logging.WARNING, logger="dreamkeeper.coverage"):
        loaded = load_vocabulary(shipped)
    assert loaded.status == "loaded"
    assert loaded.vocabulary == DEFAULT_VOCABULARY
    assert caplog.records == []
