"""The operator's wiring: one reconcile loop per DreamSchedule, started and stopped by the schedule's own watch
events (an ``Informer`` of DreamSchedules, not a kopf handler: ``schedule_event``); kopf runs the vocabularies, the
probes, login, startup and cleanup.

Why not ``kopf.daemon``: kopf puts a finalizer on every object that has a daemon (and on every object with a
non-optional delete handler), and only a running operator removes it, so deleting a namespace, a CRD or the whole
install hangs while the operator is down. The loops here are asyncio tasks this module starts on the first event
of a schedule and stops on its DELETED event; a restart lists every schedule again. The finalizer earlier
versions had kopf add is removed on sight (``_drop_old_finalizer``). The one finalizer left is a Stop's
(``stop_hold.py``): a schedule deleted while it holds its agent at 0 replicas is released here once the agent is
restored.

The loop sleeps exactly until the next slot (or polls while its Job runs); a spec change, or the PVC or
MemoryVocabulary it references appearing or changing, wakes it at once. The blocking Kubernetes calls run on a
bounded thread pool, never on the event loop; a loop costs a task, not a thread, so thousands of schedules are cheap.
A pass starts from the newest body of its schedule the watch (or the pass before it) delivered, not from a GET
(``caches.ScheduleBodies``); claims and cycle Jobs come from watched caches too (``informer.py``, ``runner.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, cast

import kopf

from dreamkeeper.kube import FINALIZER, GROUP, VERSION, VOCABULARY_PLURAL
from dreamkeeper.kube.api import ApiError, ClusterApi, KubeApi, NotFoundError
from dreamkeeper.kube.caches import ScheduleBodies, claim_changed
from dreamkeeper.kube.informer import Informer
from dreamkeeper.kube.metrics import OperatorMetrics
from dreamkeeper.kube.objects import Body, DreamSchedule
from dreamkeeper.kube.reconcile import ScheduleReconciler
from dreamkeeper.kube.vocabulary_reconciler import VocabularyConflictError, VocabularyReconciler
from dreamkeeper.kube.wakeups import Wakeups

log = logging.getLogger(__name__)

ERROR_BACKOFF_SECONDS = (5.0, 15.0, 60.0, 120.0)
RELEASE_POLL_SECONDS = 2.0  # a deleted schedule's Stop: until its cycle pod is gone and the agent restored
RETRY_SECONDS = 30.0  # a vocabulary whose render failed unexpectedly (the API server down, ...)
FORBIDDEN_GRACE_SECONDS = 5.0  # a refused pass is an error once refusals outlast this (schedule_loop)
REFUSALS = frozenset({401, 403})  # the API server refused the operator's identity (401) or its rights (403)


@dataclass
class OperatorState:
    api: ClusterApi
    metrics: OperatorMetrics
    schedules: ScheduleReconciler
    vocabularies: VocabularyReconciler
    executor: ThreadPoolExecutor
    excluded_namespaces: frozenset[str] = frozenset()  # --all-namespaces: never served unless asked
    wakeups: Wakeups = field(default_factory=Wakeups)
    loops: dict[str, asyncio.Task[None]] = field(default_factory=dict)  # schedule uid -> its reconcile loop
    stops: dict[str, asyncio.Event] = field(default_factory=dict)  # schedule uid -> set to end its loop
    releases: dict[str, asyncio.Task[None]] = field(default_factory=dict)  # deleted mid-Stop: restoring the agent
    generations: dict[str, int] = field(default_factory=dict)  # schedule uid -> last generation seen
    visited: set[str] = field(default_factory=set)  # schedule uids with a finished first pass
    bodies: ScheduleBodies = field(default_factory=ScheduleBodies)  # the newest body of each schedule (by uid)
    informers: list[Informer] = field(default_factory=list)  # claims and cycle Jobs (runner.py starts them)
    # The DreamSchedules' list + watch (runner.py builds them; started once kopf's event loop runs, which is where
    # their events are handled).
    schedule_informers: list[Informer] = field(default_factory=list)
    loop: asyncio.AbstractEventLoop | None = None  # kopf's: where the informers' threads hand their changes over
    stopping: bool = False  # the operator is stopping: a schedule event still in flight starts no loop

    async def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, lambda: fn(*args, **kwargs))

    def wake(self, uid: str) -> None:
        self.wakeups.wake(uid)

    def claim_seen(self, before: Body | None, after: Body | None) -> None:
        """The claim informer's thread saw a change: the schedules naming the claim re-check, if it matters to them
        (created, deleted, being deleted, access modes; not a resize or a status update)."""
        loop = self.loop
        if loop is None or not claim_changed(before, after):
            return
        meta = (after or before or {}).get("metadata") or {}
        namespace, name = meta.get("namespace"), meta.get("name")
        if namespace and name:
            loop.call_soon_threadsafe(self.wakeups.wake_claim_users, namespace, name)

    def schedule_seen(self, before: Body | None, after: Body | None) -> None:
        """The schedule informer's thread saw a schedule listed, changed or deleted: handled on the event loop, in
        the order seen (each event's handling starts in the order it was handed over)."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        body = after if after is not None else before
        if body is None:
            return
        kind = "DELETED" if after is None else "ADDED" if before is None else "MODIFIED"
        with contextlib.suppress(RuntimeError):  # the loop closed since: the operator is stopping
            loop.call_soon_threadsafe(_handle_schedule_event, self, kind, body)


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


async def _sleep(wake: asyncio.Event, stopped: asyncio.Event, seconds: float) -> bool:
    """Sleep until woken or ``seconds`` passed. True when woken by a change (or a stop).

    Stopping a loop sets its wake event too (``_stop_loop``, ``_stop_all``), so a sleeping schedule waits on one
    event: thousands of schedules sleep at once, and two waiter tasks plus an ``asyncio.wait`` each were ~5 KB
    per schedule (issue 27: 5,000 schedules under 500 MB)."""
    if not stopped.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), timeout=seconds)
    woken = wake.is_set()
    wake.clear()
    return woken


