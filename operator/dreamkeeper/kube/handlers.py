"""kopf wiring: one daemon per DreamSchedule running the reconcile loop, event handlers that wake it.

Why a daemon and not a timer: the loop sleeps exactly until the next slot (or polls while its Job runs) and a
spec or vocabulary change wakes it at once. The blocking Kubernetes calls run on a bounded thread pool, never on
the event loop; the async daemon itself costs a task, not a thread, so hundreds of schedules are cheap.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import kopf

from dreamkeeper.kube import GROUP, SCHEDULE_PLURAL, VERSION, VOCABULARY_PLURAL
from dreamkeeper.kube.api import ClusterApi, KubeApi
from dreamkeeper.kube.metrics import OperatorMetrics
from dreamkeeper.kube.reconcile import ScheduleReconciler
from dreamkeeper.kube.vocabulary_reconciler import VocabularyConflictError, VocabularyReconciler

log = logging.getLogger(__name__)

ERROR_BACKOFF_SECONDS = (5.0, 15.0, 60.0, 120.0)


@dataclass
class OperatorState:
    api: ClusterApi
    metrics: OperatorMetrics
    schedules: ScheduleReconciler
    vocabularies: VocabularyReconciler
    executor: ThreadPoolExecutor
    wake_events: dict[str, asyncio.Event] = field(default_factory=dict)  # schedule uid -> event
    generations: dict[str, int] = field(default_factory=dict)  # schedule uid -> last generation seen
    names: dict[tuple[str, str], str] = field(default_factory=dict)  # (ns, name) -> uid of live schedules
    visited: set[str] = field(default_factory=set)  # schedule uids with a finished first pass

    async def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, lambda: fn(*args, **kwargs))

    def wake(self, uid: str) -> None:
        event = self.wake_events.get(uid)
        if event is not None:
            event.set()


def connection_info(api: KubeApi) -> kopf.ConnectionInfo:
    config = api.client.configuration  # KubeApi's kubernetes.client.ApiClient
    header = config.get_api_key_with_prefix("BearerToken") or config.get_api_key_with_prefix("authorization")
    parts = header.split(" ", 1) if header else []
    scheme, token = (None, None) if not parts else (None, parts[0]) if len(parts) == 1 else (parts[0], parts[1])
    return kopf.ConnectionInfo(
        server=config.host,
        ca_path=config.ssl_ca_cert,
        insecure=not config.verify_ssl,
        username=config.username or None,
        password=config.password or None,
        scheme=scheme,
        token=token,
        certificate_path=config.cert_file,
        private_key_path=config.key_file,
    )


async def _sleep(wake: asyncio.Event, stopped: Any, seconds: float) -> bool:
    """Sleep until woken, stopped or ``seconds`` passed. True when woken by a change."""
    waiters = [asyncio.ensure_future(wake.wait()), asyncio.ensure_future(stopped.wait())]
    try:
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
    woken = wake.is_set()
    wake.clear()
    return woken


def build_registry(state: OperatorState) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        # kopf watches with the very credentials our own client uses (kubeconfig, in-cluster or token file).
        if not isinstance(state.api, KubeApi):
            raise kopf.PermanentError("no Kubernetes credentials: the operator's API client is not a KubeApi")
        return connection_info(state.api)

    @kopf.on.probe(id="schedules", registry=registry)
    def schedules_probe(**_: Any) -> int:
        return len(state.visited)

    @kopf.daemon(
        GROUP,
        VERSION,
        SCHEDULE_PLURAL,
        id="reconcile",
        registry=registry,
        cancellation_backoff=2.0,
        cancellation_timeout=10.0,
    )
    async def schedule_daemon(name: str, namespace: str | None, uid: str, stopped: Any, **_: Any) -> None:
        assert namespace is not None, "DreamSchedule is namespaced"
        wake = state.wake_events.setdefault(uid, asyncio.Event())
        state.names[(namespace, name)] = uid
        full, failures = True, 0
        try:
            while not stopped:
                try:
                    body = await state.call(state.api.get_schedule, namespace, name)
                    if body is None or body["metadata"].get("uid") != uid or body["metadata"].get("deletionTimestamp"):
                        return
                    state.generations[uid] = int(body["metadata"].get("generation") or 0)
                    delay = await state.call(state.schedules.reconcile, body, full=full)
                    state.visited.add(uid)
                    state.metrics.visited.set(len(state.visited))
                    full, failures = False, 0
                except Exception:
                    state.metrics.handler_error("schedule")
                    delay = ERROR_BACKOFF_SECONDS[min(failures, len(ERROR_BACKOFF_SECONDS) - 1)]
                    failures += 1
                    log.exception("%s/%s: reconcile failed; retrying in %.0fs", namespace, name, delay)
                if await _sleep(wake, stopped, delay):
                    full = True
        finally:
            state.wake_events.pop(uid, None)

    @kopf.on.event(GROUP, VERSION, SCHEDULE_PLURAL, id="spec-changes", registry=registry)
    def schedule_event(body: Any, uid: str, **_: Any) -> None:
        # Status patches (ours) do not bump the generation; spec edits (schedule, runNowToken, ...) do.
        generation = int(body.get("metadata", {}).get("generation") or 0)
        if uid in state.generations and generation != state.generations[uid]:
            state.generations[uid] = generation
            state.wake(uid)

    @kopf.on.delete(GROUP, VERSION, SCHEDULE_PLURAL, id="forget", optional=True, registry=registry)
    def schedule_deleted(name: str, namespace: str | None, uid: str, **_: Any) -> None:
        assert namespace is not None
        try:
            # A schedule deleted while it holds its agent at 0 replicas restores it first; the finalizer (there
            # for the daemon) keeps the schedule until this handler succeeds.
            fresh = state.api.get_schedule(namespace, name)
            released = fresh is None or fresh["metadata"].get("uid") != uid or state.schedules.release_agent(fresh)
        except Exception:
            state.metrics.handler_error("schedule_deleted")
            raise
        if not released:
            raise kopf.TemporaryError("the agent's cycle is still stopping; restoring the agent after it", delay=2)
        try:
            state.schedules.forget(namespace, name, uid)
        except Exception:
            state.metrics.handler_error("schedule_deleted")
            raise
        state.visited.discard(uid)
        state.generations.pop(uid, None)
        state.names.pop((namespace, name), None)
        state.metrics.visited.set(len(state.visited))

    async def render_vocabulary(body: Any, name: str, namespace: str | None, **_: Any) -> None:
        try:
            changed = await state.call(state.vocabularies.reconcile, dict(body))
        except VocabularyConflictError as exc:
            raise kopf.TemporaryError(str(exc), delay=1) from None
        except Exception as exc:
            state.metrics.handler_error("vocabulary")
            log.exception("%s/%s: rendering the vocabulary failed", namespace, name)
            raise kopf.TemporaryError(f"rendering failed ({exc}); retrying", delay=30) from None
        if changed and namespace is not None:
            for schedule in sorted(state.schedules.vocabulary_users.get((namespace, name), set())):
                uid = state.names.get((namespace, schedule))
                if uid:
                    state.wake(uid)

    # Change handlers (not raw events): kopf retries them on errors and runs them once per process on resume.
    for decorator in (kopf.on.resume, kopf.on.create, kopf.on.update):
        decorator(GROUP, VERSION, VOCABULARY_PLURAL, id="render", registry=registry)(render_vocabulary)

    return registry
