"""The clock check: purge and decay act on ages, so they run only when the clock agrees with the agent's history.

Issue 22: a cycle with the clock 100 days ahead purged 72 entries early (retention is an age), and its journals,
dated 100 days ahead, then made ``undo`` of the earlier cycle archive successors whose sources were gone; with the
clock one day back every later cycle skipped as "last completed -2 days ago", exit 0, for as long as the clock was
behind. Nothing compared the clock with what the state directory already says about time.

The newest time the agent directory knows is the latest of the ledger's ``lastCompletedAt`` and the journals' cycle
ids (``%Y%m%dT%H%M%SZ-...``, taken from each cycle's clock). Purge and decay are refused (the rest of the cycle
runs, and says so with the disagreeing times) when:

* **now is earlier** than that time (beyond a few minutes of skew between nodes): the clock went back, or the
  history is dated ahead;
* **now is more than** ``clock_max_gap_days`` **past it**: the clock jumped ahead, or no cycle ran for that long
  (the first cycle after a long pause skips purge and decay once; the next one, on the same clock, runs them).

``--trust-clock`` runs them anyway; it is recorded in the ledger (the journals dated ahead of a clock a person
confirmed are disregarded from then on) instead of refusing every later cycle. A clock that went back never makes a
cycle skip: the minimum interval is not enforced against a last completion dated in the future (said in a note).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final

from dreamkeeper.consolidation.journal import journal_dir
from dreamkeeper.memory import format_timestamp

log = logging.getLogger(__name__)

SKEW: Final = timedelta(minutes=5)  # two nodes' clocks may disagree this much without anything being wrong
TRUSTED_AT: Final = "clockTrustedAt"  # ledger: when a person last confirmed the clock (--trust-clock)
DISREGARDED: Final = "clockDisregardedJournals"  # ledger: journals dated ahead of that clock, ignored since
LAST_COMPLETED: Final = "lastCompletedAt"


@dataclass(frozen=True)
class ClockCheck:
    """The clock against the newest time of the agent directory's history."""

    now: datetime
    newest: datetime | None = None  # None: no history (a first cycle)
    newest_source: str = ""
    problem: str | None = None  # why purge and decay must not run on this clock
    trusted: bool = False  # --trust-clock: they run all the same
    ahead: tuple[str, ...] = ()  # journals dated ahead of this clock (disregarded from now on, when trusted)
    disregarded: tuple[str, ...] = ()  # journals a person's earlier --trust-clock disregarded

    @property
    def allows(self) -> bool:
        return self.problem is None or self.trusted

    def refusal(self, stage: str) -> str:
        return f"{stage} refused: {self.problem} (run with --trust-clock if the clock is right)"

    def trusted_note(self) -> str | None:
        if self.problem is None or not self.trusted:
            return None
        return f"clock trusted by request although {self.problem}"

    def ledger_update(self) -> dict[str, str]:
        """What a trusted disagreement records in the ledger: the journals dated ahead of this clock are disregarded
        from now on (the ledger's own last completion is this cycle's, once it completes)."""
        if not (self.trusted and self.problem is not None):
            return {}
        return {TRUSTED_AT: format_timestamp(self.now), DISREGARDED: ",".join(sorted({*self.disregarded, *self.ahead}))}


def check_clock(
    agent_dir: Path, now: datetime, ledger: Mapping[str, str], max_gap: timedelta | None, *, trust: bool = False
) -> ClockCheck:
    """Compare ``now`` with the newest time the ledger and the journals know (see the module's docstring)."""
    disregarded = tuple(name for name in (ledger.get(DISREGARDED) or "").split(",") if name)
    times, ahead = _history(agent_dir, ledger, now, frozenset(disregarded))
    if not times:
        return ClockCheck(now, trusted=trust, disregarded=disregarded)
    newest, source = max(times, key=lambda item: item[0])
    problem = None
    if now < newest - SKEW:
        problem = f"the clock ({format_timestamp(now)}) is earlier than the {source} ({format_timestamp(newest)})"
    elif max_gap is not None and now - newest > max_gap:
        problem = (
            f"the clock ({format_timestamp(now)}) is {_days(now - newest)} past the {source} "
            f"({format_timestamp(newest)}), more than {_days(max_gap)} with no cycle in between"
        )
    check = ClockCheck(now, newest, source, problem, trust, ahead, disregarded)
    if problem is not None:
        log.warning("clock check: %s%s", problem, "; trusted by request" if trust else "; purge and decay refused")
    return check


def _history(
    agent_dir: Path, ledger: Mapping[str, str], now: datetime, disregarded: frozenset[str]
) -> tuple[list[tuple[datetime, str]], tuple[str, ...]]:
    """The ledger's last completion and the newest journal (a person's disregarded ones apart), and the journals
    dated ahead of ``now``."""
    times: list[tuple[datetime, str]] = []
    completed = _parse(ledger.get(LAST_COMPLETED))
    if completed is not None:
        times.append((completed, "ledger's last completed cycle"))
    newest_journal: tuple[datetime, str] | None = None
    ahead: list[str] = []
    try:
        names = os.listdir(journal_dir(agent_dir))
    except OSError:
        names = []
    for name in names:
        started = _journal_time(name)
        if started is None or name in disregarded:
            continue
        if started > now + SKEW:
            ahead.append(name)
        if newest_journal is None or started > newest_journal[0]:
            newest_journal = (started, f"journal {name}")
    if newest_journal is not None:
        times.append(newest_journal)
    return times, tuple(sorted(ahead))


def _journal_time(name: str) -> datetime | None:
    """When a journal's cycle started, from its file name (``%Y%m%dT%H%M%SZ-xxxxxx[-suffix].jsonl``)."""
    try:
        return datetime.strptime(name[:16], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None


def _parse(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _days(delta: timedelta) -> str:
    days = delta.total_seconds() / 86400
    return f"{days:.1f} days" if abs(days) < 100 else f"{days:.0f} days"


__all__ = ["SKEW", "ClockCheck", "check_clock"]
