"""Cron slots, computed only from what is persisted (``status.lastScheduleTime``), never from process memory.

A restart therefore loses nothing and replays nothing: after downtime only the latest passed slot is due (once),
the ones before it are counted as missed, and a slot older than ``startingDeadlineSeconds`` is missed too.
``due_at`` adds the run-now token to that: what one reconcile pass is asked to start, from the spec and status.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadCronError, CroniterBadDateError, croniter

from dreamkeeper.kube.models import DreamScheduleSpec, DreamScheduleStatus

# Counting missed slots walks the cron forward; a per-minute schedule down for a week is 10k slots. Beyond the
# cap the count is reported as the cap (and said so in the Event), not computed.
MISSED_COUNT_CAP = 10_000


class ScheduleError(ValueError):
    """The cron expression or time zone cannot be used; ``reason`` is the condition reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class CronSchedule:
    expression: str
    zone: ZoneInfo

    @classmethod
    def parse(cls, expression: str, time_zone: str | None) -> CronSchedule:
        """The schedule, or ScheduleError saying why it cannot be used. Every pass parses its spec; the answer for an
        (expression, zone) pair never changes, so it is computed once (a croniter and a probe slot: a quarter of a
        pass's CPU at 5,000 schedules, issue 27)."""
        parsed = _parse(expression, time_zone)
        if isinstance(parsed, tuple):
            raise ScheduleError(*parsed)  # a fresh exception each time: a cached one would grow its traceback
        return parsed

    @classmethod
    def _parse(cls, expression: str, time_zone: str | None) -> CronSchedule:
        try:
            zone = ZoneInfo(time_zone or "UTC")
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ScheduleError("InvalidTimeZone", f"unknown time zone {time_zone!r}: {exc}") from None
        if len(expression.split()) not in (1, 5):
            raise ScheduleError("InvalidSchedule", f"{expression!r}: expected 5 cron fields or a macro like @daily")
        try:
            probe = croniter(expression, datetime(2000, 1, 1, tzinfo=zone))
        except (CroniterBadCronError, CroniterBadDateError, ValueError, KeyError) as exc:
            raise ScheduleError("InvalidSchedule", f"{expression!r} is not a valid cron schedule: {exc}") from None
        try:
            # Valid fields can still name no date at all ("0 0 30 2 *": February 30th); croniter only finds out
            # when asked for a slot, which every pass would then raise.
            probe.get_next(datetime)
        except CroniterBadDateError:
            raise ScheduleError(
                "ImpossibleSchedule", f"{expression!r} never fires: no date matches its day and month fields"
            ) from None
        return cls(expression, zone)

    def _iter(self, start: datetime) -> croniter:
        return croniter(self.expression, start.astimezone(self.zone))

    def next_after(self, moment: datetime) -> datetime:
        """The first slot strictly after ``moment``."""
        if self.zone.key == "UTC":
            return self._bracket(moment)[1]
        return _utc(self._iter(moment).get_next(datetime))

    def latest_at_or_before(self, moment: datetime) -> datetime:
        """The last slot ``<= moment``."""
        if self.zone.key == "UTC":
            return self._bracket(moment)[0]
        return self._latest(moment)

    def _latest(self, moment: datetime) -> datetime:
        probe = moment + timedelta(microseconds=1)  # croniter's get_prev is strictly before its start
        return _utc(self._iter(probe).get_prev(datetime))

    def _bracket(self, moment: datetime) -> tuple[datetime, datetime]:
        """The consecutive slots around ``moment`` (``_Brackets``): remembered, or asked of croniter."""
        known = _BRACKETS.find(self, moment)
        if known is None:
            known = (self._latest(moment), _utc(self._iter(moment).get_next(datetime)))
            _BRACKETS.add(self, *known)
        return known

    def produced(self, slot: datetime, now: datetime) -> bool:
        """``slot`` is one of this schedule's slots and not later than ``now`` (what a stop record may name)."""
        try:
            return slot <= now and self.latest_at_or_before(slot) == slot
        except (CroniterBadDateError, ValueError, OverflowError):
            return False

    def period_after(self, slot: datetime) -> float:
        """Seconds from ``slot`` to the slot after it: the cadence the no-success alert counts periods in."""
        return (self.next_after(slot) - slot).total_seconds()

    def count_between(self, after: datetime, before: datetime) -> tuple[int, bool]:
        """Slots strictly between ``after`` and ``before`` (capped); returns (count, capped)."""
        it = self._iter(after)
        count = 0
        while count < MISSED_COUNT_CAP:
            slot = _utc(it.get_next(datetime))
            if slot >= before:
                return count, False
            count += 1
        return count, True


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


