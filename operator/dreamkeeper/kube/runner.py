"""Start the operator: kopf in this process, metrics on their own port, liveness on another, JSON logs."""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

import kopf
from prometheus_client import start_http_server

from dreamkeeper.kube import FINALIZER, GROUP, LABEL_CLAIM, SCHEDULE_PLURAL, VERSION
from dreamkeeper.kube.api import KubeApi
from dreamkeeper.kube.caches import (
    ClaimCache,
    JobCache,
    ScheduleBodies,
    claim_of,
    project_claim,
    project_job,
    slim_schedule,
)
from dreamkeeper.kube.handlers import OperatorState, build_registry
from dreamkeeper.kube.informer import Informer, Store
from dreamkeeper.kube.jobspec import JobDefaults
from dreamkeeper.kube.metrics import OperatorMetrics
from dreamkeeper.kube.reconcile import ReconcileSettings, ScheduleReconciler
from dreamkeeper.kube.vocabulary_reconciler import VocabularyReconciler

log = logging.getLogger(__name__)

# Served under --all-namespaces only when named: the cluster's own namespaces run no agents.
SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")
LOOPBACK = "127.0.0.1"


@dataclass
class OperatorOptions:
    namespaces: list[str] = field(default_factory=list)
    all_namespaces: bool = False
    exclude_namespaces: list[str] = field(default_factory=lambda: list(SYSTEM_NAMESPACES))
    # Loopback unless told otherwise: the chart passes the pod IP (downward API), never 0.0.0.0.
    metrics_host: str = LOOPBACK
    metrics_port: int = 8080
    health_host: str = LOOPBACK
    health_port: int = 8081
    kubeconfig: str | None = None
    workers: int = 8
    object_workers: int = 16
    malloc_arena_max: int | None = 2
    log_format: Literal["json", "text"] = "json"
    verbose: bool = False
    job_defaults: JobDefaults = field(default_factory=JobDefaults)
    reconcile: ReconcileSettings = field(default_factory=ReconcileSettings)

    def validate(self) -> None:
        if self.all_namespaces == bool(self.namespaces):
            raise ValueError("choose the scope: --namespace NS (repeatable) or --all-namespaces")
        globs = [ns for ns in self.namespaces if any(c in ns for c in "*?![")]
        if globs:
            # Namespace patterns need namespace list/watch permissions; the least-privilege RBAC has none.
            raise ValueError(f"namespace patterns are not supported (scanning is off): {globs}")

    @property
    def excluded(self) -> frozenset[str]:
        """Namespaces never served: only under --all-namespaces (a namespace named with --namespace is asked for)."""
        return frozenset(ns for ns in self.exclude_namespaces if ns) if self.all_namespaces else frozenset()


def kopf_settings(options: OperatorOptions) -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    # Our own keys, not kopf.zalando.org/... (and switching later would re-run handlers).
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=GROUP, key="last-handled-configuration"
    )
    # Deliberate Events are posted by the reconciler; kopf's own INFO chatter would be one Event per handler run.
    settings.posting.level = logging.WARNING
    # Explicit watch timeouts: long-lived watches otherwise stop seeing changes (nolar/kopf#1120).
    settings.watching.connect_timeout = 60
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 310
    # No CRD/namespace discovery: the least-privilege RBAC grants neither, and the scope is explicit.
    settings.scanning.disabled = True
    settings.execution.max_workers = max(2, options.workers)
    # kopf processes every object's events concurrently and its HTTP client has no connection limit: on a start
    # with hundreds of schedules that is hundreds of simultaneous TLS connections (finalizer patches), each with
    # native buffers that never return to the OS. A bounded worker pool keeps memory flat at a small cost in time.
    settings.queueing.worker_limit = max(1, options.object_workers)
    # An idle worker keeps its slot for idle_timeout (5 s by default): with a bounded pool that caps throughput at
    # worker_limit / idle_timeout objects per second. At 0.2 s that was 80 schedules a second: the listing of 5,000
    # schedules on a restart took a minute before the last loop started, and as long again for the watch events of
    # the status writes. Our handlers are cheap and never wait on the API, so a slot is released at once.
    settings.queueing.idle_timeout = 0.01
    # kopf lists every object in one response unless told otherwise (at 5,000 schedules, when kopf still watched
    # them, ~12 MB of JSON and ~60 MB of parsed bodies at once, a peak the process keeps as RSS); it watches only
    # MemoryVocabularies now, in pages of 500 as our own informers list.
    settings.watching.chunk_size = 500
    settings.networking.error_backoffs = [1, 2, 5, 10, 20, 30]
    return settings


def limit_malloc_arenas(arenas: int | None) -> None:
    """glibc gives each thread its own malloc arena; with a thread pool plus TLS and JSON churn the arenas fragment
    and RSS only grows. MALLOC_ARENA_MAX=2 (set via mallopt, before the pools start) keeps it proportional to use.
    No effect (and no error) on other C libraries."""
    if not arenas or os.environ.get("MALLOC_ARENA_MAX"):
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-8, arenas)  # M_ARENA_MAX
    except (OSError, AttributeError):
        log.debug("mallopt unavailable; malloc arenas not limited")


