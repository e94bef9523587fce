"""The schedule loop's error accounting: a namespace being deleted under a schedule is not an error of ours (the
tenancy chaos test `test_deleting_the_namespace_mid_stop_completes_and_the_operator_says_why` counted one now and
then, when a pass wrote into the terminating namespace); any other refusal still is."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from dreamkeeper.kube import handlers
from dreamkeeper.kube.api import ApiError, NotFoundError

UID = "uid-1"
BODY = {"metadata": {"namespace": "ns", "name": "s", "uid": UID, "generation": 1}}
TERMINATING = ApiError(
    403, "Forbidden", 'jobs.batch "s-1" is forbidden: unable to create new content in namespace ns because it is '
    "being terminated",
)  # fmt: skip


class Metrics:
    def __init__(self) -> None:
        self.errors: list[str] = []
        self.visited = SimpleNamespace(set=lambda n: None)

    def handler_error(self, handler: str) -> None:
        self.errors.append(handler)


def run_loop(failure: Exception, schedule_after: dict[str, Any] | None) -> list[str]:
    """One pass that fails with ``failure``; then the schedule reads as ``schedule_after`` (None: gone)."""
    reads = iter([BODY, schedule_after, schedule_after, None])
    metrics = Metrics()

    async def call(fn: Any, *args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    def reconcile(body: Any, full: bool) -> float:
        raise failure

    state: Any = SimpleNamespace(
        wakeups=SimpleNamespace(events={}),
        bodies={},
        call=call,
        api=SimpleNamespace(get_schedule=lambda namespace, name: next(reads)),
        generations={},
        schedules=SimpleNamespace(reconcile=reconcile),
        visited=set(),
        metrics=metrics,
    )

    async def main() -> None:
        stopped = asyncio.Event()
        await asyncio.wait_for(handlers.schedule_loop(state, "ns", "s", UID, stopped), timeout=60)

    asyncio.run(main())
    return metrics.errors


@pytest.fixture(autouse=True)
def _short_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(handlers, "ERROR_BACKOFF_SECONDS", (0.01,))


def test_a_write_refused_because_the_namespace_is_being_deleted_is_not_a_handler_error() -> None:
    assert run_loop(TERMINATING, schedule_after=None) == []


def test_a_schedule_deleted_while_its_pass_ran_is_not_a_handler_error() -> None:
    gone = NotFoundError(404, "NotFound", 'dreamschedules.dreamkeeper.io "s" not found')
    assert run_loop(gone, schedule_after=None) == []


def test_any_other_refusal_is_still_a_handler_error() -> None:
    rbac = ApiError(403, "Forbidden", 'jobs.batch is forbidden: User "system:serviceaccount:x" cannot create')
    assert run_loop(rbac, schedule_after=None) == ["schedule"]


def test_a_not_found_while_the_schedule_is_still_there_is_a_handler_error() -> None:
    missing_claim = NotFoundError(404, "NotFound", 'persistentvolumeclaims "agent-data" not found')
    # Counted once; the second pass fails the same way and then finds the schedule gone.
    assert run_loop(missing_claim, schedule_after=BODY) == ["schedule"]


def _sleeping_state(passes: list[bool]) -> Any:
    """A schedule whose every pass asks to sleep an hour (a yearly cron between slots)."""
    from dreamkeeper.kube.caches import ScheduleBodies
    from dreamkeeper.kube.wakeups import Wakeups

    async def call(fn: Any, *args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    def reconcile(body: Any, full: bool) -> float:
        passes.append(full)
        return 3600.0

    state: Any = SimpleNamespace(
        wakeups=Wakeups(),
        bodies=ScheduleBodies(),
        call=call,
        generations={},
        schedules=SimpleNamespace(reconcile=reconcile, forget=lambda namespace, name, uid: None),
        visited=set(),
        metrics=Metrics(),
        stops={},
        loops={},
    )
    state.wake = state.wakeups.wake
    state.bodies.put(BODY)
    return state


async def _until(check: Any) -> None:
    for _ in range(6000):  # generous: a loaded machine; the loop sleeps an hour if the wake is lost
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the loop never got there")


def test_a_sleeping_loop_wakes_for_a_change_and_ends_when_stopped_without_its_hour_passing() -> None:
    """Issue 27 item 4: a sleeping schedule waits on its wake event alone (stopping sets it too), one waiter per
    schedule instead of two tasks and an asyncio.wait; a wake still runs a full pass and a stop still ends it."""
    passes: list[bool] = []

    async def main() -> None:
        state = _sleeping_state(passes)
        handlers._start_loop(state, "ns", "s", UID)
        task = state.loops[UID]
        await _until(lambda: len(passes) == 1)
        state.wake(UID)  # a spec edit / the claim appeared
        await _until(lambda: len(passes) == 2)
        await handlers._stop_loop(state, "ns", "s", UID)
        await asyncio.wait_for(task, timeout=60)
        assert UID not in state.loops and UID not in state.stops

    asyncio.run(main())
    assert passes == [True, True]


def test_stopping_every_loop_ends_loops_asleep_for_an_hour() -> None:
    passes: list[bool] = []

    async def main() -> None:
        state = _sleeping_state(passes)
        state.releases = {}
        handlers._start_loop(state, "ns", "s", UID)
        task = state.loops[UID]
        await _until(lambda: len(passes) == 1)
        await handlers._stop_all(state)
        assert task.done() and not task.cancelled()  # it ended by itself, not by _stop_all's cancel after 10 s

    asyncio.run(main())