@lru_cache(maxsize=1024)
def _parse(expression: str, time_zone: str | None) -> CronSchedule | tuple[str, str]:
    try:
        return CronSchedule._parse(expression, time_zone)
    except ScheduleError as exc:
        return exc.reason, str(exc)


class _Brackets:
    """Two consecutive slots ``(a, b)`` of a schedule, recently computed: for any moment ``a <= m < b`` the last
    slot at or before ``m`` is ``a`` and the first after it is ``b``, by definition, so a pass asks croniter nothing
    (every pass asks for both around "now", and the metrics for the slot after the next one: four croniter walks,
    half a pass's CPU at 5,000 schedules). UTC schedules only: croniter's answers around a daylight-saving change
    depend on where it starts, and those are computed every time, as before."""

    KEPT = 4  # per schedule: the bracket around now and the next one or two (the metrics' period)
    LIMIT = 4096  # distinct schedules kept; beyond, the cache starts again

    def __init__(self) -> None:
        self._known: dict[tuple[str, str], list[tuple[datetime, datetime]]] = {}
        self._lock = threading.Lock()

    def find(self, cron: CronSchedule, moment: datetime) -> tuple[datetime, datetime] | None:
        with self._lock:
            for bracket in self._known.get((cron.expression, cron.zone.key), ()):
                if bracket[0] <= moment < bracket[1]:
                    return bracket
        return None

    def add(self, cron: CronSchedule, latest: datetime, following: datetime) -> None:
        if not latest < following:
            return
        key = (cron.expression, cron.zone.key)
        with self._lock:
            if len(self._known) >= self.LIMIT and key not in self._known:
                self._known.clear()
            kept = self._known.setdefault(key, [])
            if (latest, following) not in kept:
                kept.insert(0, (latest, following))
                del kept[self.KEPT :]


_BRACKETS = _Brackets()


@dataclass(frozen=True)
class SlotDecision:
    """What the schedule asks for at ``now``."""

    due: datetime | None  # the slot to run now, if any
    missed: int  # slots passed without a run (before ``due``, or ``due`` itself when past the deadline)
    missed_capped: bool
    past_deadline: datetime | None  # the latest slot, when it was too late to start
    next_slot: datetime  # the first slot after everything decided here

    @property
    def acted_slot(self) -> datetime | None:
        """The slot to record as ``lastScheduleTime`` (run or missed)."""
        return self.due or self.past_deadline


def decide(
    schedule: CronSchedule,
    *,
    last_schedule_time: datetime | None,
    created: datetime,
    now: datetime,
    starting_deadline_seconds: int | None = None,
) -> SlotDecision:
    """The slot due at ``now``, given the last slot acted on (or the creation time for a new schedule)."""
    anchor = last_schedule_time or created
    latest = schedule.latest_at_or_before(now)
    if latest <= anchor:
        return SlotDecision(None, 0, False, None, schedule.next_after(max(anchor, now)))
    missed, capped = schedule.count_between(anchor, latest)
    next_slot = schedule.next_after(now)
    if starting_deadline_seconds is not None and (now - latest).total_seconds() > starting_deadline_seconds:
        return SlotDecision(None, missed + 1, capped, latest, next_slot)
    return SlotDecision(latest, missed, capped, None, next_slot)


@dataclass(frozen=True)
class Due:
    """What a valid schedule asks one pass to do: its slots, and a run-now token not handled yet."""

    spec: DreamScheduleSpec
    cron: CronSchedule
    slots: SlotDecision
    run_now: str | None

    @property
    def wants_job(self) -> bool:
        """A Job is to be started (or adopted) in this pass."""
        return self.run_now is not None or self.slots.due is not None

    @property
    def acts(self) -> bool:
        """The pass records a slot (run, skipped or missed) or handles a token: it must see the claim's Jobs."""
        return self.run_now is not None or self.slots.acted_slot is not None


def due_at(
    spec: DreamScheduleSpec,
    cron: CronSchedule,
    status: DreamScheduleStatus,
    *,
    created: datetime,
    now: datetime,
) -> Due:
    """The pass's work at ``now``, from the persisted status only (``lastScheduleTime``, ``lastRunNowToken``)."""
    slots = decide(
        cron,
        last_schedule_time=status.last_schedule_time,
        created=created,
        now=now,
        starting_deadline_seconds=spec.starting_deadline_seconds,
    )
    token = spec.run_now_token
    return Due(spec, cron, slots, token if token and token != status.last_run_now_token else None)
