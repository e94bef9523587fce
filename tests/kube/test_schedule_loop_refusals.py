"""A pass refused while the schedule's namespace is being deleted: the namespace controller deletes pods first, then
everything else in no set order, so the operator's Role (403) or, when the operator's ServiceAccount lives in that
namespace, the account and its token (401) can go moments before the schedules; a pass in between is refused, and
the schedule's deletion then stops its loop. Not an error of ours (the tenancy chaos test `test_deleting_the_
namespace_mid_stop_completes_and_the_operator_says_why` counted the 403 under load, and CI's run of stop 32 the
401); a refusal that lasts is still one."""

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
TOKEN = ApiError(401, "Unauthorized", "Unauthorized")  # what the API server says once the ServiceAccount is deleted
REFUSALS = pytest.mark.parametrize("refusal", [RBAC, TOKEN], ids=["role-deleted-403", "account-deleted-401"])


def loop_state(metrics: Metrics, passes: list[int], refusal: ApiError = RBAC) -> Any:
    from types import SimpleNamespace

    async def call(fn: Any, *args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    def reconcile(body: Any, full: bool) -> float:
        passes.append(1)
        raise refusal

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


@REFUSALS
def test_a_refusal_then_the_schedule_s_deletion_is_not_a_handler_error(refusal: ApiError) -> None:
    metrics, passes = Metrics(), []

    async def main() -> None:
        stopped = asyncio.Event()
        state = loop_state(metrics, passes, refusal)
        task = asyncio.ensure_future(handlers.schedule_loop(state, "ns", "s", UID, stopped))
        while len(passes) < 2:  # refused twice (a claim's deletion woke it), then the schedule's deletion comes
            await asyncio.sleep(0.001)
        stopped.set()
        await asyncio.wait_for(task, timeout=60)

    asyncio.run(main())
    assert metrics.errors == []


@REFUSALS
def test_a_refusal_that_lasts_is_a_handler_error(monkeypatch: pytest.MonkeyPatch, refusal: ApiError) -> None:
    monkeypatch.setattr(handlers, "FORBIDDEN_GRACE_SECONDS", 0.05)
    metrics, passes = Metrics(), []

    async def main() -> None:
        stopped = asyncio.Event()
        state = loop_state(metrics, passes, refusal)
        task = asyncio.ensure_future(handlers.schedule_loop(state, "ns", "s", UID, stopped))
        for _ in range(60000):
            if metrics.errors:
                break
            await asyncio.sleep(0.001)
        stopped.set()
        await asyncio.wait_for(task, timeout=60)

    asyncio.run(main())
    assert metrics.errors and set(metrics.errors) == {"schedule"} and len(passes) >= 2
