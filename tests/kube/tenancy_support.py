"""The tenants of issue 21 on the real control plane, and what each may do acting directly.

* ``bob``: a ServiceAccount bound only to the chart's ``dreamkeeper-edit`` ClusterRole (he cannot get Secrets,
  create pods, patch Deployments or their scale, ``use`` the claim);
* ``dave``: the same, plus ``use`` on the agent's claim (the dedicated grant: cycles on it are his to run);
* ``carol``: may get and patch the agent's Deployment, and has no rights on dreamkeeper's resources at all;
* ``admin``: the cluster admin (client certificate in ``system:masters``).

``Rights.review`` asks the API server, **as the user** (SelfSubjectAccessReview with the user's own token), what
they may do directly: create pods, use the claim, get the Secret, patch the Deployment or its scale, the
admin-only ``allow-root-group`` verb. ``admitted`` is the security model of docs/operator.md written down once
more, independently of the CEL in codegen/admission.py: whether a schedule with that spec, created or edited by
that user, must be admitted. The tenancy suite asserts the API server's answer equals it, for every attack and
every way of writing it (create, JSON patch, merge patch, server-side apply), and that the answer about the rights
equals what the user gets trying the thing directly (a dry-run pod, a Secret read, a dry-run scale).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from codegen.admission import NOT_RECHECKED, ROOT_GROUP_VERB

from dreamkeeper.kube import GROUP, SCHEDULE_PLURAL, VERSION
from tests.cluster.controlplane import ControlPlane
from tests.cluster.kubeapi import KubeApi, Obj, namespaced
from tests.kube.cluster_support import ALLOWED_IMAGES, grant_edit_only, schedule_path

RBAC = "/apis/rbac.authorization.k8s.io/v1"
APPS = {"group": "apps"}
CLAIM = "agent-data"
SECRET = "db-creds"
WORKLOAD = "rockbot"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


@dataclass(frozen=True)
class Rights:
    """What a user may do directly in the namespace (the API server's own answers)."""

    create_pods: bool
    use_claim: bool
    get_secret: bool
    patch_workload: bool
    patch_scale: bool
    root_group: bool

    @classmethod
    def review(cls, api: KubeApi, ns: str) -> Rights:
        def may(verb: str, resource: str, *, group: str = "", name: str = "", subresource: str = "") -> bool:
            attributes = {"namespace": ns, "verb": verb, "group": group, "resource": resource}
            if name:
                attributes["name"] = name
            if subresource:
                attributes["subresource"] = subresource
            review = {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": attributes},
            }
            answer = api.create("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review)
            return bool(answer["status"]["allowed"])

        return cls(
            create_pods=may("create", "pods"),
            use_claim=may("use", "persistentvolumeclaims", name=CLAIM),
            get_secret=may("get", "secrets", name=SECRET),
            patch_workload=may("patch", "deployments", group="apps", name=WORKLOAD),
            patch_scale=may("patch", "deployments", group="apps", name=WORKLOAD, subresource="scale"),
            root_group=may(ROOT_GROUP_VERB, SCHEDULE_PLURAL, group=GROUP),
        )


@dataclass
class User:
    name: str
    api: KubeApi
    rights: Rights


def _image_allowed(image: str) -> bool:
    return any(image == p or (p[-1] in "/:@" and image.startswith(p)) for p in ALLOWED_IMAGES)


def _coordination(spec: Obj) -> str:
    return str((spec.get("agent") or {}).get("coordination") or "Stop")


def only_scheduling_changed(old: Obj, new: Obj) -> bool:
    keys = set(old) | set(new)
    return all(old.get(k) == new.get(k) for k in keys if k not in NOT_RECHECKED)


def admitted(old: Obj | None, new: Obj, r: Rights) -> bool:
    """The security model: may a user with rights ``r`` turn ``old`` (None: create) into ``new``?"""
    if old is not None and only_scheduling_changed(old, new):
        starts = new.get("runNowToken") not in (None, old.get("runNowToken")) or (
            bool(old.get("suspend")) and not new.get("suspend")
        )
        if not starts or "agent" not in new or _coordination(new) == "None":
            return True
        return r.patch_workload or (_coordination(new) == "Stop" and r.patch_scale)
    ok = r.create_pods or r.use_claim
    if ((new.get("proposer") or {}).get("apiKeySecretRef")) is not None:
        ok = ok and r.get_secret
    if "image" in new:
        ok = ok and (r.create_pods or _image_allowed(new["image"]))
    if "agent" in new:
        ok = ok and r.patch_workload
    if (new.get("securityContext") or {}).get("allowRootGroup"):
        ok = ok and r.root_group
    return ok


# ---- the world -----------------------------------------------------------------------------------------------------


def _role(cluster: ControlPlane, ns: str, user: str, rules: list[Obj]) -> None:
    cluster.api.create(f"{RBAC}/namespaces/{ns}/roles", {"metadata": {"name": f"{user}-extra"}, "rules": rules})
    cluster.api.create(
        f"{RBAC}/namespaces/{ns}/rolebindings",
        {
            "metadata": {"name": f"{user}-extra"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"{user}-extra"},
            "subjects": [{"kind": "ServiceAccount", "name": user, "namespace": ns}],
        },
    )


def _service_account(cluster: ControlPlane, ns: str, user: str) -> KubeApi:
    cluster.api.create(f"/api/v1/namespaces/{ns}/serviceaccounts", {"metadata": {"name": user}})
    return KubeApi(cluster.api_url, cluster.ca_file, token=cluster.service_account_token(ns, user))


def tenants(cluster: ControlPlane, ns: str) -> dict[str, User]:
    """bob, dave, carol and admin in ``ns`` (see the module docstring); returns once RBAC answers as granted."""
    bob = grant_edit_only(cluster, ns, "bob")
    dave = grant_edit_only(cluster, ns, "dave")
    _role(cluster, ns, "dave", [{"apiGroups": [""], "resources": ["persistentvolumeclaims"],
                                 "resourceNames": [CLAIM], "verbs": ["use"]}])  # fmt: skip
    carol_api = _service_account(cluster, ns, "carol")
    _role(cluster, ns, "carol", [{"apiGroups": ["apps"], "resources": ["deployments"],
                                  "verbs": ["get", "list", "watch", "patch"]}])  # fmt: skip
    apis = {
        "bob": KubeApi(cluster.api_url, cluster.ca_file, token=bob["token"]),
        "dave": KubeApi(cluster.api_url, cluster.ca_file, token=dave["token"]),
        "carol": carol_api,
        "admin": cluster.api,
    }
    wanted = {
        "bob": Rights(False, False, False, False, False, False),
        "dave": Rights(False, True, False, False, False, False),
        "carol": Rights(False, False, False, True, False, False),
        "admin": Rights(True, True, True, True, True, True),
    }
    users: dict[str, User] = {}

    def granted() -> bool:  # RBAC is eventually consistent in the authorizer's cache
        for name, api in apis.items():
            users[name] = User(name, api, Rights.review(api, ns))
        return all(users[name].rights == rights for name, rights in wanted.items())

    cluster.wait_for("the tenants' rights in effect", granted, timeout=60)
    return users


def workload(cluster: ControlPlane, ns: str, replicas: int = 0) -> None:
    """The agent's Deployment (no pods needed for admission: it only has to exist for a dry-run scale)."""
    labels = {"app": WORKLOAD}
    cluster.api.create(
        namespaced(ns, "deployments", **APPS),
        {
            "metadata": {"name": WORKLOAD, "labels": labels},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "agent", "image": "localhost/agent:test"}]},
                },
            },
        },
    )


