"""Date spellings: "August 19, 2026" and "2026-08-19" name the same day (reference §3.5, both directions).

Only calendar dates are equivalent; clock times are not ("2:00 PM" vs "14:00" is rejected on purpose), and a
month name that is not part of a date expression ("August Wilson") is never credited by a numeric date.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final, NamedTuple

import regex

from dreamkeeper.coverage.stoplist import MONTHS

DateKey = tuple[str | int, ...]


class PartialDate(NamedTuple):
    """A date as a text states it: the month always, the year and day when written."""

    year: int | None
    month: int
    day: int | None

    def projection(self) -> DateKey:
        """The key a merged date must carry to state at least what this date states."""
        if self.year is not None and self.day is not None:
            return ("ymd", self.year, self.month, self.day)
        if self.year is not None:
            return ("ym", self.year, self.month)
        if self.day is not None:
            return ("md", self.month, self.day)
        return ("m", self.month)

    def projections(self) -> Iterator[DateKey]:
        """Every projection this (as stated) date satisfies: a full date satisfies "m", "ym", "md", "ymd"."""
        yield ("m", self.month)
        if self.year is not None:
            yield ("y", self.year)
            yield ("ym", self.year, self.month)
        if self.day is not None:
            yield ("md", self.month, self.day)
        if self.year is not None and self.day is not None:
            yield ("ymd", self.year, self.month, self.day)


_MONTH_ALT: Final = "|".join(sorted(MONTHS, key=len, reverse=True))
_DAY: Final = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?(?![\d:.,]\d)"
_YEAR: Final = r"(?P<year>\d{4})(?!\d)"
_MONTH_FIRST_RE: Final = regex.compile(
    rf"(?i)(?<![\p{{L}}\p{{N}}])(?P<month>{_MONTH_ALT})(?![\p{{L}}])\.?"
    rf"(?:(?:\s+{_DAY}(?![\p{{L}}]))?(?:,?\s+{_YEAR})?)"
)
# A number that ends an identifier ("W-9 May 2026", "ticket_12 May") is not a day of the month.
_DAY_FIRST_RE: Final = regex.compile(
    rf"(?i)(?<![\p{{L}}\p{{N}}])(?<![\p{{L}}\p{{N}}][-_/#]){_DAY},?\s+(?:of\s+)?(?P<month>{_MONTH_ALT})(?![\p{{L}}])\.?(?:,?\s+{_YEAR})?"
)


@dataclass(frozen=True, slots=True)
class DateExpression:
    """A month-name date in a text, with where its month word, day and year sit."""

    date: PartialDate
    month_span: tuple[int, int]
    day_span: tuple[int, int] | None
    year_span: tuple[int, int] | None


def _valid(year: int | None, month: int, day: int | None) -> bool:
    if day is None:
        return True
    try:
        dt.date(year if year is not None else 2000, month, day)  # 2000 is a leap year: "Feb 29" stays valid
    except ValueError:
        return False
    return True


def _parts(expression: DateExpression) -> int:
    return (expression.day_span is not None) + (expression.year_span is not None)


def month_name_dates(text: str) -> list[DateExpression]:
    """Month-name date expressions: "August 19, 2026", "19th of August", "August 2026", "Aug 19"."""
    found: dict[tuple[int, int], DateExpression] = {}
    for pattern in (_MONTH_FIRST_RE, _DAY_FIRST_RE):
        for match in pattern.finditer(text):
            day_text, year_text = match.group("day"), match.group("year")
            if day_text is None and year_text is None:
                continue  # a bare month name may be a person ("August Wilson", "May left")
            month = MONTHS[match.group("month").casefold()]
            year = int(year_text) if year_text else None
            day = int(day_text) if day_text else None
            if not _valid(year, month, day):
                continue
            expression = DateExpression(
                PartialDate(year, month, day),
                match.span("month"),
                match.span("day") if day_text else None,
                match.span("year") if year_text else None,
            )
            # "19 August 2026" is also "August 2026" to the month-first pattern: keep the fuller reading.
            previous = found.get(expression.month_span)
            if previous is None or _parts(expression) > _parts(previous):
                found[expression.month_span] = expression
    return list(found.values())


_YMD_RE: Final = regex.compile(r"(\d{4})([-/])(\d{1,2})\2(\d{1,2})")
_MDY_RE: Final = regex.compile(r"(\d{1,2})/(\d{1,2})/(\d{4})")


class NumericDate(NamedTuple):
    date: PartialDate
    year_first: bool


def numeric_date(token: str) -> NumericDate | None:
    """A whole number token that is a calendar date: YYYY-M-D, YYYY/M/D, or M/D/YYYY (RockBot's reading)."""
    if match := _YMD_RE.fullmatch(token):
        year, month, day = int(match.group(1)), int(match.group(3)), int(match.group(4))
        year_first = True
    elif match := _MDY_RE.fullmatch(token):
        month, day, year = int(match.group(1)), int(match.group(2)), int(match.group(3))
        year_first = False
    else:
        return None
    try:
        dt.date(year, month, day)
    except ValueError:
        return None
    return NumericDate(PartialDate(year, month, day), year_first)


def is_year(token: str) -> bool:
    return len(token) == 4 and token.isdigit() and 1000 <= int(token) <= 2999