async def schedule_loop(state: OperatorState, namespace: str, name: str, uid: str, stopped: asyncio.Event) -> None:
    """Reconcile one schedule until it is deleted (or replaced under the same name) or the operator stops."""
    wake = state.wakeups.events.setdefault(uid, asyncio.Event())
    wake.clear()  # what changed before the first pass is in the body it reads
    full, failures = True, 0
    # A refusal (403, or 401) not counted yet, since when: a namespace being deleted takes the operator's Role (403)
    # or, when the operator's ServiceAccount lives there too, that account and with it the operator's token (401)
    # moments before its schedules (the namespace controller deletes pods first, then everything else in no set
    # order), and a pass in between is refused; the schedule's deletion then stops the loop and nothing was wrong.
    # A refusal that outlasts FORBIDDEN_GRACE_SECONDS is counted (a revoked token stays revoked: counted then).
    refused_since: float | None = None
    clock = asyncio.get_running_loop().time
    while not stopped.is_set():
        try:
            body = state.bodies.get(uid) or await state.call(state.api.get_schedule, namespace, name)
            if body is None or body["metadata"].get("uid") != uid or body["metadata"].get("deletionTimestamp"):
                if refused_since is not None and body is None:
                    state.metrics.handler_error("schedule")  # refused, then gone without a deletion seen
                return
            state.generations[uid] = int(body["metadata"].get("generation") or 0)
            delay = await state.call(state.schedules.reconcile, body, full=full)
            state.visited.add(uid)
            state.metrics.visited.set(len(state.visited))
            full, failures, refused_since = False, 0, None
        except Exception as exc:
            delay = ERROR_BACKOFF_SECONDS[min(failures, len(ERROR_BACKOFF_SECONDS) - 1)]
            failures += 1
            if isinstance(exc, ApiError) and _namespace_terminating(exc):
                # The namespace is being deleted under the schedule (its Events, Jobs and status writes are refused
                # until the schedule itself is gone): expected, not an error of ours; the next pass finds it gone.
                log.info("%s/%s: %s; the namespace is being deleted", namespace, name, exc)
            elif isinstance(exc, NotFoundError) and await _schedule_gone(state, namespace, name, uid):
                log.info("%s/%s: deleted while a pass ran (%s)", namespace, name, exc)
                return
            elif (
                isinstance(exc, ApiError)
                and exc.status in REFUSALS
                and (refused_since is None or clock() - refused_since < FORBIDDEN_GRACE_SECONDS)
            ):
                refused_since = clock() if refused_since is None else refused_since
                log.warning("%s/%s: reconcile refused: %s; retrying in %.0fs", namespace, name, exc, delay)
            elif isinstance(exc, ApiError):
                state.metrics.handler_error("schedule")
                refused_since = None
                # The API server said no (RBAC, a quota): its answer is the whole story, a traceback adds nothing.
                log.warning("%s/%s: reconcile failed: %s; retrying in %.0fs", namespace, name, exc, delay)
            else:
                state.metrics.handler_error("schedule")
                log.exception("%s/%s: reconcile failed; retrying in %.0fs", namespace, name, delay)
        if await _sleep(wake, stopped, delay):
            full = True


