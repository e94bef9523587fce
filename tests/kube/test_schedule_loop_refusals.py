"""A pass refused (403) while the schedule's namespace is being deleted: the namespace controller deletes the
operator's Role moments before the schedules, so a pass in between is refused, and the schedule's deletion then
stops its loop. Not an error of ours (the tenancy chaos test `test_deleting_the_namespace_mid_stop_completes_and_the
_operator_says_why` counted it under load); a refusal that lasts is still one."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dreamkeeper.kube import handlers
from dreamkeeper.kube.api import ApiError
from tests.kube.test_schedule_loop import BODY, UID, Metrics

RBAC = ApiError(
    403, "Forbidden", 'deployments.apps "rockbot" is forbidden: User "system:serviceaccount:ns:dk" cannot get'
)


def loop_state(metrics: Metrics, passes: list[int]) -> Any:
    from types import SimpleNamespace

    async def call(fn: Any, *args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    def reconcile(body: Any, full: bool) -> float:
        passes.append(1)
        raise RBAC

    return SimpleNamespace(
        wakeups=SimpleNamespace(events={}),
        bodies={UID: BODY},
        call=call,
        api=SimpleNamespace(get_schedule=lambda namespace, name: BODY),
        generations={},
        schedules=SimpleNamespace(reconcile=reconcile),
        visited=set(),
        metrics=metrics,
    )


@pytest.fixture(autouse=True)
def _short_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(handlers, "ERROR_BACKOFF_SECONDS", (0.01,))


def test_a_refusal_then_the_schedule_s_deletion_is_not_a_handler_error() -> None:
    metrics, passes = Metrics(), []

    async def main() -> None:
        stopped = asyncio.Event()
        task = asyncio.ensure_future(handlers.schedule_loop(loop_state(metrics, passes), "ns", "s", UID, stopped))
        while len(passes) < 2:  # refused twice (a claim's deletion woke it), then the schedule's deletion comes
            await asyncio.sleep(0.001)
        stopped.set()
        await asyncio.wait_for(task, timeout=60)

    asyncio.run(main())
    assert metrics.errors == []


def test_a_refusal_that_lasts_is_a_handler_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(handlers, "FORBIDDEN_GRACE_SECONDS", 0.05)
    metrics, passes = Metrics(), []

    async def main() -> None:
        stopped = asyncio.Event()
        task = asyncio.ensure_future(handlers.schedule_loop(loop_state(metrics, passes), "ns", "s", UID, stopped))
        for _ in range(60000):
            if metrics.errors:
                break
            await asyncio.sleep(0.001)
        stopped.set()
        await asyncio.wait_for(task, timeout=60)

    asyncio.run(main())
    assert metrics.errors and set(metrics.errors) == {"schedule"} and len(passes) >= 2