class QuietWatchingHandlers(logging.Filter):
    """Drops kopf's "Handler 'vocabularies' succeeded." line: a watching handler runs for every watch event (each
    object's listing and each status write), so it was two lines per object per pass with nothing to say. Their
    failures are still logged, with the traceback. ('schedules' was kopf's too, before its own informer.)"""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not (message.startswith(WATCHING_HANDLERS) and message.endswith(" succeeded."))


WATCHING_HANDLERS = ("Handler 'schedules'", "Handler 'vocabularies'")


def configure_logging(options: OperatorOptions) -> None:
    root = logging.getLogger()
    for handler in list(root.handlers):  # the CLI root callback installed a plain handler; kopf's replaces it
        root.removeHandler(handler)
    log_format = kopf.LogFormat.JSON if options.log_format == "json" else kopf.LogFormat.FULL
    kopf.configure(verbose=options.verbose, log_format=log_format)
    logging.getLogger("kopf.objects").addFilter(QuietWatchingHandlers())
    logging.getLogger("urllib3").setLevel(logging.WARNING)


def build_state(options: OperatorOptions) -> OperatorState:
    api = KubeApi.from_kubeconfig(options.kubeconfig) if options.kubeconfig else KubeApi()
    api.client.configuration.connection_pool_maxsize = max(4, options.workers)
    metrics = OperatorMetrics()
    # A pass reads its claim's Jobs and its claim from caches the API server's watches keep (informer.py): at
    # thousands of schedules a list and a get per pass were most of the API calls of a restart.
    job_store, claim_store = Store(project_job, index=claim_of), Store(project_claim)
    job_informers: list[Informer] = []
    claim_informers: list[Informer] = []
    bodies = ScheduleBodies()
    reconciler = ScheduleReconciler(
        api,
        metrics,
        options.job_defaults,
        settings=options.reconcile,
        jobs=JobCache(api, job_store, job_informers),
        claims=ClaimCache(api, claim_store, claim_informers),
        bodies=bodies,
    )
    state = OperatorState(
        api=api,
        metrics=metrics,
        schedules=reconciler,
        vocabularies=VocabularyReconciler(api),
        executor=ThreadPoolExecutor(max_workers=options.workers, thread_name_prefix="dk-reconcile"),
        excluded_namespaces=options.excluded,
        bodies=bodies,
    )
    watcher = api.watcher()  # watches hold a connection each: their own pool, not the reconcile threads'
    for namespace in [None] if options.all_namespaces else options.namespaces:
        where = f"namespace {namespace}" if namespace else "all namespaces"
        job_informers.append(
            Informer(watcher, _collection("batch/v1", "jobs", namespace), job_store, f"cycle Jobs in {where}",
                     label_selector=LABEL_CLAIM)
        )  # fmt: skip
        claim_informers.append(
            Informer(watcher, _collection("v1", "persistentvolumeclaims", namespace), claim_store,
                     f"PersistentVolumeClaims in {where}", on_change=state.claim_seen)
        )  # fmt: skip
        # The schedules themselves: every one listed starts its loop (handlers.schedule_event); started with kopf's
        # event loop, where their events are handled.
        state.schedule_informers.append(
            Informer(watcher, _collection(f"{GROUP}/{VERSION}", SCHEDULE_PLURAL, namespace), Store(slim_schedule),
                     f"DreamSchedules in {where}", on_change=state.schedule_seen, notify_listing=True)
        )  # fmt: skip
    state.informers = [*job_informers, *claim_informers]
    return state


def _collection(group_version: str, plural: str, namespace: str | None) -> str:
    root = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    return f"{root}/namespaces/{namespace}/{plural}" if namespace else f"{root}/{plural}"


def run_operator(
    options: OperatorOptions,
    *,
    stop_flag: asyncio.Event | threading.Event | None = None,
    ready_flag: asyncio.Event | threading.Event | None = None,
    configure: bool = True,
) -> OperatorState:
    """Run until ``stop_flag`` is set or the process is signalled. Returns the state (for tests)."""
    options.validate()
    if configure:
        configure_logging(options)
    limit_malloc_arenas(options.malloc_arena_max)
    state = build_state(options)
    server, thread = start_http_server(options.metrics_port, options.metrics_host, registry=state.metrics.registry)
    scope = f"namespaces {options.namespaces}"
    if options.all_namespaces:
        scope = f"all namespaces except {sorted(options.excluded)}" if options.excluded else "all namespaces"
    log.info(
        "dreamkeeper operator: %s; metrics on %s:%d/metrics, liveness on %s:%d/healthz; cycle logs %s",
        scope,
        options.metrics_host,
        options.metrics_port,
        options.health_host,
        options.health_port,
        "redacted (ids and counts only)" if options.job_defaults.redact_logs else "with memory content",
    )
    kwargs: dict[str, Any] = {
        "registry": build_registry(state),
        "settings": kopf_settings(options),
        "standalone": True,
        "liveness_endpoint": f"http://{options.health_host}:{options.health_port}/healthz",
        "stop_flag": stop_flag,
        "ready_flag": ready_flag,
    }
    if options.all_namespaces:
        kwargs["clusterwide"] = True
    else:
        kwargs["namespaces"] = list(options.namespaces)
    for informer in state.informers:
        informer.start()
    try:
        asyncio.run(kopf.operator(**kwargs))
    finally:
        for informer in [*state.informers, *state.schedule_informers]:
            informer.stop()
        server.shutdown()
        thread.join(timeout=5)
        state.executor.shutdown(wait=False, cancel_futures=True)
    return state