def _namespace_terminating(exc: ApiError) -> bool:
    """The API server's refusal to write into a namespace being deleted (403 NamespaceTerminating)."""
    return exc.status == 403 and "because it is being terminated" in exc.message


async def _schedule_gone(state: OperatorState, namespace: str, name: str, uid: str) -> bool:
    try:
        body = await state.call(state.api.get_schedule, namespace, name)
    except ApiError:
        return False
    return body is None or body["metadata"].get("uid") != uid or bool(body["metadata"].get("deletionTimestamp"))


def _start_loop(state: OperatorState, namespace: str, name: str, uid: str) -> None:
    stopped = asyncio.Event()
    state.stops[uid] = stopped
    task = asyncio.create_task(schedule_loop(state, namespace, name, uid, stopped), name=f"schedule {namespace}/{name}")

    def done(_: asyncio.Task[None]) -> None:
        if state.loops.get(uid) is task:
            state.loops.pop(uid, None)
            state.stops.pop(uid, None)

    task.add_done_callback(done)
    state.loops[uid] = task


async def _stop_loop(state: OperatorState, namespace: str, name: str, uid: str) -> None:
    stop = state.stops.get(uid)
    if stop is not None:
        stop.set()
        state.wake(uid)  # a sleeping loop waits on its wake event only
    state.wakeups.forget(uid)
    state.bodies.drop(uid)
    state.visited.discard(uid)
    state.generations.pop(uid, None)
    state.metrics.visited.set(len(state.visited))
    try:
        await state.call(state.schedules.forget, namespace, name, uid)
    except Exception:
        state.metrics.handler_error("schedule_deleted")
        log.exception("%s/%s: forgetting the deleted schedule failed", namespace, name)


async def _release_deleted(state: OperatorState, namespace: str, name: str, uid: str) -> None:
    """A schedule deleted while a Stop holds its agent: end the cycle, restore the workload, drop the finalizer."""
    while True:
        try:
            body = await state.call(state.api.get_schedule, namespace, name)
            if body is None or body["metadata"].get("uid") != uid:
                return
            if await state.call(state.schedules.release_deleted, body):
                return
        except Exception:
            state.metrics.handler_error("schedule_deleted")
            log.exception("%s/%s: restoring the agent of the deleted schedule failed; retrying", namespace, name)
        await asyncio.sleep(RELEASE_POLL_SECONDS)


async def _stop_all(state: OperatorState) -> None:
    for uid, stop in list(state.stops.items()):
        stop.set()
        state.wake(uid)
    tasks = [*state.loops.values(), *state.releases.values()]
    if tasks:
        await asyncio.wait(tasks, timeout=10)
    for task in tasks:
        task.cancel()


async def render_vocabulary(state: OperatorState, namespace: str, name: str, body: Any) -> None:
    """Render one MemoryVocabulary; a conflict re-reads it at once, another failure retries in the background."""
    for _ in range(3):
        try:
            changed = await state.call(state.vocabularies.reconcile, body)
        except VocabularyConflictError:
            body = await state.call(state.api.get_vocabulary, namespace, name)
            if body is None:
                return
            continue
        except Exception:
            state.metrics.handler_error("vocabulary")
            log.exception("%s/%s: rendering the vocabulary failed; retrying in %.0fs", namespace, name, RETRY_SECONDS)
            asyncio.get_running_loop().call_later(
                RETRY_SECONDS, lambda: asyncio.ensure_future(_retry_vocabulary(state, namespace, name))
            )
            return
        if changed:
            state.wakeups.wake_vocabulary_users(namespace, name)
        return


async def _retry_vocabulary(state: OperatorState, namespace: str, name: str) -> None:
    body = await state.call(state.api.get_vocabulary, namespace, name)
    if body is not None and not body["metadata"].get("deletionTimestamp"):
        await render_vocabulary(state, namespace, name, body)


_BACKGROUND: set[asyncio.Task[None]] = set()  # the event loop keeps only weak references to tasks


def _background(coroutine: Coroutine[Any, Any, None]) -> None:
    task = asyncio.ensure_future(coroutine)
    _BACKGROUND.add(task)
    task.add_done_callback(_BACKGROUND.discard)


def _handle_schedule_event(state: OperatorState, kind: str, body: Body) -> None:
    """On the event loop: one task per event (most finish without awaiting anything, in the order started)."""
    if state.stopping:
        return

    async def handle() -> None:
        try:
            await schedule_event(state, kind, body)
        except Exception:
            state.metrics.handler_error("schedule")
            meta = body.get("metadata") or {}
            log.exception("%s/%s: handling its %s event failed", meta.get("namespace"), meta.get("name"), kind)

    _background(handle())


