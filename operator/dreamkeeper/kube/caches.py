"""Where a pass reads its claim's Jobs, its claim and its schedule from: the API server, or a watched cache.

The reconciler is written against ``JobSource`` and ``ClaimSource``. ``ListedJobs``/``FetchedClaims`` ask the API
server every time (the unit tests' fake, and the fallback); ``JobCache``/``ClaimCache`` read an informer's store
(``informer.py``) once it has listed everything, and the API server before that.

What keeps "never two cycles on one volume" true with a cache that lags the API server by a watch event: every
Job this process creates, patches or deletes is written into the cache at once (``observe``/``forget``), under the
claim's lock, so the next pass on that claim sees it whatever the watch says; and the only writer of cycle Jobs is
this operator (one replica). A Job the cache shows active after it finished only delays the next cycle by a poll
(and its watch event wakes the schedule). A claim the cache shows present after it was deleted is corrected by the
watch event, which wakes the schedules that name it.
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol, cast

from dreamkeeper.kube import LABEL_CLAIM
from dreamkeeper.kube.api import ClusterApi
from dreamkeeper.kube.informer import Informer, Store, compact, projection, wait_all
from dreamkeeper.kube.naming import label_value
from dreamkeeper.kube.objects import Body, DreamSchedule, Job, PersistentVolumeClaim

log = logging.getLogger(__name__)

# How long a pass waits for the first list of a cache before it asks the API server itself (operator start only).
SYNC_WAIT_SECONDS = 60.0

# What the operator reads of a cycle Job (results.py, coordination.py, reconcile): metadata and status; never its
# spec (the pod template is most of a Job's size).
JOB_STATUS = ("conditions", "startTime", "completionTime", "active", "ready", "succeeded", "failed")
project_job = projection(status=JOB_STATUS)
# What placement.check_claim reads: deletionTimestamp (metadata) and the access modes.
project_claim = projection(spec=("accessModes", "volumeName"), status=("phase",))


def claim_of(job: Body) -> str | None:
    return ((job.get("metadata") or {}).get("labels") or {}).get(LABEL_CLAIM)


class JobSource(Protocol):
    def claim_jobs(self, namespace: str, claim: str) -> list[Job]:
        """Every cycle Job on the claim (of any schedule)."""
        ...

    def observe(self, job: Job) -> None:
        """A Job as this process just created or patched it."""
        ...

    def forget(self, namespace: str, name: str) -> None:
        """A Job this process just deleted."""
        ...


class ClaimSource(Protocol):
    def get_claim(self, namespace: str, name: str) -> PersistentVolumeClaim | None: ...


class ListedJobs:
    """Ask the API server every time (a label-selected list)."""

    def __init__(self, api: ClusterApi) -> None:
        self.api = api

    def claim_jobs(self, namespace: str, claim: str) -> list[Job]:
        return self.api.list_jobs(namespace, f"{LABEL_CLAIM}={label_value(claim)}")

    def observe(self, job: Job) -> None:
        pass

    def forget(self, namespace: str, name: str) -> None:
        pass


class FetchedClaims:
    def __init__(self, api: ClusterApi) -> None:
        self.api = api

    def get_claim(self, namespace: str, name: str) -> PersistentVolumeClaim | None:
        return self.api.get_pvc(namespace, name)


class _Synced:
    """Waits once, at the first read, for the informers' first lists; then says whether the store may be read."""

    def __init__(self, informers: list[Informer], what: str) -> None:
        self.informers = informers
        self.what = what
        self._ready = False
        self._waited = False
        self._lock = threading.Lock()

    def ready(self) -> bool:
        if self._ready:
            return True
        with self._lock:  # the first readers wait together for the first lists (operator start only)
            if not self._waited:
                self._waited = True
                self._ready = wait_all(self.informers, SYNC_WAIT_SECONDS)
                if not self._ready:
                    log.warning(
                        "%s: not listed after %.0fs; the API server is asked meanwhile", self.what, SYNC_WAIT_SECONDS
                    )
            else:
                self._ready = all(informer.synced.is_set() for informer in self.informers)
            return self._ready


