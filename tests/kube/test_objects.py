"""The one timestamp reader the operator uses on what the API server (or a person) wrote."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from dreamkeeper.kube.objects import parse_time


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-01-01T03:00:00Z", datetime(2026, 1, 1, 3, tzinfo=UTC)),  # how Kubernetes writes them
        ("2026-01-01T03:00:00.250000Z", datetime(2026, 1, 1, 3, 0, 0, 250000, tzinfo=UTC)),
        ("2026-01-01T04:00:00+01:00", datetime(2026, 1, 1, 4, tzinfo=timezone(timedelta(hours=1)))),
        ("2026-01-01T03:00:00", datetime(2026, 1, 1, 3, tzinfo=UTC)),  # no zone: UTC, never a naive datetime
    ],
)
def test_rfc3339_timestamps_are_read_as_aware_datetimes(value: str, expected: datetime) -> None:
    parsed = parse_time(value)
    assert parsed == expected and parsed is not None and parsed.tzinfo is not None


@pytest.mark.parametrize("value", [None, "", "not a time", "2026-13-01T00:00:00Z", 1767236400, ["2026-01-01"]])
def test_absent_or_unreadable_timestamps_are_none_not_an_error(value: object) -> None:
    assert parse_time(value) is None
