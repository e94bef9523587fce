"""Decline stamps and when a settled cluster reopens, exactly as RockBot reads and writes them.

A cluster shown and left intact is stamped declined on every member (``consolidationDeclinedCluster`` = its cluster
hash, ``…At``, ``…Count``); it is offered again after a wait that doubles with each decline up to a cap (RockBot
#571). The rules are RockBot's ``ReadDecline``, ``SettledClusterReopenAt``, ``ReopenWait`` and ``StampDeclinedAsync``
(src/RockBot.Host/DreamService.cs, MarimerLLC/rockbot@05346ff0):

* a stamp counts only when the cluster is non-blank, the time parses and the count is an int32 >= 1; anything else
  (a count of 10**20, "-3", "2.5", "٣") means "no stamp" — never an error;
* reopen = latest decline + wait(**maximum** count), when every member carries a stamp for this very cluster;
  otherwise latest review + interval (no review time: due now);
* wait(n) = interval * 2**clamp(n - 1, 0, 32), capped at max(max interval, interval);
* the next count is max(counts) + 1 (1 when any member lacks this cluster's stamp).

Every value comes from a file the agent (or anyone) wrote, so nothing here may raise on it: times are parsed
leniently, sums that would leave the calendar are clamped to its end, counts saturate at int32 (where RockBot's
unchecked ``+ 1`` wraps to a negative count that it then reads as no stamp and restarts at 1).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from dreamkeeper.memory import DECLINED_AT, DECLINED_CLUSTER, DECLINED_COUNT, REVIEWED_AT, Entry, cluster_hash

INT32_MAX = 2**31 - 1
EPOCH_START = datetime.min.replace(tzinfo=UTC)  # "immediately due"
END_OF_TIME = datetime.max.replace(tzinfo=UTC)
_MAX_DOUBLINGS = 32  # RockBot's Math.Clamp(declines - 1, 0, 32)

# int.TryParse(s, NumberStyles.Integer, CultureInfo.InvariantCulture): optional ASCII white space around an optional
# sign and ASCII digits only (Python's int() would also take "1_000" and non-ASCII digits).
_INTEGER = re.compile(r"[\t\n\x0b\x0c\r ]*([+-]?[0-9]+)[\t\n\x0b\x0c\r ]*")


@dataclass(frozen=True, slots=True)
class Decline:
    cluster: str
    at: datetime
    count: int


def parse_int32(text: str | None) -> int | None:
    """``int.TryParse`` with the invariant culture: the value, or None when it is not an int32."""
    if text is None:
        return None
    match = _INTEGER.fullmatch(text)
    if match is None:
        return None
    digits = match.group(1)
    if len(digits) > 12 and len(digits.lstrip("+-").lstrip("0")) > 10:
        return None  # longer than any int32: no int() of a huge string
    value = int(digits)
    return value if -(2**31) <= value <= INT32_MAX else None


def parse_time(text: str | None) -> datetime | None:
    """``DateTimeOffset.TryParse`` for the round-trip forms RockBot and dreamkeeper write; None when it fails.

    No offset reads as UTC (RockBot reads it as the host's zone, which is UTC in its container)."""
    if not text or not isinstance(text, str):
        return None
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(value)
    except (ValueError, OverflowError):
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def read_decline(entry: Entry) -> Decline | None:
    """RockBot's ``ReadDecline``: the entry's decline stamp, or None when any part of it is missing or unreadable."""
    cluster = entry.meta(DECLINED_CLUSTER)
    if cluster is None or not cluster.strip():
        return None
    at = parse_time(entry.meta(DECLINED_AT))
    count = parse_int32(entry.meta(DECLINED_COUNT))
    if at is None or count is None or count < 1:
        return None
    return Decline(cluster, at, count)


def days(value: float) -> timedelta:
    """A settings value in days as a timedelta, clamped to what a timedelta holds (never OverflowError)."""
    if value != value or value <= 0:  # NaN or non-positive
        return timedelta(0)
    return timedelta.max if value >= timedelta.max.days else timedelta(days=value)


def later(when: datetime, wait: timedelta) -> datetime:
    """``when + wait``, or the end of the calendar when the sum would leave it."""
    try:
        return when + wait
    except OverflowError:
        return END_OF_TIME


def reopen_wait(declines: int, interval: timedelta, max_interval: timedelta) -> timedelta:
    """RockBot's ``ReopenWait``: the interval doubled per decline after the first, capped."""
    cap = max_interval if max_interval > interval else interval
    doublings = min(max(declines - 1, 0), _MAX_DOUBLINGS)
    # In microseconds as exact integers (RockBot uses a double of ticks): compared before any timedelta is built.
    wait = (interval // timedelta(microseconds=1)) << doublings
    if wait >= cap // timedelta(microseconds=1):
        return cap
    return timedelta(microseconds=wait)


def reopen_at(members: Sequence[Entry], interval: timedelta, max_interval: timedelta) -> datetime | None:
    """RockBot's ``SettledClusterReopenAt``: when a settled cluster is offered again; None never (interval 0)."""
    if interval <= timedelta(0) or not members:
        return None
    return _reopen(members, _own_declines(members), interval, max_interval)


def due_at(
    members: Sequence[Entry], interval: timedelta, max_interval: timedelta, new_at_once: bool
) -> datetime | None:
    """When gating offers a settled cluster: ``reopen_at``, or at once (``EPOCH_START``) when ``new_at_once`` and no
    member carries this cluster's decline stamp (``never_declined``). One reading of the stamps for both: gating asks
    this of every cluster of the corpus every cycle."""
    if not members:
        return None
    valid = _own_declines(members)
    if new_at_once and not valid:
        return EPOCH_START
    if interval <= timedelta(0):
        return None
    return _reopen(members, valid, interval, max_interval)


def _own_declines(members: Sequence[Entry]) -> list[Decline]:
    """The members' readable decline stamps that name this very cluster."""
    expected = cluster_hash(m.id for m in members)
    return [d for d in map(read_decline, members) if d is not None and d.cluster.upper() == expected]


def _reopen(
    members: Sequence[Entry], valid: Sequence[Decline], interval: timedelta, max_interval: timedelta
) -> datetime:
    if len(valid) == len(members):
        latest = max(d.at for d in valid)
        return later(latest, reopen_wait(max(d.count for d in valid), interval, max_interval))
    reviewed = [t for m in members if (t := parse_time(m.meta(REVIEWED_AT))) is not None]
    if not reviewed:
        return EPOCH_START
    return later(max(reviewed), interval)


def never_declined(members: Sequence[Entry]) -> bool:
    """No member carries a decline stamp of this very cluster: these entries have never been shown together and
    left intact (dreamkeeper's rule, not RockBot's: see gating.select_candidates, ``offer_new_clusters``)."""
    expected = cluster_hash(m.id for m in members)
    return not any(d is not None and d.cluster.upper() == expected for d in map(read_decline, members))


def next_decline_count(members: Sequence[Entry]) -> int:
    """The count a decline stamp of these members carries: max(counts) + 1 when every member already carries this
    cluster's stamp, else 1 (RockBot's ``StampDeclinedAsync``); saturated at int32 max."""
    expected = cluster_hash(m.id for m in members)
    declines = [read_decline(m) for m in members]
    if members and all(d is not None and d.cluster.upper() == expected for d in declines):
        return min(max(d.count for d in declines if d is not None) + 1, INT32_MAX)
    return 1


__all__ = [
    "END_OF_TIME",
    "EPOCH_START",
    "INT32_MAX",
    "Decline",
    "days",
    "due_at",
    "later",
    "never_declined",
    "next_decline_count",
    "parse_int32",
    "parse_time",
    "read_decline",
    "reopen_at",
    "reopen_wait",
]