async def schedule_event(state: OperatorState, kind: str, body: Body) -> None:
    """A DreamSchedule listed, changed or deleted: start, wake or stop its loop.

    Why not a kopf handler: kopf's processing of one watch event (per-object memory, three loggers, the diff base
    of the whole body, a worker task) cost milliseconds, twice per schedule per pass (its listing and the echo of
    the pass's own status write): most of the operator's CPU after a restart at 5,000 schedules (issue 27). The
    informer's event costs a JSON parse and a copy. kopf adds no finalizer for DreamSchedules and keeps no state on
    them; the finalizer earlier versions had kopf add is removed here, as kopf did (``_drop_old_finalizer``)."""
    meta = body.get("metadata") or {}
    namespace, name, uid = str(meta.get("namespace") or ""), str(meta.get("name") or ""), str(meta.get("uid") or "")
    if not (namespace and name and uid):
        return
    if kind == "DELETED":
        await _stop_loop(state, namespace, name, uid)
        return
    if FINALIZER in (meta.get("finalizers") or []):
        # Beside the handling, not before it: a DELETED event handled meanwhile must not be followed by a loop start.
        _background(_drop_old_finalizer(state, namespace, name, cast(DreamSchedule, body)))
    if meta.get("deletionTimestamp"):
        # Only a Stop's finalizer keeps a deleted schedule here: restore its agent, then let it go.
        await _stop_loop(state, namespace, name, uid)
        if uid not in state.releases:
            release = asyncio.create_task(_release_deleted(state, namespace, name, uid))
            state.releases[uid] = release
            release.add_done_callback(lambda _: state.releases.pop(uid, None))
        return
    if namespace in state.excluded_namespaces:
        await state.call(state.schedules.refuse_namespace, dict(body))
        return
    state.wakeups.track(uid, namespace, body.get("spec"))
    state.bodies.put(cast(DreamSchedule, body), slim=True)  # the loop's next pass starts from it (no GET)
    generation = int(meta.get("generation") or 0)
    if uid not in state.loops:
        state.generations[uid] = generation
        _start_loop(state, namespace, name, uid)
    elif generation != state.generations.get(uid, generation):
        # Status patches (ours) do not bump the generation; spec edits (schedule, runNowToken, ...) do.
        state.generations[uid] = generation
        state.wake(uid)


async def _drop_old_finalizer(state: OperatorState, namespace: str, name: str, body: DreamSchedule) -> None:
    """Earlier versions ran kopf daemons, for which kopf put ``FINALIZER`` on every schedule; nothing asks for it
    now, and left there it would hang the schedule's (and its namespace's) deletion. Removed on sight, as kopf did
    for a finalizer no handler needs. A conflict (the schedule changed meanwhile) is retried by its next event."""
    meta = body["metadata"]
    kept = [f for f in meta.get("finalizers") or [] if f != FINALIZER]
    patch = {"metadata": {"resourceVersion": meta.get("resourceVersion"), "finalizers": kept}}
    try:
        await state.call(state.api.patch_schedule, namespace, name, patch)
    except ApiError as exc:
        log.info("%s/%s: the old finalizer %s stays for now: %s", namespace, name, FINALIZER, exc)
        return
    log.info("%s/%s: removed the finalizer %s an earlier version added (kept %s)", namespace, name, FINALIZER, kept)


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

    @kopf.on.startup(registry=registry)
    async def remember_loop(**_: Any) -> None:
        state.loop = asyncio.get_running_loop()
        for informer in state.schedule_informers:  # their events are handed over to this loop
            informer.start()

    @kopf.on.cleanup(registry=registry)
    async def stop_loops(**_: Any) -> None:
        state.stopping = True
        for informer in state.schedule_informers:
            informer.stop()
        await _stop_all(state)

    # Watching handlers (no kopf change handlers): kopf would keep the whole last-handled spec in an annotation,
    # and a large vocabulary (valid by the schema) does not fit the 256 KiB annotation limit. Rendering is
    # idempotent (the status and the ConfigMap are written only when they differ), so every event may render.
    @kopf.on.event(GROUP, VERSION, VOCABULARY_PLURAL, id="vocabularies", registry=registry)
    async def vocabulary_event(type: str | None, body: Any, name: str, namespace: str | None, **_: Any) -> None:
        if namespace is None:
            return
        if type == "DELETED" or body.get("metadata", {}).get("deletionTimestamp"):
            # The rendered ConfigMap is owned by the CR and garbage-collected with it; its users re-check now.
            state.wakeups.wake_vocabulary_users(namespace, name)
            return
        await render_vocabulary(state, namespace, name, dict(body))

    return registry
