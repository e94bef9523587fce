"""Finding 1 of issue 17 on the real control plane: the operator is no confused deputy.

A tenant bound only to the chart's `dreamkeeper-edit` ClusterRole (a ServiceAccount with a real token; it can
neither get Secrets nor create pods) tries what the shared-cluster trial did: name a Secret it cannot read, send
it to a plain-http endpoint, point the cycle at another workload's volume, run an arbitrary image. The generated
ValidatingAdmissionPolicy refuses each at the API server (the operator is not even running), the CRD's CEL
refuses the http:// and key-less cases, and each is admitted once the tenant holds the right in question.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from dreamkeeper.kube import GROUP, VERSION
from tests.cluster.fixtures import KubeCluster
from tests.cluster.kubeapi import ApiError, KubeApi, Obj, namespaced
from tests.kube.cluster_support import JOB_IMAGE, grant_edit_only, schedule_path, unbound_claim

pytestmark = pytest.mark.cluster

LEAKY_PROPOSER = {
    "type": "openai",
    "model": "gpt-x",
    "baseURL": "https://llm.example/v1",
    "apiKeySecretRef": {"name": "db-creds", "key": "password"},
}


@dataclass
class Tenant:
    cluster: KubeCluster
    ns: str
    api: KubeApi  # authenticated as the tenant's ServiceAccount
    user: str

    def schedule(self, name: str, **spec: Any) -> Obj:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "DreamSchedule",
            "metadata": {"name": name},
            "spec": {"schedule": "0 3 1 1 *", "claimName": "agent-data", **spec},
        }
        return self.api.create(schedule_path(self.ns), body)

    def refused(self, name: str, **spec: Any) -> ApiError:
        with pytest.raises(ApiError) as refused:
            self.schedule(name, **spec)
        assert self.cluster.api.get_or_none(schedule_path(self.ns, name)) is None
        return refused.value

    def grant(self, name: str, rules: list[Obj]) -> None:
        rbac = "/apis/rbac.authorization.k8s.io/v1"
        api = self.cluster.api
        api.create(f"{rbac}/namespaces/{self.ns}/roles", {"metadata": {"name": name}, "rules": rules})
        api.create(
            f"{rbac}/namespaces/{self.ns}/rolebindings",
            {
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": self.ns}],
            },
        )

        def granted() -> bool:  # RBAC is eventually consistent in the authorizer's cache
            review = {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SelfSubjectRulesReview",
                "spec": {"namespace": self.ns},
            }
            answer = self.api.create("/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", review)
            verbs = {v for rule in answer["status"]["resourceRules"] for v in rule["verbs"]}
            return all(set(rule["verbs"]) <= verbs for rule in rules)

        self.cluster.wait_for(f"role {name} in effect", granted, timeout=30)


@pytest.fixture
def tenant(crds: KubeCluster, kube_namespace: str) -> Iterator[Tenant]:
    api, ns = crds.api, kube_namespace
    for claim in ("agent-data", "pgdata"):
        unbound_claim(crds, ns, claim)
    api.create(
        namespaced(ns, "secrets"),
        {"metadata": {"name": "db-creds"}, "stringData": {"password": "PG-ROOT-PASSWORD-xyz"}},
    )
    identity = grant_edit_only(crds, ns)
    yield Tenant(crds, ns, KubeApi(crds.api_url, crds.ca_file, token=identity["token"]), identity["user"])


def test_the_tenant_really_holds_only_dreamkeeper_edit(tenant: Tenant) -> None:
    def can(verb: str, resource: str) -> bool:
        out = tenant.cluster.kubectl(
            "auth", "can-i", verb, resource, "-n", tenant.ns, f"--as={tenant.user}", check=False
        )
        return out.stdout.strip() == "yes"

    assert can("create", "dreamschedules.dreamkeeper.io")
    assert not can("get", "secrets/db-creds") and not can("create", "pods") and not can("use", "pvc/pgdata")


def test_a_secret_the_author_cannot_get_is_refused(tenant: Tenant) -> None:
    error = tenant.refused("leak", proposer=LEAKY_PROPOSER)
    assert error.status == 403
    assert f"user {tenant.user} may not get Secret db-creds in namespace {tenant.ns}" in error.message, error.message


def test_the_trial_s_exact_leak_is_refused_twice_over(tenant: Tenant) -> None:
    """The trial's schedule: db-creds sent to a plain-http endpoint on loopback. The CRD refuses the URL (no
    opt-in) before admission runs; with the opt-in, the policy refuses the Secret."""
    plain = {**LEAKY_PROPOSER, "baseURL": "http://127.0.0.1:18099/v1"}
    error = tenant.refused("leak-http", proposer=plain)
    assert error.status == 422 and "allowPlainHTTP" in error.message, error.message
    error = tenant.refused("leak-http-optin", proposer={**plain, "allowPlainHTTP": True})
    assert error.status == 403 and "may not get Secret db-creds" in error.message, error.message


def test_a_claim_the_author_has_no_rights_on_is_refused(tenant: Tenant) -> None:
    error = tenant.refused("pg", claimName="pgdata", agentPath="")
    assert error.status == 403
    assert f"may neither create pods in namespace {tenant.ns} nor use PersistentVolumeClaim pgdata" in error.message


def test_an_arbitrary_image_is_refused(tenant: Tenant) -> None:
    tenant.grant("use-agent-data", [_use_claim("agent-data")])
    error = tenant.refused("miner", image="evil.example/miner:1")
    assert error.status == 403 and "image evil.example/miner:1 is not an allowed image" in error.message


@pytest.mark.parametrize(
    ("proposer", "needle"),
    [
        ({"type": "openai", "model": "m", "baseURL": "http://llm.example/v1", "allowPlainHTTP": True,
          "apiKeySecretRef": {"name": "k", "key": "k"}}, "plain http:// only to loopback or an in-cluster Service"),
        ({"type": "openai", "model": "m", "baseURL": "http://localhost:80@evil.example/v1", "allowPlainHTTP": True},
         "plain http:// only to loopback"),
        ({"type": "openai", "model": "m"}, "apiKeySecretRef is required when type is openai"),
        ({"type": "openai", "model": "m", "baseURL": "https://llm.example/v1"}, "apiKeySecretRef is required"),
    ],
    ids=["http-external", "http-userinfo", "openai-no-key", "openai-external-no-key"],
)  # fmt: skip
def test_plain_http_and_keyless_openai_are_refused_by_the_crd(
    tenant: Tenant, proposer: dict[str, Any], needle: str
) -> None:
    error = tenant.refused("bad", proposer=proposer)
    assert error.status == 422 and needle in error.message, error.message


def _use_claim(claim: str) -> Obj:
    return {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "resourceNames": [claim], "verbs": ["use"]}


def test_each_case_is_admitted_once_the_author_holds_the_right(tenant: Tenant) -> None:
    tenant.grant("use-agent-data", [_use_claim("agent-data")])
    # The default image, an allowed prefix, and a key-less proposer on loopback need nothing more.
    tenant.schedule("plain")
    tenant.schedule("pinned", image=JOB_IMAGE)
    tenant.schedule("local-llm", proposer={"type": "openai", "model": "m", "baseURL": "http://127.0.0.1:8000/v1",
                                           "allowPlainHTTP": True})  # fmt: skip
    tenant.schedule("in-cluster-llm", proposer={"type": "openai", "model": "m", "baseURL": "http://llm.ai.svc:8080/v1",
                                                "allowPlainHTTP": True})  # fmt: skip
    tenant.grant("read-db-creds", [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["db-creds"],
                                    "verbs": ["get"]}])  # fmt: skip
    tenant.schedule("keyed", proposer=LEAKY_PROPOSER)
    tenant.grant("use-pgdata", [_use_claim("pgdata")])
    tenant.schedule("pg", claimName="pgdata", agentPath="")
    tenant.grant("create-pods", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}])
    tenant.schedule("custom-image", image="registry.example/dreamkeeper-fork:2")


def test_an_edit_is_checked_as_if_its_author_created_the_schedule_now(tenant: Tenant) -> None:
    """An admin's schedule holds a Secret the tenant cannot read: the tenant may still run it now (it stops no agent)
    and suspend it, but every other edit needs what creating that schedule would (issue 21): not the baseURL, not
    the directory, not the history limit."""
    admin = tenant.cluster.api
    admin.create(
        schedule_path(tenant.ns),
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DreamSchedule", "metadata": {"name": "admins"},
         "spec": {"schedule": "0 3 1 1 *", "claimName": "agent-data", "proposer": LEAKY_PROPOSER}},
    )  # fmt: skip
    path = schedule_path(tenant.ns, "admins")
    tenant.api.patch(path, {"spec": {"runNowToken": "now"}})  # when, not what: not re-checked
    tenant.api.patch(path, {"spec": {"suspend": True}})
    for change in ({"proposer": {"baseURL": "https://collector.example/v1"}}, {"agentPath": "other"},
                   {"successfulJobsHistoryLimit": 5}):  # fmt: skip
        with pytest.raises(ApiError) as refused:
            tenant.api.patch(path, {"spec": change})
        assert refused.value.status == 403, change
        assert "may not get Secret db-creds" in refused.value.message, refused.value.message
        assert "checked as if you created it now" in refused.value.message
    spec = admin.get(path)["spec"]
    assert spec["proposer"]["baseURL"] == "https://llm.example/v1" and spec["agentPath"] == "agent"
    assert spec["successfulJobsHistoryLimit"] == 3


def test_no_schedule_is_created_in_the_system_namespaces(crds: KubeCluster) -> None:
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DreamSchedule", "metadata": {"name": "sneaky"},
            "spec": {"schedule": "@daily", "claimName": "x"}}  # fmt: skip
    with pytest.raises(ApiError) as refused:
        crds.api.create(schedule_path("kube-system"), body)  # even for cluster-admin: not served unless asked
    assert refused.value.status == 403 and "kube-system is not served" in refused.value.message
