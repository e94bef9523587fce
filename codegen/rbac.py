"""The operator's least-privilege RBAC rules: one source for the chart, the raw manifests and the tests.

Every verb here is used by the operator (see the comment on each rule); the cluster test runs the operator as a
ServiceAccount bound to exactly these rules. kopf's namespace and CRD scanning is switched off (``runner.py``),
so no cluster-wide discovery permissions are needed. No Secrets: the operator never reads one. What the *Jobs* it
creates can reach is another matter (docs/operator.md, "Security model"): the admission policy
(``admission.py``) makes sure a schedule's author could reach it too.
"""

from __future__ import annotations

from typing import Any

from dreamkeeper.kube import GROUP, SCHEDULE_PLURAL, VOCABULARY_PLURAL


def operator_rules() -> list[dict[str, Any]]:
    return [
        {
            # kopf lists and watches the resources and patches metadata (finalizer, handler progress annotations).
            "apiGroups": [GROUP],
            "resources": [SCHEDULE_PLURAL, VOCABULARY_PLURAL],
            "verbs": ["get", "list", "watch", "patch"],
        },
        {
            # Status is written separately (the CRDs declare the status subresource).
            "apiGroups": [GROUP],
            "resources": [f"{SCHEDULE_PLURAL}/status", f"{VOCABULARY_PLURAL}/status"],
            "verbs": ["get", "patch"],
        },
        {
            # ownerReferences with blockOwnerDeletion need this where OwnerReferencesPermissionEnforcement is on.
            "apiGroups": [GROUP],
            "resources": [f"{SCHEDULE_PLURAL}/finalizers", f"{VOCABULARY_PLURAL}/finalizers"],
            "verbs": ["update"],
        },
        {
            # Cycle Jobs: created per slot, polled, marked counted, pruned by history limits.
            "apiGroups": ["batch"],
            "resources": ["jobs"],
            "verbs": ["create", "get", "list", "patch", "delete"],
        },
        {
            # The agent pod mounting the claim (node pinning) and the cycle pods' termination messages.
            "apiGroups": [""],
            "resources": ["pods"],
            "verbs": ["get", "list"],
        },
        {
            # Access modes (ReadWriteOncePod fails fast) and existence of the claim; watched so a schedule waiting
            # for its claim (ClaimNotFound) re-checks the moment it appears.
            "apiGroups": [""],
            "resources": ["persistentvolumeclaims"],
            "verbs": ["get", "list", "watch"],
        },
        {
            # The rendered MemoryVocabulary the init container seeds from.
            "apiGroups": [""],
            "resources": ["configmaps"],
            "verbs": ["get", "create", "patch"],
        },
        {
            # spec.agent: read the agent's workload (replicas, pod template identity), write and remove the Stop
            # record annotation, and RestartAfter's pod-template restartedAt (what `kubectl rollout restart` does).
            "apiGroups": ["apps"],
            "resources": ["deployments", "statefulsets"],
            "verbs": ["get", "patch"],
        },
        {
            # spec.agent Stop: replicas are changed only through the scale subresource (to 0, then back).
            "apiGroups": ["apps"],
            "resources": ["deployments/scale", "statefulsets/scale"],
            "verbs": ["patch"],
        },
        {
            # Events for skipped slots, safeguards that fired and failed cycles (kopf posts core/v1 Events); listed
            # (by involvedObject.uid) only for the Job controller's FailedCreate on a cycle Job whose pod the API
            # server refuses (a quota, a LimitRange): the only place that says why (kube/refusals.py).
            "apiGroups": [""],
            "resources": ["events"],
            "verbs": ["create", "list"],
        },
    ]


def aggregate_rules(*, edit: bool) -> list[dict[str, Any]]:
    """Rules for the aggregate-to-edit / aggregate-to-view ClusterRoles, so users can manage the CRs."""
    verbs = ["get", "list", "watch", "create", "update", "patch", "delete"] if edit else ["get", "list", "watch"]
    rules: list[dict[str, Any]] = [
        {"apiGroups": [GROUP], "resources": [SCHEDULE_PLURAL, VOCABULARY_PLURAL], "verbs": verbs},
    ]
    if not edit:
        rules.append(
            {
                "apiGroups": [GROUP],
                "resources": [f"{SCHEDULE_PLURAL}/status", f"{VOCABULARY_PLURAL}/status"],
                "verbs": ["get"],
            }
        )
    return rules


def operator_role(name: str, namespace: str | None) -> dict[str, Any]:
    """A Role (namespace given) or ClusterRole with the operator's rules."""
    kind = "Role" if namespace else "ClusterRole"
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": metadata, "rules": operator_rules()}


def operator_binding(
    name: str, role: dict[str, Any], service_account: str, sa_namespace: str, namespace: str | None = None
) -> dict[str, Any]:
    """Bind ``role`` to the operator's ServiceAccount (RoleBinding in ``namespace``, else ClusterRoleBinding)."""
    kind = "RoleBinding" if namespace else "ClusterRoleBinding"
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": metadata,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role["kind"], "name": role["metadata"]["name"]},
        "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": sa_namespace}],
    }
