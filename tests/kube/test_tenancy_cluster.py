"""Issue 21 on the real control plane: every attack of the trial, as every tenant, written every way.

Each attack below is a change a tenant made to a schedule (tests/kube/tenancy_support.py has the tenants and the
security model as an oracle). For every attack, every user (bob: dreamkeeper-edit only; dave: edit and `use` on
the claim; admin) and every way to write it (create, JSON patch, merge patch, server-side apply), on two schedules
an admin created (``guarded``: a Secret and spec.agent Stop, as in the trial; ``plain``: neither), the API
server's answer must be the one the same user gets acting directly with their own rights: admitted exactly when
they could reach what the cycle would reach (the claim, the Secret, the image, the workload), and 422 for
everybody when the API server would refuse the cycle's Job anyway. Before issue 21 an edit re-ran a check only
when the field it names changed: bob's exfiltration, safeguards, resources and token edits were all admitted.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.cluster.fixtures import KubeCluster
from tests.cluster.kubeapi import ApiError, KubeApi, Obj, namespaced
from tests.kube.cluster_support import JOB_IMAGE, schedule_path, unbound_claim
from tests.kube.tenancy_support import (
    APPS,
    CLAIM,
    METHODS,
    SECRET,
    WORKLOAD,
    Attack,
    User,
    admitted,
    schedule_body,
    tenants,
    workload,
    write,
)

pytestmark = pytest.mark.cluster

KEYED = {
    "type": "openai",
    "model": "gpt-x",
    "baseURL": "https://llm.example/v1",
    "apiKeySecretRef": {"name": SECRET, "key": "password"},
}
BASES: dict[str, Obj] = {
    # The trial's admin schedule: a Secret bob cannot read, the agent stopped for each cycle.
    "guarded": {
        "schedule": "0 3 1 1 *",
        "claimName": CLAIM,
        "proposer": KEYED,
        "agent": {"workloadRef": {"kind": "Deployment", "name": WORKLOAD}},
    },
    "plain": {"schedule": "0 3 1 1 *", "claimName": CLAIM},
}
DISARMED = {
    "archiveCap": 1.0,
    "similarityThreshold": 0.2,
    "maxClusterSize": 64,
    "pruneCensus": "off",
    "floor": {"importance": 2.0},
    "minIntervalHours": 0.0,
}
EXFIL = {"type": "openai", "model": "m", "baseURL": "http://exfil.bob.svc:8080/v1", "allowPlainHTTP": True}


def _with(**fields: Any) -> Any:
    return lambda old, _serial: {**old, **copy.deepcopy(fields)}


def _without(field: str) -> Any:
    return lambda old, _serial: {k: v for k, v in old.items() if k != field}


ATTACKS = [
    # Finding 1: the memory sent to bob's server, with no Secret (or with the admin's dropped).
    Attack("exfiltrate-to-bobs-server", _with(proposer=EXFIL)),
    Attack("drop-the-secret-for-loopback", _with(proposer={**EXFIL, "baseURL": "http://127.0.0.1:18099/v1"})),
    # Finding 2: destruction through the safeguards, and the other unchecked fields.
    Attack("disarm-the-safeguards", _with(safeguards=DISARMED)),
    Attack("purge-tomorrow", _with(safeguards={"retentionDays": 1})),
    Attack("approve-a-hold", _with(approveHold="20261130T030000Z-4f2a1c")),
    Attack("run-beside-the-live-agent", _without("agent")),
    Attack("another-vocabulary", _with(vocabularyRef={"name": "bobs-words"})),
    Attack("another-directory", _with(agentPath="other")),
    Attack("another-cron", _with(schedule="* * * * *")),
    # Finding 3: a spec the API server refuses as a Job, and a token that scales a Deployment bob cannot patch.
    Attack("requests-over-limits", _with(resources={"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}), invalid=True),
    Attack("run-now", lambda old, serial: {**old, "runNowToken": f"bob-{serial}"}, update_only=True),
    # Finding 4: image prefixes with a boundary; and an image change re-runs the Secret check.
    Attack("image-tag-extension", _with(image="localhost/dreamkeeper:test-bobs-build")),
    Attack("image-sibling-repository", _with(image="registry.example/dreamkeeper-bob/evil:1")),
    Attack("image-exactly-allowed", _with(image=JOB_IMAGE)),
    Attack("image-under-an-allowed-path", _with(image="registry.example/approved/dreamkeeper:2")),
    # Finding 6: a selector the CRD accepted and the API server refused on every pass.
    Attack("selector-bad-key", _with(agentSelector={"matchLabels": {"bad key!": "x"}}), invalid=True),
    # Finding 7: root's group for the volume.
    Attack("fs-group-zero", _with(securityContext={"runAsUser": 1000, "fsGroup": 0}), invalid=True),
    Attack("fs-group-zero-allowed", _with(securityContext={"runAsUser": 1000, "fsGroup": 0, "allowRootGroup": True})),
]


@dataclass
class World:
    cluster: KubeCluster
    ns: str
    users: dict[str, User]
    serial: int = 0

    def next(self) -> int:
        self.serial += 1
        return self.serial

    def reset(self, name: str) -> Obj:
        """The admin's schedule as the admin made it (created again if an attack replaced it)."""
        path = schedule_path(self.ns, name)
        current = self.cluster.api.get_or_none(path)
        body = schedule_body(name, copy.deepcopy(BASES[name]))
        if current is None:
            return dict(self.cluster.api.create(schedule_path(self.ns), body)["spec"])
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        return dict(self.cluster.api.request("PUT", path, body)["spec"])


