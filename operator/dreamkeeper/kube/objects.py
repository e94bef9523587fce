"""The Kubernetes objects the operator reads, typed: the fields it looks at, over the API server's raw JSON.

The operator handles raw JSON (``api.py``: much faster than the client's models for hundreds of schedules) but
reads only a few fields of each object. These TypedDicts name those fields, so a misspelt key or a wrong nesting
is a type error rather than a silent ``None``. They describe, they do not validate: whatever the API server may
omit is optional (``total=False``) and read with ``.get``; ``metadata`` is always present on a stored object.
A custom resource's ``spec`` and ``status`` stay ``Body``: the pydantic models in ``models.py`` are their types.
``Body`` is also what the operator builds and sends (Jobs, ConfigMaps, Events, patches).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Required, TypedDict

Body = dict[str, Any]


class OwnerReference(TypedDict, total=False):
    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool
    blockOwnerDeletion: bool


class ObjectMeta(TypedDict, total=False):
    name: str
    namespace: str
    uid: str
    resourceVersion: str
    generation: int
    creationTimestamp: str
    deletionTimestamp: str
    labels: dict[str, str]
    annotations: dict[str, str]
    ownerReferences: list[OwnerReference]
    finalizers: list[str]


class KubeObject(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: Required[ObjectMeta]


# ---- batch/v1 Job -------------------------------------------------------------------------------------------------


class JobCondition(TypedDict, total=False):
    type: str  # Complete, Failed, SuccessCriteriaMet, FailureTarget, Suspended
    status: str  # "True", "False", "Unknown"
    reason: str  # e.g. DeadlineExceeded, BackoffLimitExceeded
    message: str
    lastTransitionTime: str


class JobStatus(TypedDict, total=False):
    conditions: list[JobCondition]
    startTime: str
    completionTime: str
    active: int
    ready: int  # pods with the Ready condition (their containers run)


class Job(KubeObject, total=False):
    spec: Body
    status: JobStatus


# ---- core/v1 Pod --------------------------------------------------------------------------------------------------


class ContainerStateTerminated(TypedDict, total=False):
    exitCode: int
    reason: str
    message: str  # the termination message (the cycle's JSON summary), or the log tail on error
    startedAt: str
    finishedAt: str


class ContainerStateWaiting(TypedDict, total=False):
    reason: str  # ContainerCreating, PodInitializing, CreateContainerConfigError, ImagePullBackOff, ...
    message: str


class ContainerState(TypedDict, total=False):
    terminated: ContainerStateTerminated
    running: Body
    waiting: ContainerStateWaiting


class ContainerStatus(TypedDict, total=False):
    name: str
    state: ContainerState
    lastState: ContainerState  # the previous run, when the container was restarted


class PodStatus(TypedDict, total=False):
    phase: str
    reason: str
    message: str
    containerStatuses: list[ContainerStatus]
    initContainerStatuses: list[ContainerStatus]


class PersistentVolumeClaimVolumeSource(TypedDict, total=False):
    claimName: str
    readOnly: bool


class Volume(TypedDict, total=False):
    name: str
    persistentVolumeClaim: PersistentVolumeClaimVolumeSource


class SecurityContext(TypedDict, total=False):
    runAsUser: int
    runAsGroup: int
    fsGroup: int  # pod level only


class Container(TypedDict, total=False):
    name: str
    securityContext: SecurityContext


class PodSpec(TypedDict, total=False):
    nodeName: str
    volumes: list[Volume]
    tolerations: list[Body]  # copied as they are into the cycle Job
    securityContext: SecurityContext
    containers: list[Container]


class Pod(KubeObject, total=False):
    spec: PodSpec
    status: PodStatus


# ---- apps/v1 Deployment and StatefulSet ---------------------------------------------------------------------------


class PodTemplate(TypedDict, total=False):
    metadata: ObjectMeta  # labels and annotations only
    spec: PodSpec


class WorkloadSpec(TypedDict, total=False):
    replicas: int  # absent means 1 (the API server defaults it)
    template: PodTemplate


class Workload(KubeObject, total=False):
    """A Deployment or a StatefulSet: the agent's own workload (its status is never read)."""

    spec: WorkloadSpec


# ---- the rest -----------------------------------------------------------------------------------------------------


class PersistentVolumeClaimSpec(TypedDict, total=False):
    accessModes: list[str]


class PersistentVolumeClaim(KubeObject, total=False):
    spec: PersistentVolumeClaimSpec


class ConfigMap(KubeObject, total=False):
    data: dict[str, str]


class DreamSchedule(KubeObject, total=False):
    spec: Body  # DreamScheduleSpec
    status: Body  # DreamScheduleStatus


class ObjectReference(TypedDict, total=False):
    kind: str
    name: str
    uid: str


class Event(KubeObject, total=False):
    """A core/v1 Event (read only for what the Job controller says about a cycle Job's pods)."""

    involvedObject: ObjectReference
    reason: str
    message: str
    type: str
    lastTimestamp: str
    eventTime: str


class MemoryVocabularyStatusBody(TypedDict, total=False):
    sha256: str
    configMapName: str
    conditions: list[Body]


class MemoryVocabulary(KubeObject, total=False):
    spec: Body  # MemoryVocabularySpec
    status: MemoryVocabularyStatusBody


# ---- reading them -------------------------------------------------------------------------------------------------


def labels_of(obj: KubeObject) -> dict[str, str]:
    return obj["metadata"].get("labels") or {}


def annotations_of(obj: KubeObject) -> dict[str, str]:
    return obj["metadata"].get("annotations") or {}


def owned_by(obj: KubeObject, uid: str) -> bool:
    return any(ref.get("uid") == uid for ref in obj["metadata"].get("ownerReferences") or [])


def creation_order(obj: KubeObject) -> str:
    """Sort key, oldest first: RFC 3339 UTC timestamps of one format sort as text."""
    return str(obj["metadata"].get("creationTimestamp") or "")


def parse_time(value: object) -> datetime | None:
    """An RFC 3339 timestamp as Kubernetes writes it (``...Z``), or None when absent or unreadable.

    Lenient on purpose: a hand-edited annotation or a garbled termination message must not stop counting;
    the caller falls back to the next source (e.g. the Job's creation time). A zone-less value is taken as UTC.
    """
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