def schedule_body(name: str, spec: Obj) -> Obj:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DreamSchedule", "metadata": {"name": name}, "spec": spec}


# ---- writing a change four ways -------------------------------------------------------------------------------------


def merge_patch_for(old: Obj, new: Obj) -> Obj:
    """The RFC 7386 merge patch turning ``old`` into ``new`` (null removes)."""
    patch: Obj = {}
    for key in set(old) | set(new):
        if key not in new:
            patch[key] = None
        elif key not in old or not (isinstance(old[key], dict) and isinstance(new[key], dict)):
            if old.get(key) != new[key]:
                patch[key] = copy.deepcopy(new[key])
        elif old[key] != new[key]:
            patch[key] = merge_patch_for(old[key], new[key])
    return patch


def json_patch_for(old: Obj, new: Obj) -> list[Obj]:
    """RFC 6902 operations on the spec's top-level fields."""
    ops: list[Obj] = []
    for key in sorted(set(old) | set(new)):
        if key not in new:
            ops.append({"op": "remove", "path": f"/spec/{key}"})
        elif key not in old:
            ops.append({"op": "add", "path": f"/spec/{key}", "value": new[key]})
        elif old[key] != new[key]:
            ops.append({"op": "replace", "path": f"/spec/{key}", "value": new[key]})
    return ops


def _applied(old: Any, applied: Any) -> Any:
    """What server-side apply makes of ``applied`` (force) over fields another manager owns: maps merge, nothing
    another manager set is removed, lists are replaced (every list of the schema is atomic)."""
    if isinstance(old, dict) and isinstance(applied, dict):
        return {k: _applied(old.get(k), applied[k]) if k in applied else old[k] for k in set(old) | set(applied)}
    return copy.deepcopy(applied)


Method = str  # "create" | "json-patch" | "merge-patch" | "apply"
METHODS: tuple[Method, ...] = ("create", "json-patch", "merge-patch", "apply")


def write(api: KubeApi, ns: str, name: str, method: Method, old: Obj, new: Obj, manager: str) -> tuple[Obj, Obj]:
    """Send the change as ``method``; returns (the spec the server should end up with, its answer's spec).
    Raises the API server's ApiError when it refuses."""
    path = schedule_path(ns, name)
    if method == "create":
        answer = api.create(schedule_path(ns), schedule_body(name, new))
        return new, answer["spec"]
    if method == "json-patch":
        ops: Any = json_patch_for(old, new)
        answer = api.request("PATCH", path, ops, content_type=JSON_PATCH)
        return new, answer["spec"]
    if method == "merge-patch":
        answer = api.patch(path, {"spec": merge_patch_for(old, new)})
        return new, answer["spec"]
    config = schedule_body(name, new)
    params = {"fieldManager": manager, "force": "true"}
    answer = api.request("PATCH", path, config, params=params, content_type=APPLY_PATCH)
    return _applied(old, new), answer["spec"]


@dataclass(frozen=True)
class Attack:
    """One thing a tenant tried, as the spec it makes of a schedule's spec."""

    name: str
    change: Callable[[Obj, int], Obj]  # (old spec, a serial for unique values) -> new spec
    invalid: bool = False  # the CRD refuses it for everybody (422): the API server would refuse its Job too
    update_only: bool = False  # meaningless on create (a runNowToken)


__all__ = [
    "ALLOWED_IMAGES",
    "CLAIM",
    "METHODS",
    "SECRET",
    "WORKLOAD",
    "Attack",
    "Rights",
    "User",
    "admitted",
    "schedule_body",
    "tenants",
    "workload",
    "write",
]