@pytest.fixture(scope="module")
def world(crds: KubeCluster) -> Iterator[World]:
    ns = crds.create_namespace("t-tenancy-matrix", labels={"dreamkeeper.test/ns": "1"})
    try:
        unbound_claim(crds, ns, CLAIM)
        crds.api.create(namespaced(ns, "secrets"), {"metadata": {"name": SECRET}, "stringData": {"password": "pw"}})
        workload(crds, ns)
        users = tenants(crds, ns)
        w = World(crds, ns, users)
        for name in BASES:
            w.reset(name)
        yield w
    finally:
        crds.delete_namespace(ns)


def _outcome(w: World, user: User, method: str, base: str, attack: Attack) -> tuple[str, str]:
    """(expected, observed) for one attempt: 'admitted', 'refused-403' or 'invalid-422'."""
    old = w.reset(base)
    new = attack.change(old, w.next())
    name = f"{base}-{user.name}-{w.serial}" if method == "create" else base
    if method == "create":
        new = {k: v for k, v in new.items() if k != "runNowToken"}
    try:
        predicted, answer = write(user.api, w.ns, name, method, old, new, manager=user.name)
    except ApiError as exc:
        observed = f"refused-{exc.status}"
        predicted = new
        detail = exc.message
    else:
        observed, detail = "admitted", ""
        # Admitted means written: the server's spec changed exactly when the attempt changes something.
        if method != "create" and (predicted != old) != (answer != old):
            observed = f"admitted but spec {'unchanged' if answer == old else 'changed unexpectedly'}"
    if attack.invalid:
        expected = "invalid-422"
        observed = "invalid-422" if observed == "refused-422" else observed
    else:
        allowed = admitted(None if method == "create" else old, predicted, user.rights)
        expected = "admitted" if allowed else "refused-403"
    return expected, observed + (f" ({detail[:160]})" if observed != expected and detail else "")


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_every_attack_gets_the_answer_acting_directly_would(world: World, attack: Attack) -> None:
    mismatches, seen = [], {"admitted": 0, "refused-403": 0, "invalid-422": 0}
    for base in BASES:
        for user in (world.users["bob"], world.users["dave"], world.users["admin"]):
            for method in METHODS:
                if method == "create" and attack.update_only:
                    continue
                expected, observed = _outcome(world, user, method, base, attack)
                seen[expected] = seen.get(expected, 0) + 1
                if expected != observed:
                    mismatches.append(f"{base}/{user.name}/{method}: expected {expected}, got {observed}")
    assert mismatches == [], "\n".join(mismatches)
    if attack.invalid:
        assert seen["admitted"] == seen["refused-403"] == 0
    else:  # every attack is refused to bob on the trial's schedule and allowed to the admin: the matrix is not empty
        assert seen["admitted"] > 0 and seen["refused-403"] > 0, seen


