"""The linear forms of coverage's patterns match exactly what the backtracking ones did (issue 16 finding 6: the
file-name pattern, and the host, unit and number patterns' failing fullmatch, were quadratic). Speed itself is
the extraction bench's (``python -m bench extraction``: the slope of time against input length)."""

from __future__ import annotations

import regex
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dreamkeeper.coverage import technical, text
from dreamkeeper.coverage.technical import file_extension

# The patterns as they were before (commit 6735877).
OLD_FILE = regex.compile(r"[^\s/\\]*[\p{L}\p{N}_\-][^\s/\\]*\.(?P<ext>[\p{L}\p{N}]{1,5})")
OLD_HOST = regex.compile(r"(?:[\p{L}\p{N}](?:[\p{L}\p{N}\-]*[\p{L}\p{N}])?\.)+(?P<tld>\p{L}{2,})")
OLD_UNIT = regex.compile(
    r"(?i)\d+(?:[.,:]\d+)*(?:st|nd|rd|th|am|pm|s|ms|h|hr|hrs|m|min|mins|d|k|x|kb|mb|gb|tb|kg|g|km|cm|mm|mi|"
    r"ft|lb|lbs|oz|ml|l|hz|khz|mhz|ghz|w|kw|v|mph|kph|fps|dpi|px|pt|p|y|yr|yrs|yo|wk|wks|mo|mos|%)"
)
OLD_NUMBER = regex.compile(r"\d(?:[.,:/\-]?\d)+")

# Short strings over the characters these patterns care about: every boundary case is reachable.
TOKENS = st.text(alphabet="aZé1_-./\\ @:,%Mmsk", max_size=14)


@settings(max_examples=1000, deadline=None)
@given(TOKENS)
def test_file_extension_is_the_old_pattern(token: str) -> None:
    old = OLD_FILE.fullmatch(token)
    assert file_extension(token) == (old.group("ext") if old else None)


@settings(max_examples=1000, deadline=None)
@given(TOKENS)
def test_host_unit_and_number_match_as_before(token: str) -> None:
    for old, new in ((OLD_HOST, technical._HOST_RE), (OLD_UNIT, technical._UNIT_RE), (OLD_NUMBER, text.NUMBER_RE)):
        before, after = old.fullmatch(token), new.fullmatch(token)
        assert (before is None) == (after is None), (old.pattern, token)
        if before is not None and after is not None:
            assert before.groupdict() == after.groupdict()
    assert [m.span() for m in OLD_NUMBER.finditer(token)] == [m.span() for m in text.NUMBER_RE.finditer(token)]


def _old_phones(found_in: str) -> list[tuple[int, int, str]]:
    """phones() before: each match checked against every earlier one (quadratic in the number of phones). A match
    gives back its dotted or spaced tail first, as phones() does since fa2ec85 ("+1 386-299-4605 42" is a phone and
    a count): what this compares is the overlap check, not which text a phone is."""
    spans: list[tuple[int, int, str]] = []
    for pattern in technical._PHONE_RES:
        for match in pattern.finditer(found_in):
            start, end = technical._without_a_dotted_tail(found_in, *match.span())
            digits = "".join(ch for ch in found_in[start:end] if ch.isdigit())
            if not 7 <= len(digits) <= 15 or any(s < end and start < e for s, e, _ in spans):
                continue
            spans.append((start, end, digits))
    return spans


@settings(max_examples=1500, deadline=None)
@given(st.text(alphabet="0123456789 -.()+/:a", max_size=60))
# Found by hypothesis: the oracle kept the tail phones() gives back ("+00000.0 0": a 7-digit "phone" there, none
# here, since "+00000.0" has 6 digits and " 0" is a value of its own).
@example("+00000.0 0")
@example("+1 386-299-4605 42")
@example("+1 386-299-4605 8.33")
def test_phones_are_the_old_phones_in_position_order(found_in: str) -> None:
    assert technical.phones(found_in) == sorted(_old_phones(found_in))


def test_phones_example() -> None:
    found = technical.phones("call +1 386-299-4605 or (612) 555-1234, or 555-0199; 8/19/2026")
    assert [digits for _, _, digits in found] == ["13862994605", "6125551234", "5550199"]
