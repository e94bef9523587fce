"""Cron slots from persisted state, and deterministic names."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from dreamkeeper.kube.models import DreamScheduleSpec, DreamScheduleStatus
from dreamkeeper.kube.naming import dns_label, label_value, run_now_job_name, scheduled_job_name
from dreamkeeper.kube.slots import MISSED_COUNT_CAP, CronSchedule, ScheduleError, decide, due_at

T0 = datetime(2026, 1, 1, tzinfo=UTC)
HOURLY = CronSchedule.parse("0 * * * *", None)


def at(hours: int, minutes: int = 0, seconds: int = 0) -> datetime:
    return T0 + timedelta(hours=hours, minutes=minutes, seconds=seconds)


@pytest.mark.parametrize(
    ("schedule", "seconds"),
    [("0 * * * *", 3600), ("0 3,15 * * *", 12 * 3600), ("@daily", 86400), ("*/5 * * * *", 300)],
)
def test_the_period_after_a_slot_is_the_cron_period(schedule: str, seconds: float) -> None:
    cron = CronSchedule.parse(schedule, None)
    assert cron.period_after(cron.next_after(T0)) == seconds


def test_nothing_is_due_before_the_first_slot_after_creation() -> None:
    d = decide(HOURLY, last_schedule_time=None, created=at(0, 5), now=at(0, 59))
    assert d.due is None and d.missed == 0 and d.next_slot == at(1)


def test_a_slot_exactly_at_now_is_due() -> None:
    d = decide(HOURLY, last_schedule_time=at(0), created=T0, now=at(1))
    assert d.due == at(1) and d.missed == 0 and d.next_slot == at(2)


def test_the_acted_slot_is_never_due_again() -> None:
    d = decide(HOURLY, last_schedule_time=at(1), created=T0, now=at(1, 30))
    assert d.due is None and d.acted_slot is None


def test_downtime_runs_the_latest_slot_once_and_counts_the_rest_as_missed() -> None:
    d = decide(HOURLY, last_schedule_time=at(10), created=T0, now=at(14, 10))
    assert (d.due, d.missed, d.past_deadline) == (at(14), 3, None)
    again = decide(HOURLY, last_schedule_time=d.acted_slot, created=T0, now=at(14, 20))
    assert again.due is None and again.missed == 0


def test_a_late_slot_beyond_the_starting_deadline_is_missed() -> None:
    d = decide(HOURLY, last_schedule_time=at(10), created=T0, now=at(14, 10), starting_deadline_seconds=300)
    assert d.due is None and d.past_deadline == at(14) and d.missed == 4
    on_time = decide(HOURLY, last_schedule_time=at(10), created=T0, now=at(14, 4), starting_deadline_seconds=300)
    assert on_time.due == at(14)


def test_missed_count_is_capped_for_very_frequent_schedules() -> None:
    every_minute = CronSchedule.parse("* * * * *", None)
    d = decide(every_minute, last_schedule_time=T0, created=T0, now=T0 + timedelta(days=30))
    assert d.missed == MISSED_COUNT_CAP and d.missed_capped


def test_time_zones_follow_local_wall_clock_time() -> None:
    berlin = CronSchedule.parse("0 3 * * *", "Europe/Berlin")
    assert berlin.next_after(datetime(2026, 1, 10, 12, tzinfo=UTC)) == datetime(2026, 1, 11, 2, tzinfo=UTC)
    assert berlin.next_after(datetime(2026, 7, 10, 12, tzinfo=UTC)) == datetime(2026, 7, 11, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("expression", "zone", "reason"),
    [
        ("61 * * * *", None, "InvalidSchedule"),
        ("* * * * * *", None, "InvalidSchedule"),
        ("@sometimes", None, "InvalidSchedule"),
        ("0 3 * * *", "Nowhere/City", "InvalidTimeZone"),
    ],
)
def test_bad_schedules_name_what_is_wrong(expression: str, zone: str | None, reason: str) -> None:
    with pytest.raises(ScheduleError) as caught:
        CronSchedule.parse(expression, zone)
    assert caught.value.reason == reason
    assert expression in str(caught.value) or str(zone) in str(caught.value)


def test_job_names_are_deterministic_valid_and_distinct() -> None:
    slot = datetime(2026, 1, 1, 3, tzinfo=UTC)
    name = scheduled_job_name("nightly", slot)
    assert name == f"nightly-{int(slot.timestamp()) // 60}"
    assert scheduled_job_name("nightly", slot) == name
    assert scheduled_job_name("nightly", slot + timedelta(minutes=1)) != name
    long_a, long_b = "a" * 250, "a" * 249 + "b"
    for base in (long_a, long_b, "agent.one.example", "x" * 60):
        job = scheduled_job_name(base, slot)
        assert len(job) <= 63
        assert job[0].isalnum() and job[-1].isalnum() and set(job) <= set("abcdefghijklmnopqrstuvwxyz0123456789-")
    assert scheduled_job_name(long_a, slot) != scheduled_job_name(long_b, slot)
    assert run_now_job_name("nightly", "a", 1) != run_now_job_name("nightly", "b", 1)
    assert run_now_job_name("nightly", "a", 1) == run_now_job_name("nightly", "a", 1)
    assert run_now_job_name("nightly", "a", 1) != run_now_job_name("nightly", "a", 3)
    assert dns_label("a.b", "1") != dns_label("a-b", "1")


def test_label_values_are_hashed_only_when_needed() -> None:
    assert label_value("agent-data") == "agent-data"
    hashed = label_value("x" * 100)
    assert len(hashed) <= 63 and hashed == label_value("x" * 100) and hashed != label_value("x" * 101)


def test_a_run_now_token_is_due_until_the_status_records_it() -> None:
    spec = DreamScheduleSpec.model_validate({"schedule": "0 * * * *", "claimName": "data", "runNowToken": "go"})
    fresh = due_at(spec, HOURLY, DreamScheduleStatus(), created=T0, now=at(0, 30))
    assert (fresh.run_now, fresh.slots.due, fresh.wants_job, fresh.acts) == ("go", None, True, True)
    handled = DreamScheduleStatus(last_run_now_token="go", last_schedule_time=T0)
    idle = due_at(spec, HOURLY, handled, created=T0, now=at(0, 30))
    assert (idle.run_now, idle.wants_job, idle.acts, idle.slots.next_slot) == (None, False, False, at(1))
    assert due_at(spec, HOURLY, handled, created=T0, now=at(1, 0, 5)).slots.due == at(1)