class JobCache:
    """Cycle Jobs by claim from the Job informers (label ``dreamkeeper.io/claim``), written through by this process."""

    def __init__(self, api: ClusterApi, store: Store, informers: list[Informer]) -> None:
        self.api = api
        self.store = store
        self._synced = _Synced(informers, "cycle Jobs")
        self._listed = ListedJobs(api)

    def claim_jobs(self, namespace: str, claim: str) -> list[Job]:
        if not self._synced.ready():
            return self._listed.claim_jobs(namespace, claim)
        # The label holds the claim as label_value() wrote it; the index is keyed by that value.
        return cast("list[Job]", self.store.indexed(namespace, label_value(claim)))

    def observe(self, job: Job) -> None:
        if claim_of(cast(Body, job)) is not None:  # only cycle Jobs are watched: the cache holds nothing else
            self.store.put(cast(Body, job), by_us=True)

    def forget(self, namespace: str, name: str) -> None:
        self.store.remove(namespace, name, by_us=True)


class ClaimCache:
    """PersistentVolumeClaims from the claim informers; a claim not in the cache before it synced is fetched."""

    def __init__(self, api: ClusterApi, store: Store, informers: list[Informer]) -> None:
        self.api = api
        self.store = store
        self._synced = _Synced(informers, "PersistentVolumeClaims")

    def get_claim(self, namespace: str, name: str) -> PersistentVolumeClaim | None:
        cached = self.store.get(namespace, name)
        if cached is not None:
            return cast(PersistentVolumeClaim, cached)
        if self._synced.ready():
            # Listed and watched: what the store holds now. Read again: the first list may have come in while this
            # pass waited for it (the store was read before), and "absent" then would leave the schedule not ready
            # until the claim next changes (issue 27: schedules listed as fast as claims at operator start).
            return cast("PersistentVolumeClaim | None", self.store.get(namespace, name))
        return self.api.get_pvc(namespace, name)


def claim_changed(before: Body | None, after: Body | None) -> bool:
    """Whether a claim changed in a way a schedule's readiness depends on (exists, being deleted, access modes)."""

    def seen(obj: Body | None) -> tuple[object, ...] | None:
        if obj is None:
            return None
        meta = obj.get("metadata") or {}
        return (
            meta.get("uid"),
            bool(meta.get("deletionTimestamp")),
            tuple((obj.get("spec") or {}).get("accessModes") or ()),
        )

    return seen(before) != seen(after)


class ScheduleBodies:
    """The newest DreamSchedule body seen (watch events, and this process's own status writes), by uid: a pass
    starts from it instead of a GET. A copy older than the API server's only costs a 409 on the status write
    (it carries the resourceVersion it read), after which the body is fetched."""

    def __init__(self) -> None:
        self._bodies: dict[str, DreamSchedule] = {}
        self._lock = threading.Lock()

    def put(self, body: DreamSchedule, *, slim: bool = False) -> None:
        """Keep ``body`` if it is the newest seen; ``slim``: it is ``slim_schedule``'s already (the schedule
        informer's copy, shared with its store rather than copied again for each watch event)."""
        uid = body["metadata"].get("uid")
        if not uid:
            return
        if not slim:
            body = cast(DreamSchedule, slim_schedule(cast(Body, body)))
        with self._lock:
            current = self._bodies.get(uid)
            if current is None or _newer_body(body, current):
                self._bodies[uid] = body

    def get(self, uid: str) -> DreamSchedule | None:
        with self._lock:
            return self._bodies.get(uid)

    def drop(self, uid: str) -> None:
        with self._lock:
            self._bodies.pop(uid, None)

    def __len__(self) -> int:
        return len(self._bodies)


def slim_metadata(meta: Body) -> Body:
    return {k: v for k, v in meta.items() if k != "managedFields"}


def slim_schedule(raw: Body) -> Body:
    """A DreamSchedule as the operator keeps it: without managedFields (about half of a schedule's bytes, never
    read here; a merge patch leaves the server's own untouched), short strings shared: 5,000 schedules' bodies are
    held for the operator's life."""
    return cast(Body, compact({**raw, "metadata": slim_metadata(cast(Body, raw.get("metadata") or {}))}))


def _newer_body(candidate: DreamSchedule, current: DreamSchedule) -> bool:
    new = str(candidate["metadata"].get("resourceVersion") or "")
    old = str(current["metadata"].get("resourceVersion") or "")
    if new.isdigit() and old.isdigit():
        return int(new) >= int(old)
    return True
