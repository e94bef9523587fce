"""The fast parse path's value checks (``entry.py``): a JSON value of a plain form, taken as the model would take it;
anything else raises ``NotFast`` and the entry goes through pydantic, which decides and words the error."""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any


class NotFast(Exception):
    """A value outside the fast path's plain forms: the entry is validated by pydantic instead."""


# datetime.fromisoformat and pydantic read these the same way (tests/memory/test_entry_parse.py checks it against
# the model); anything else (a date alone, a space for T, week dates, numbers, 24:00) is left to pydantic.
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2})?")
_ZONES: dict[timedelta | None, tzinfo] = {timedelta(0): UTC, None: UTC}
_ZONES_MAX = 256


def parse_timestamp(raw: Any, memo: dict[str, tuple[datetime, bool]]) -> datetime:
    if type(raw) is not str:
        raise NotFast
    seen = memo.get(raw)
    if seen is not None:
        return seen[0]  # createdAt, updatedAt and lastSeenAt are often one string: one datetime for all
    if _TIMESTAMP.fullmatch(raw) is None:
        raise NotFast
    try:
        value = datetime.fromisoformat(raw)
    except ValueError:
        raise NotFast from None
    # One tzinfo object per offset (pydantic makes one per timestamp); no offset means UTC, as the model says.
    offset = value.utcoffset()
    zone = _ZONES.get(offset)
    if zone is None:
        zone = value.tzinfo if value.tzinfo is not None else UTC
        if len(_ZONES) < _ZONES_MAX:
            _ZONES[offset] = zone
    if zone is not value.tzinfo:
        value = value.replace(tzinfo=zone)
    # Written back as format_timestamp writes it exactly when it has 6 fraction digits and a +HH:MM offset (the
    # fullmatch above leaves no other 32-character form); "-00:00" is written "+00:00".
    derivable = len(raw) == 32 and raw[19] == "." and raw[26] in "+-" and raw[26:] != "-00:00"
    memo[raw] = (value, derivable)
    return value


def parse_text(raw: Any) -> str:
    if type(raw) is not str:
        raise NotFast
    return raw


def parse_optional_text(raw: Any) -> str | None:
    if raw is not None and type(raw) is not str:
        raise NotFast
    return raw


def parse_category(raw: Any) -> str | None:
    # A handful of categories across a corpus: one string each.
    return None if raw is None else sys.intern(parse_text(raw))


def parse_tags(raw: Any) -> list[str]:
    if raw is None:
        return []
    if type(raw) is not list:
        raise NotFast
    try:
        return list(map(sys.intern, raw))  # tag values repeat across entries: one string each
    except TypeError:
        raise NotFast from None  # not a string (sys.intern takes nothing else)


def parse_metadata(raw: Any) -> dict[str, str] | None:
    if raw is None:
        return None
    if type(raw) is not dict:
        raise NotFast
    for value in raw.values():
        if type(value) is not str:
            raise NotFast
    return {sys.intern(key): value for key, value in raw.items()}  # keys repeat (sessionId, mergedFrom, ...)


def parse_count(raw: Any) -> int:
    if type(raw) is not int:
        raise NotFast  # floats, bools and numeric strings: pydantic's lax rules decide
    return raw


def parse_score(raw: Any) -> float:
    if type(raw) is float:
        if not math.isfinite(raw):
            raise NotFast  # pydantic raises the model's own error for it
        return raw
    if type(raw) is int and -(2**53) <= raw <= 2**53:
        return float(raw)  # exact, as pydantic converts it
    raise NotFast


TIMESTAMP_FIELDS = frozenset({"created_at", "updated_at", "last_seen_at", "archived_at"})
FIELD_PARSERS: dict[str, Callable[[Any], Any]] = {
    "id": parse_text,
    "category": parse_category,
    "reinforcement_count": parse_count,
    "metadata": parse_metadata,
    "superseded_by": parse_optional_text,
    "archive_reason": parse_optional_text,
}


__all__ = [
    "FIELD_PARSERS",
    "TIMESTAMP_FIELDS",
    "NotFast",
    "parse_score",
    "parse_tags",
    "parse_text",
    "parse_timestamp",
]
