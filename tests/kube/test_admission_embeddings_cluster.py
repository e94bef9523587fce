"""``spec.embeddings`` on a real API server (issue 24): an embeddings endpoint is sent memory content and its key, so
it is held to an openai proposer's rules: the CRD refuses plain http to outside the cluster and a keyless external
endpoint, and the admission policy refuses a Secret its author may not get."""

from __future__ import annotations

from typing import Any

import pytest

from tests.kube.test_admission_cluster import Tenant, _use_claim, tenant  # noqa: F401 (the fixture)

pytestmark = pytest.mark.cluster

LEAKY = {
    "baseURL": "https://embed.example/v1",
    "model": "m",
    "apiKeySecretRef": {"name": "db-creds", "key": "password"},
}


def test_an_embeddings_secret_the_author_cannot_get_is_refused(tenant: Tenant) -> None:  # noqa: F811
    tenant.grant("use-agent-data", [_use_claim("agent-data")])
    error = tenant.refused("leak-embed", embeddings=LEAKY)
    assert error.status == 403, error.message
    assert f"may not get Secret db-creds in namespace {tenant.ns}" in error.message, error.message
    assert "embeddings.baseURL" in error.message


@pytest.mark.parametrize(
    ("embeddings", "needle"),
    [
        ({"baseURL": "http://embed.example/v1", "model": "m", "allowPlainHTTP": True,
          "apiKeySecretRef": {"name": "k", "key": "k"}}, "plain http:// only to loopback or an in-cluster Service"),
        ({"baseURL": "http://embed.agents.svc/v1", "model": "m"}, "allowPlainHTTP"),
        ({"baseURL": "https://embed.example/v1", "model": "m"}, "apiKeySecretRef is required"),
    ],
    ids=["http-external", "http-no-opt-in", "external-no-key"],
)  # fmt: skip
def test_plain_http_and_keyless_embeddings_are_refused_by_the_crd(
    tenant: Tenant,  # noqa: F811
    embeddings: dict[str, Any],
    needle: str,
) -> None:
    error = tenant.refused("bad-embed", embeddings=embeddings)
    assert error.status == 422 and needle in error.message, error.message


def test_an_in_cluster_endpoint_without_a_key_is_admitted(tenant: Tenant) -> None:  # noqa: F811
    tenant.grant("use-agent-data", [_use_claim("agent-data")])
    local = {"baseURL": "http://embed.agents.svc:8080/v1", "model": "m", "allowPlainHTTP": True}
    created = tenant.schedule("local-embed", embeddings=local)
    assert created["spec"]["embeddings"]["model"] == "m"
