"""The few Kubernetes calls the operator makes, on plain dicts.

``ClusterApi`` is the seam the reconciler is written against (unit tests use an in-memory fake); ``KubeApi``
implements it with the official client's transport and authentication (kubeconfig, in-cluster, token refresh)
but without its typed models: raw JSON is much faster to handle for hundreds of schedules. What it reads is
typed by the fields the operator looks at (``objects.py``); the JSON is declared to have that shape here, once.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
from datetime import UTC, datetime
from typing import Any, Protocol, cast
from urllib.parse import quote

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from dreamkeeper.kube import GROUP, SCHEDULE_PLURAL, VERSION, VOCABULARY_PLURAL
from dreamkeeper.kube.objects import (
    Body,
    ConfigMap,
    DreamSchedule,
    Event,
    Job,
    KubeObject,
    MemoryVocabulary,
    PersistentVolumeClaim,
    Pod,
    Workload,
)

log = logging.getLogger(__name__)
MERGE_PATCH = "application/merge-patch+json"
WORKLOAD_PLURALS = {"Deployment": "deployments", "StatefulSet": "statefulsets"}
EVENT_SOURCE = "dreamkeeper-operator"


class ApiError(RuntimeError):
    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"HTTP {status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


class NotFoundError(ApiError):
    pass


class ConflictError(ApiError):
    """409: AlreadyExists on create, or a resourceVersion / uid precondition that failed."""

    @property
    def already_exists(self) -> bool:
        return self.reason == "AlreadyExists"


class ClusterApi(Protocol):
    def get_schedule(self, namespace: str, name: str) -> DreamSchedule | None: ...

    def patch_schedule_status(self, namespace: str, name: str, patch: Body) -> Body: ...

    def patch_schedule(self, namespace: str, name: str, patch: Body) -> Body: ...

    def get_vocabulary(self, namespace: str, name: str) -> MemoryVocabulary | None: ...

    def patch_vocabulary_status(self, namespace: str, name: str, patch: Body) -> Body: ...

    def get_pvc(self, namespace: str, name: str) -> PersistentVolumeClaim | None: ...

    def list_pods(self, namespace: str, label_selector: str | None = None) -> list[Pod]: ...

    def list_jobs(self, namespace: str, label_selector: str) -> list[Job]: ...

    def get_job(self, namespace: str, name: str) -> Job | None: ...

    def create_job(self, namespace: str, body: Body) -> Job: ...

    def patch_job(self, namespace: str, name: str, patch: Body) -> Job: ...

    def delete_job(self, namespace: str, name: str, uid: str) -> None: ...

    def get_config_map(self, namespace: str, name: str) -> ConfigMap | None: ...

    def create_config_map(self, namespace: str, body: Body) -> Body: ...

    def patch_config_map(self, namespace: str, name: str, patch: Body) -> Body: ...

    def create_event(self, namespace: str, body: Body) -> Body: ...

    def list_events(self, namespace: str, field_selector: str) -> list[Event]: ...

    def get_workload(self, namespace: str, kind: str, name: str) -> Workload | None: ...

    def patch_workload(self, namespace: str, kind: str, name: str, patch: Body) -> Workload: ...

    def scale_workload(self, namespace: str, kind: str, name: str, replicas: int) -> Body: ...


def _api_client(kubeconfig: str | None = None) -> k8s.ApiClient:
    configuration = k8s.Configuration()
    if kubeconfig:
        k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)  # type: ignore[no-untyped-call]
    else:
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except k8s_config.ConfigException:
            k8s_config.load_kube_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    return k8s.ApiClient(configuration)


class KubeApi:
    """``ClusterApi`` over HTTPS. Thread-safe (the reconciler runs in kopf's executor threads)."""

    def __init__(self, api_client: k8s.ApiClient | None = None, *, timeout: float = 30.0, pool_size: int = 16) -> None:
        if api_client is None:
            api_client = _api_client()
            api_client.configuration.connection_pool_maxsize = pool_size
        self.client = api_client
        self.timeout = timeout

    @classmethod
    def from_kubeconfig(cls, path: str | None) -> KubeApi:
        return cls(_api_client(path))

    # ---- transport ----------------------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Any:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        _, url, header_params, serialized, _ = self.client.param_serialize(
            method,
            path,
            query_params=list((query or {}).items()) or None,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        response = self.client.call_api(
            method, url, header_params=header_params, body=serialized, _request_timeout=self.timeout
        )
        raw = response.read()  # type: ignore[no-untyped-call]
        text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else str(raw or "")
        if response.status >= 400:
            try:
                status = json.loads(text)
                reason, message = str(status.get("reason", response.reason)), str(status.get("message", text))
            except ValueError:
                reason, message = str(response.reason), text[:500]
            error_type = {404: NotFoundError, 409: ConflictError}.get(response.status, ApiError)
            raise error_type(response.status, reason, message)
        return json.loads(text) if text else None

    def _get_or_none(self, path: str) -> Any:
        try:
            return self.request("GET", path)
        except NotFoundError:
            return None

    def _items(self, path: str, query: dict[str, str] | None) -> Any:
        return self.request("GET", path, query=query)["items"]

    # ---- custom resources -----------------------------------------------------------------------------------

    @staticmethod
    def _cr(namespace: str, plural: str, name: str | None = None) -> str:
        path = f"/apis/{GROUP}/{VERSION}/namespaces/{quote(namespace)}/{plural}"
        return f"{path}/{quote(name)}" if name else path

    def get_schedule(self, namespace: str, name: str) -> DreamSchedule | None:
        return cast("DreamSchedule | None", self._get_or_none(self._cr(namespace, SCHEDULE_PLURAL, name)))

    def patch_schedule_status(self, namespace: str, name: str, patch: Body) -> Body:
        path = self._cr(namespace, SCHEDULE_PLURAL, name) + "/status"
        return dict(self.request("PATCH", path, body=patch, content_type=MERGE_PATCH))

    def patch_schedule(self, namespace: str, name: str, patch: Body) -> Body:
        """Metadata only (the finalizer of a Stop): spec belongs to the user, status to the subresource."""
        path = self._cr(namespace, SCHEDULE_PLURAL, name)
        return dict(self.request("PATCH", path, body=patch, content_type=MERGE_PATCH))

    def get_vocabulary(self, namespace: str, name: str) -> MemoryVocabulary | None:
        return cast("MemoryVocabulary | None", self._get_or_none(self._cr(namespace, VOCABULARY_PLURAL, name)))

    def patch_vocabulary_status(self, namespace: str, name: str, patch: Body) -> Body:
        path = self._cr(namespace, VOCABULARY_PLURAL, name) + "/status"
        return dict(self.request("PATCH", path, body=patch, content_type=MERGE_PATCH))

    # ---- core and batch -------------------------------------------------------------------------------------

    def get_pvc(self, namespace: str, name: str) -> PersistentVolumeClaim | None:
        path = f"/api/v1/namespaces/{quote(namespace)}/persistentvolumeclaims/{quote(name)}"
        return cast("PersistentVolumeClaim | None", self._get_or_none(path))

    def list_pods(self, namespace: str, label_selector: str | None = None) -> list[Pod]:
        query = {"labelSelector": label_selector} if label_selector else None
        return cast("list[Pod]", self._items(f"/api/v1/namespaces/{quote(namespace)}/pods", query))

    def list_jobs(self, namespace: str, label_selector: str) -> list[Job]:
        path = f"/apis/batch/v1/namespaces/{quote(namespace)}/jobs"
        return cast("list[Job]", self._items(path, {"labelSelector": label_selector}))

    def get_job(self, namespace: str, name: str) -> Job | None:
        return cast("Job | None", self._get_or_none(f"/apis/batch/v1/namespaces/{quote(namespace)}/jobs/{quote(name)}"))

    def create_job(self, namespace: str, body: Body) -> Job:
        return cast(Job, self.request("POST", f"/apis/batch/v1/namespaces/{quote(namespace)}/jobs", body=body))

    def patch_job(self, namespace: str, name: str, patch: Body) -> Job:
        path = f"/apis/batch/v1/namespaces/{quote(namespace)}/jobs/{quote(name)}"
        return cast(Job, self.request("PATCH", path, body=patch, content_type=MERGE_PATCH))

    def delete_job(self, namespace: str, name: str, uid: str) -> None:
        body = {"propagationPolicy": "Background", "preconditions": {"uid": uid}}
        with contextlib.suppress(NotFoundError):
            self.request("DELETE", f"/apis/batch/v1/namespaces/{quote(namespace)}/jobs/{quote(name)}", body=body)

    def get_config_map(self, namespace: str, name: str) -> ConfigMap | None:
        return cast(
            "ConfigMap | None", self._get_or_none(f"/api/v1/namespaces/{quote(namespace)}/configmaps/{quote(name)}")
        )

    def create_config_map(self, namespace: str, body: Body) -> Body:
        return dict(self.request("POST", f"/api/v1/namespaces/{quote(namespace)}/configmaps", body=body))

    def patch_config_map(self, namespace: str, name: str, patch: Body) -> Body:
        path = f"/api/v1/namespaces/{quote(namespace)}/configmaps/{quote(name)}"
        return dict(self.request("PATCH", path, body=patch, content_type=MERGE_PATCH))

    def create_event(self, namespace: str, body: Body) -> Body:
        return dict(self.request("POST", f"/api/v1/namespaces/{quote(namespace)}/events", body=body))

    def list_events(self, namespace: str, field_selector: str) -> list[Event]:
        path = f"/api/v1/namespaces/{quote(namespace)}/events"
        return cast("list[Event]", self._items(path, {"fieldSelector": field_selector}))

    # ---- the agent's workload (apps/v1) ---------------------------------------------------------------------

    @staticmethod
    def _workload(namespace: str, kind: str, name: str) -> str:
        return f"/apis/apps/v1/namespaces/{quote(namespace)}/{WORKLOAD_PLURALS[kind]}/{quote(name)}"

    def get_workload(self, namespace: str, kind: str, name: str) -> Workload | None:
        return cast("Workload | None", self._get_or_none(self._workload(namespace, kind, name)))

    def patch_workload(self, namespace: str, kind: str, name: str, patch: Body) -> Workload:
        path = self._workload(namespace, kind, name)
        return cast(Workload, self.request("PATCH", path, body=patch, content_type=MERGE_PATCH))

    def scale_workload(self, namespace: str, kind: str, name: str, replicas: int) -> Body:
        """Set the replicas through the ``scale`` subresource (what `kubectl scale` and autoscalers use)."""
        path = self._workload(namespace, kind, name) + "/scale"
        body = {"spec": {"replicas": replicas}}
        return dict(self.request("PATCH", path, body=body, content_type=MERGE_PATCH))


def status_patch(new_status: Body, old_status: Body, resource_version: str | None) -> Body:
    """A merge patch replacing ``old_status`` with ``new_status``, only if the object is still at
    ``resource_version`` (the API server answers 409 otherwise)."""
    status = dict(new_status)
    _null_removed(status, old_status)
    return {"metadata": {"resourceVersion": resource_version}, "status": status}


def _null_removed(new: Body, old: Body) -> None:
    """A merge patch keeps map keys it does not mention: null the ones that were cleared (e.g. activeJob),
    recursively through maps (lists are replaced whole by a merge patch). kopf's own key is left alone."""
    for key, old_value in old.items():
        if key == "kopf":
            continue
        if key not in new:
            new[key] = None
        elif isinstance(old_value, dict) and isinstance(new[key], dict):
            _null_removed(new[key], old_value)


def event_body(involved: KubeObject, event_type: str, reason: str, message: str, now: datetime | None = None) -> Body:
    """A core/v1 Event about ``involved`` (a CR body), the shape kubectl describe shows."""
    meta = involved.get("metadata") or {}
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{meta.get('name', 'x')}.{secrets.token_hex(8)}", "namespace": meta.get("namespace")},
        "involvedObject": {
            "apiVersion": involved.get("apiVersion"),
            "kind": involved.get("kind"),
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "type": event_type,
        "reason": reason,
        "message": message[:1024],
        "source": {"component": EVENT_SOURCE},
        "reportingComponent": EVENT_SOURCE,
        "reportingInstance": EVENT_SOURCE,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