def test_bob_is_refused_every_attack_on_the_admins_schedule(world: World) -> None:
    """The trial as it happened (finding by finding): bob, bound only to dreamkeeper-edit, on the admin's schedule.
    Before issue 21 every one of these was admitted."""
    bob = world.users["bob"]
    for attack in ATTACKS:
        for method in ("json-patch", "merge-patch", "apply"):
            old = world.reset("guarded")
            new = attack.change(old, world.next())
            try:
                _, answer = write(bob.api, world.ns, "guarded", method, old, new, manager="bob")
            except ApiError as refused:
                assert refused.status in (403, 422), (attack.name, method, refused)
                if refused.status == 403 and attack.name != "run-now":
                    assert "checked as if you created it now" in refused.message, refused.message
                continue
            # Admitted only when it changes nothing: server-side apply cannot remove a field another manager owns.
            assert (method, answer) == ("apply", old), (attack.name, method)


def test_the_rights_reviewed_are_what_the_tenants_get_trying_directly(world: World) -> None:
    """The oracle's inputs are the API server's answers to the users acting themselves: a pod mounting the claim, the
    Secret, the Deployment's scale (dry runs, nothing is changed)."""
    pod = {
        "metadata": {"name": "direct"},
        "spec": {
            "containers": [{"name": "c", "image": JOB_IMAGE}],
            "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": CLAIM}}],
        },
    }
    for user in world.users.values():
        if user.name == "admin":
            continue
        attempts = {
            "create_pods": lambda api: api.request("POST", namespaced(world.ns, "pods"), pod, params={"dryRun": "All"}),
            "get_secret": lambda api: api.get(namespaced(world.ns, "secrets", SECRET)),
            "patch_scale": lambda api: api.request(
                "PATCH",
                namespaced(world.ns, "deployments", WORKLOAD, **APPS) + "/scale",
                {"spec": {"replicas": 3}},
                params={"dryRun": "All"},
                content_type="application/merge-patch+json",
            ),
        }
        for right, attempt in attempts.items():
            try:
                attempt(user.api)
                allowed = True
            except ApiError as exc:
                assert exc.status == 403, exc
                allowed = False
            assert allowed == getattr(user.rights, right), (user.name, right)


def test_carol_who_may_patch_the_deployment_has_no_say_over_schedules(world: World) -> None:
    carol = world.users["carol"]
    for method in ("merge-patch", "apply"):
        old = world.reset("guarded")
        with pytest.raises(ApiError) as refused:
            write(carol.api, world.ns, "guarded", method, old, {**old, "runNowToken": "carol"}, manager="carol")
        assert refused.value.status == 403  # RBAC: she holds no rights on dreamschedules at all


def test_resuming_a_suspended_schedule_needs_the_right_to_stop_its_agent(world: World) -> None:
    admin, bob = world.users["admin"].api, world.users["bob"].api
    path = schedule_path(world.ns, "guarded")
    world.reset("guarded")
    bob.patch(path, {"spec": {"suspend": True}})  # suspending disturbs nobody: allowed
    with pytest.raises(ApiError) as refused:
        bob.patch(path, {"spec": {"suspend": False}})
    assert refused.value.status == 403 and f"may not scale Deployment {WORKLOAD}" in refused.value.message
    admin.patch(path, {"spec": {"suspend": False}})


def test_a_runnowtoken_needs_only_the_scale_subresource(crds: KubeCluster, world: World) -> None:
    """Someone who may scale the agent (as `kubectl scale` does) but not patch it may run a Stop schedule now."""
    ns = world.ns
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    role = {"apiGroups": ["apps"], "resources": ["deployments/scale"], "resourceNames": [WORKLOAD], "verbs": ["patch"]}
    crds.api.create(f"{rbac}/namespaces/{ns}/roles", {"metadata": {"name": "bob-scale"}, "rules": [role]})
    crds.api.create(
        f"{rbac}/namespaces/{ns}/rolebindings",
        {"metadata": {"name": "bob-scale"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "bob-scale"},
         "subjects": [{"kind": "ServiceAccount", "name": "bob", "namespace": ns}]},
    )  # fmt: skip
    bob: KubeApi = world.users["bob"].api
    world.reset("guarded")
    try:

        def accepted() -> bool:
            try:
                bob.patch(schedule_path(ns, "guarded"), {"spec": {"runNowToken": f"scale-{world.next()}"}})
            except ApiError as exc:
                assert exc.status == 403, exc
                return False  # the new Role may not be in the authorizer's cache yet
            return True

        crds.wait_for("bob's token admitted with patch on deployments/scale", accepted, timeout=30)
    finally:
        crds.api.delete(f"{rbac}/namespaces/{ns}/rolebindings/bob-scale")
        crds.api.delete(f"{rbac}/namespaces/{ns}/roles/bob-scale")
