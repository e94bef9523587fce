"""The operator-scale bench's setup: N claims bound to their own volumes, N schedules and their history Jobs, made
in O(N) requests by a bounded pool of keep-alive connections, with nothing left for the controller manager to write.

Why not let the controller manager bind: its PV controller writes 3-4 times per claim (the volume's phase, the
claim's annotations, the claim's status) through a client limited to 20 requests/s (``--kube-api-qps``), so 5,000
claims took > 600 s to bind on this machine (h27op, session 4) and the wait grew with N. Here each claim is created
already bound, as the binder would leave it: the claim names its volume and carries ``bind-completed``, the volume's
``claimRef`` holds the claim's UID, and both statuses say ``Bound``. The PV controller's sync then finds nothing to
write (``syncBoundClaim``: "all is well"; ``syncVolume``: phase already Bound).

Why keep-alive connections: the test client (``tests/cluster/kubeapi.py``) opens one TLS connection per request;
at ~9 requests per schedule the handshakes alone cost minutes of CPU at 5,000 schedules.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.cluster.controlplane import ControlPlane

VOLUME_LABEL = "bench.dreamkeeper.io/namespace"  # the bench's PersistentVolumes (cluster-scoped): deleted after
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"  # what the binder writes on a claim it bound
WORKERS = 8  # concurrent connections: the API server, not the pool, is the limit beyond a few on 2 cores
MERGE = "application/merge-patch+json"


class SetupError(RuntimeError):
    pass


class Connections:
    """One keep-alive HTTPS connection per worker thread to the plane's API server (the admin's credentials)."""

    def __init__(self, plane: ControlPlane) -> None:
        api = plane.api
        url = urllib.parse.urlsplit(api.server)
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 443
        self.context = api._ssl
        self.token = api.token
        self.local = threading.local()
        self.requests = 0
        self._count = threading.Lock()

    def _connection(self) -> http.client.HTTPSConnection:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=120)
            self.local.conn = conn
        return conn

    def request(self, method: str, path: str, body: dict[str, Any], content_type: str = "application/json") -> Any:
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = json.dumps(body).encode()
        for attempt in (1, 2):
            conn = self._connection()
            try:
                conn.request(method, path, body=data, headers=headers)
                response = conn.getresponse()
                raw = response.read()
            except (OSError, http.client.HTTPException):
                conn.close()  # the server closed an idle keep-alive connection: one retry on a new one
                self.local.conn = None
                if attempt == 2:
                    raise
                continue
            with self._count:
                self.requests += 1
            if response.status >= 300:
                raise SetupError(f"{method} {path} -> {response.status}: {raw[:500]!r}")
            return json.loads(raw) if raw else {}
        raise AssertionError("unreachable")


def create_objects(
    plane: ControlPlane,
    namespace: str,
    schedules: str,
    count: int,
    history_job: Any,
    finished: dict[str, Any],
    jobs_per_schedule: int,
    workers: int = WORKERS,
) -> dict[str, Any]:
    """Per schedule: its claim bound to its own volume, the schedule, and ``jobs_per_schedule`` finished cycle Jobs
    of its history on the claim. Returns the setup's timings and request count."""
    from dreamkeeper.kube import GROUP, VERSION

    conns = Connections(plane)
    claims = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims"
    jobs = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    access = ["ReadWriteOnce"]
    capacity = {"storage": "1Gi"}

    def create(index: int) -> None:
        name = f"agent-{index:04d}"
        volume = f"pv-{namespace}-{name}"
        claim = conns.request(
            "POST",
            claims,
            {
                "metadata": {"name": name, "annotations": {BIND_COMPLETED: "yes"}},
                "spec": {
                    "accessModes": access,
                    "storageClassName": "",
                    "volumeName": volume,
                    "resources": {"requests": capacity},
                },
            },
        )
        ref = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": namespace, "name": name}
        conns.request(
            "POST",
            "/api/v1/persistentvolumes",
            {
                "metadata": {"name": volume, "labels": {VOLUME_LABEL: namespace}},
                "spec": {
                    "capacity": capacity,
                    "accessModes": access,
                    "persistentVolumeReclaimPolicy": "Retain",
                    "storageClassName": "",
                    "hostPath": {"path": f"/nonexistent/{volume}"},  # never mounted: no pod runs in the bench
                    "claimRef": {**ref, "uid": claim["metadata"]["uid"]},
                },
            },
        )
        conns.request("PATCH", f"/api/v1/persistentvolumes/{volume}/status", {"status": {"phase": "Bound"}}, MERGE)
        conns.request(
            "PATCH",
            f"{claims}/{name}/status",
            {"status": {"phase": "Bound", "accessModes": access, "capacity": capacity}},
            MERGE,
        )
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "DreamSchedule",
            "metadata": {"name": name},
            "spec": {"schedule": "0 3 1 1 *", "claimName": name},
        }
        owner = conns.request("POST", schedules, body)
        for job_index in range(jobs_per_schedule):
            job = conns.request("POST", jobs, history_job(name, name, owner, job_index))
            conns.request("PATCH", f"{jobs}/{job['metadata']['name']}/status", finished, MERGE)

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(create, range(count)))
    created = time.monotonic() - started
    # The controller manager may have synced a claim in the few ms between its creation and its volume's, and
    # marked it Lost; its next resync (15 s) finds the volume's claimRef holding the claim's UID and sets it Bound
    # again. So: a paged check every 5 s (not a watch of N objects: a handful of lists in all).
    deadline = time.monotonic() + 120.0
    while (bound := _count_bound(plane, claims)) != count:
        if time.monotonic() > deadline:
            raise SetupError(f"{bound} of {count} claims Bound 120 s after setup (expected every one)")
        time.sleep(5)
    settled = settle(plane)
    return {
        "seconds_create": round(created, 1),
        "seconds_settle": settled,
        "seconds": round(time.monotonic() - started, 1),
        "requests": conns.requests,
        "workers": workers,
    }


def settle(plane: ControlPlane, window: float = 5.0, quiet: int = 2, timeout: float = 180.0) -> float:
    """Wait until the control plane stops working on what the setup made: the controller manager's garbage collector
    GETs the owner of every history Job (a DreamSchedule) and its binder re-syncs the claims. Measured phases that
    began at once counted those requests as the operator's (GET dreamschedules at 20 schedules: the cluster test's
    per-schedule bound). Quiet: at most ``quiet`` requests other than watches and leases in ``window`` seconds."""
    from bench.operator_probe import request_counts

    started = time.monotonic()
    before = request_counts(plane)
    while time.monotonic() - started < timeout:
        time.sleep(window)
        after = request_counts(plane)
        busy = sum(
            after[key] - before.get(key, 0)
            for key in after
            if not key.startswith("WATCH") and "leases" not in key and "/openapi" not in key and key not in IDLE
        )
        before = after
        if busy <= quiet:
            break
    return round(time.monotonic() - started, 1)


IDLE = ("GET /api", "GET /apis")  # discovery, by the controller manager, every few seconds whatever happens


def _count_bound(plane: ControlPlane, path: str) -> int:
    bound, token = 0, None
    while True:
        page = plane.api.get(path, limit=500, **({"continue": token} if token else {}))
        bound += sum(1 for c in page["items"] if (c.get("status") or {}).get("phase") == "Bound")
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return bound
