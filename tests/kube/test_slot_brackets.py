"""Slots remembered between passes (issue 27 item 4): a pass asked croniter four times (the spec's probe, the slot
due, the next slot, the metrics' period), about half of its CPU at 5,000 schedules. The answers are remembered as
brackets of two consecutive slots; they must be croniter's own at every moment, a slot's exact instant included."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from croniter import croniter
from prometheus_client import CollectorRegistry

from dreamkeeper.kube import slots
from dreamkeeper.kube.metrics import OperatorMetrics
from dreamkeeper.kube.reconcile import ScheduleReconciler
from dreamkeeper.kube.slots import CronSchedule, ScheduleError
from tests.kube.fakes import FakeCluster

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def croniter_next(expression: str, zone: str, moment: datetime) -> datetime:
    cron = CronSchedule.parse(expression, zone)
    return croniter(expression, moment.astimezone(cron.zone)).get_next(datetime).astimezone(UTC)  # type: ignore[no-any-return]


def croniter_latest(expression: str, zone: str, moment: datetime) -> datetime:
    cron = CronSchedule.parse(expression, zone)
    probe = (moment + timedelta(microseconds=1)).astimezone(cron.zone)
    return croniter(expression, probe).get_prev(datetime).astimezone(UTC)  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("expression", "zone"),
    [
        ("0 3 * * *", "UTC"),
        ("*/5 * * * *", "UTC"),
        ("0 0 1 * *", "UTC"),
        ("0 3 1 1 *", "UTC"),
        ("30 2 * * 1-5", "UTC"),
        ("@hourly", "UTC"),
        ("30 2 * * *", "Europe/Berlin"),  # a daylight-saving zone: computed every time, as before
    ],
)
def test_remembered_slots_are_croniter_s_at_every_moment(expression: str, zone: str) -> None:
    cron = CronSchedule.parse(expression, zone)
    rng = random.Random(expression)
    moments: list[datetime] = []
    moment = T0
    for _ in range(25):
        slot = croniter_next(expression, zone, moment)
        # The instants where a bracket's edge is: the slot itself, a microsecond either side, and between slots.
        moments += [slot, slot - timedelta(microseconds=1), slot + timedelta(microseconds=1)]
        moments.append(slot + timedelta(seconds=rng.uniform(0, 3 * 86400)))
        moment = slot + timedelta(seconds=rng.uniform(0, 40 * 86400))
    moments.append(datetime(2026, 3, 29, 0, 30, tzinfo=UTC))  # Berlin's spring change, then its autumn one
    moments.append(datetime(2026, 10, 25, 0, 30, tzinfo=UTC))
    rng.shuffle(moments)  # asked out of order, and each twice: remembered answers are asked again
    for moment in moments + moments:
        assert cron.next_after(moment) == croniter_next(expression, zone, moment), (expression, moment)
        assert cron.latest_at_or_before(moment) == croniter_latest(expression, zone, moment), (expression, moment)
    produced = croniter_next(expression, zone, T0)
    assert cron.produced(produced, produced + timedelta(days=400))
    assert not cron.produced(produced + timedelta(seconds=1), produced + timedelta(days=400))


def test_an_unusable_schedule_is_refused_every_time_with_a_fresh_error() -> None:
    errors = []
    for _ in range(3):
        with pytest.raises(ScheduleError) as caught:
            CronSchedule.parse("0 0 30 2 *", None)
        errors.append(caught.value)
    assert {e.reason for e in errors} == {"ImpossibleSchedule"} and len({id(e) for e in errors}) == 3
    with pytest.raises(ScheduleError, match="unknown time zone"):
        CronSchedule.parse("0 3 * * *", "Mars/Olympus")


def test_a_pass_after_the_first_in_the_same_slot_interval_asks_croniter_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every pass of a schedule (5,000 of them after a restart) used to build four croniters; now the first pass
    of a schedule between two slots does, and the ones after it read what it found."""
    built: list[str] = []

    def counting(expression: str, start: Any) -> croniter:
        built.append(expression)
        return croniter(expression, start)

    monkeypatch.setattr(slots, "croniter", counting)
    expression = "41 4 * * *"  # no other test uses it: nothing remembered before this test
    cluster = FakeCluster()
    cluster.put("PersistentVolumeClaim", {"metadata": {"name": "data", "namespace": "ns"}, "spec": {}})
    for name in ("a", "b"):
        cluster.put(
            "DreamSchedule",
            {
                "apiVersion": "dreamkeeper.io/v1alpha1",
                "kind": "DreamSchedule",
                "metadata": {"name": name, "namespace": "ns"},
                "spec": {"schedule": expression, "claimName": "data"},
            },
        )
    now = [T0 + timedelta(hours=1)]
    reconciler = ScheduleReconciler(cluster, OperatorMetrics(CollectorRegistry()), clock=lambda: now[0])

    def one_pass(name: str) -> None:
        body = cluster.get_schedule("ns", name)
        assert body is not None
        reconciler.reconcile(body, full=True)

    one_pass("a")
    assert built, "the first pass asks croniter"
    first = len(built)
    now[0] += timedelta(minutes=30)  # still before 04:41
    one_pass("a")
    one_pass("b")  # another schedule with the same expression
    assert len(built) == first
    status = cluster.get_schedule("ns", "b")["status"]  # type: ignore[index]
    assert status["nextScheduleTime"] == "2026-01-01T04:41:00Z"
