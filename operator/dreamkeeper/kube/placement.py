"""Where a cycle may run: next to the pod that mounts the agent's claim.

A ReadWriteOnce volume is attached to one node at a time, so the cycle's pod is pinned, when its Job is
created, to the node of the pod currently using the claim, with that pod's tolerations (the k8up / VolSync
practice). A static podAffinity would leave the Job Pending whenever the agent is down; with no agent pod there
is no constraint and the scheduler follows the volume's own node affinity. ReadWriteOncePod allows no second
pod at all, so such a claim is refused up front instead of leaving a Pending pod.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dreamkeeper.kube import LABEL_MANAGED_BY, MANAGED_BY
from dreamkeeper.kube.objects import Body, PersistentVolumeClaim, Pod, PodSpec, creation_order, labels_of


class ClaimUnusableError(ValueError):
    """The claim cannot be shared with a cycle pod; ``reason`` is the condition reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Placement:
    node_name: str | None = None
    tolerations: list[Body] = field(default_factory=list)
    agent_pod: str | None = None
    run_as_user: int | None = None
    run_as_group: int | None = None
    fs_group: int | None = None

    @property
    def description(self) -> str:
        if self.node_name is None:
            if self.agent_pod is not None:
                return f"unpinned ({self.agent_pod} is stopped)"
            return "unpinned (no running pod mounts the claim)"
        return f"node {self.node_name} (pod {self.agent_pod})"


def check_claim(pvc: PersistentVolumeClaim) -> None:
    if pvc["metadata"].get("deletionTimestamp"):
        # Kept only by its protection finalizer until no pod uses it; a new pod naming it never starts (the
        # scheduler refuses a claim being deleted), so a cycle Job would sit Pending until its deadline.
        name = pvc["metadata"].get("name", "?")
        raise ClaimUnusableError(
            "ClaimTerminating",
            f"PersistentVolumeClaim {name} is being deleted (it stays until no pod uses it); no cycle starts on it",
        )
    modes = (pvc.get("spec") or {}).get("accessModes") or []
    if "ReadWriteOncePod" in modes:
        name = pvc["metadata"].get("name", "?")
        raise ClaimUnusableError(
            "ReadWriteOncePodClaim",
            f"PersistentVolumeClaim {name} is ReadWriteOncePod: no second pod may mount it while the agent runs, "
            "so a cycle can never start. Use ReadWriteOnce (the cycle is pinned to the agent's node).",
        )


def mounts_claim(pod: Pod, claim_name: str) -> bool:
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        source = volume.get("persistentVolumeClaim")
        if source and source.get("claimName") == claim_name:
            return True
    return False


def _is_cycle_pod(pod: Pod) -> bool:
    return labels_of(pod).get(LABEL_MANAGED_BY) == MANAGED_BY


def _phase_rank(pod: Pod) -> int:
    return {"Running": 0, "Pending": 1}.get(str((pod.get("status") or {}).get("phase")), 9)


def agent_pod(pods: list[Pod], claim_name: str) -> Pod | None:
    """The pod (not one of ours) that uses the claim and is placed on a node: Running first, then Pending."""
    candidates = [
        p
        for p in pods
        if mounts_claim(p, claim_name)
        and not _is_cycle_pod(p)
        and (p.get("spec") or {}).get("nodeName")
        and (p.get("status") or {}).get("phase") in ("Running", "Pending")
        and not p["metadata"].get("deletionTimestamp")
    ]
    # Running before Pending; newest first among equals (a rolling replacement's new pod is where the volume goes).
    candidates.sort(key=creation_order, reverse=True)
    candidates.sort(key=_phase_rank)
    return candidates[0] if candidates else None


def _identity(pod: Pod) -> tuple[int | None, int | None, int | None]:
    spec = pod.get("spec") or {}
    pod_sc = spec.get("securityContext") or {}
    user, group, fs_group = pod_sc.get("runAsUser"), pod_sc.get("runAsGroup"), pod_sc.get("fsGroup")
    containers = spec.get("containers") or []
    if containers:
        first = containers[0].get("securityContext") or {}
        user = first.get("runAsUser", user)
        group = first.get("runAsGroup", group)
    if user == 0:
        user = None  # a root agent cannot be copied: the cycle pod must be non-root
    return user, group, fs_group


def placement_for(pods: list[Pod], claim_name: str) -> Placement:
    pod = agent_pod(pods, claim_name)
    if pod is None:
        return Placement()
    user, group, fs_group = _identity(pod)
    return Placement(
        node_name=pod["spec"]["nodeName"],
        tolerations=list(pod["spec"].get("tolerations") or []),
        agent_pod=pod["metadata"]["name"],
        run_as_user=user,
        run_as_group=group,
        fs_group=fs_group,
    )


def unpinned_placement(template: PodSpec | None, workload: str) -> Placement:
    """Stop: the agent is down, so nothing pins the cycle; its identity and tolerations come from the workload's
    pod template (the pods that would mount the claim), and the scheduler follows the volume's node affinity."""
    if not template:
        return Placement()
    user, group, fs_group = _identity({"metadata": {}, "spec": template})
    return Placement(
        tolerations=list(template.get("tolerations") or []),
        agent_pod=workload,
        run_as_user=user,
        run_as_group=group,
        fs_group=fs_group,
    )


def selector_string(selector: Body | None) -> str | None:
    """A LabelSelector (wire form) as a label-selector query string, for a server-side filtered list."""
    if not selector:
        return None
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        if operator == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif operator == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif operator == "Exists":
            parts.append(key)
        elif operator == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts) or None
