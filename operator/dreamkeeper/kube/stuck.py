"""A cycle pod that can never start: seen in its container statuses, stopped instead of waiting for the deadline.

The operator cannot read Secrets (least privilege), so a missing or unreadable ``apiKeySecretRef`` shows only
where the kubelet reports it: the container waits in ``CreateContainerConfigError`` (``secret "llm" not found``,
``couldn't find key api-key in Secret ...``) and retries forever. Left alone, the Job sits active until
``activeDeadlineSeconds`` (an hour by default) with ``Ready=True`` and blocks every other schedule on the claim.
After a short grace (the Secret may be created a moment later) the operator stops the Job: it annotates why
(``ANNOTATION_STOPPED``, read back when the Job is counted) and cuts ``activeDeadlineSeconds`` so the Job
controller fails it and removes the pod.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from dreamkeeper.kube.objects import ContainerStatus, Pod, parse_time

# Waiting reasons that do not clear by themselves while the pod waits; everything else (ContainerCreating,
# PodInitializing, a pull back-off that may be a registry blip) is left to the deadline.
_PERMANENT = {
    "CreateContainerConfigError": "ConfigUnavailable",  # a Secret/ConfigMap or one of its keys is missing
    "InvalidImageName": "InvalidImage",
    "ErrImageNeverPull": "ImageUnavailable",  # imagePullPolicy Never and the image is not on the node
}
# Every reason a stop is reported under (Ready=False and the counted run's reason).
STUCK_REASONS = frozenset({*_PERMANENT.values(), "SecretUnavailable"})


@dataclass(frozen=True)
class Stuck:
    """Why a cycle pod cannot start: the condition/Event reason and the kubelet's words."""

    reason: str
    container: str
    message: str

    def annotation(self) -> str:
        """The value of ``ANNOTATION_STOPPED`` on the Job: ``<reason>: <message>``."""
        return f"{self.reason}: container {self.container}: {self.message}"[:1000]


def _waiting(statuses: list[ContainerStatus]) -> list[tuple[str, str, str]]:
    found = []
    for entry in statuses:
        waiting = (entry.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in _PERMANENT:
            found.append((entry.get("name", "?"), waiting["reason"], waiting.get("message", "")))
    return found


def _classify(kubelet_reason: str, message: str) -> str:
    reason = _PERMANENT[kubelet_reason]
    if reason == "ConfigUnavailable" and "secret" in message.lower():
        return "SecretUnavailable"
    return reason


def stuck_reason(pods: list[Pod], now: datetime, grace_seconds: float) -> Stuck | None:
    """The first permanent waiting reason of a pod older than ``grace_seconds``, if any."""
    for pod in pods:
        created = parse_time(pod["metadata"].get("creationTimestamp"))
        if created is None or (now - created).total_seconds() < grace_seconds:
            continue
        status = pod.get("status") or {}
        waiting = _waiting(
            list(status.get("initContainerStatuses") or []) + list(status.get("containerStatuses") or [])
        )
        if waiting:
            container, kubelet_reason, message = waiting[0]
            detail = " ".join(f"{kubelet_reason}: {message}".split())
            return Stuck(_classify(kubelet_reason, message), container, detail)
    return None
