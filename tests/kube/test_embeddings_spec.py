"""``spec.embeddings`` and ``spec.rockbot`` (issue 24): the embeddings endpoint is held to the openai proposer's rules
(it is sent memory content and a key), its key reaches the cycle only from its Secret, and both reach the cycle as
sections of its settings."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.kube.models import DreamScheduleSpec
from dreamkeeper.proposers import EMBEDDINGS_API_KEY_ENV, EmbeddingsConfig
from tests.kube.test_jobspec import job

EMBEDDINGS = {
    "baseURL": "https://embed.example/v1",
    "model": "text-embedding-3-small",
    "apiKeySecretRef": {"name": "embed", "key": "token"},
    "batchSize": 16,
    "timeoutSeconds": 30,
}


def spec(**extra: Any) -> DreamScheduleSpec:
    return DreamScheduleSpec.model_validate({"schedule": "0 3 * * *", "claimName": "agent-data", **extra})


def dream_container(manifest: Any) -> dict[str, Any]:
    container: dict[str, Any] = manifest["spec"]["template"]["spec"]["containers"][0]
    return container


def settings_of(container: dict[str, Any]) -> dict[str, Any]:
    args = container["args"]
    loaded: dict[str, Any] = json.loads(args[args.index("--settings-json") + 1])
    return loaded


def test_the_embeddings_key_comes_only_from_its_secret_and_the_endpoint_reaches_the_settings() -> None:
    container = dream_container(job({"embeddings": EMBEDDINGS}))
    keys = [e for e in container["env"] if e["name"] == EMBEDDINGS_API_KEY_ENV]
    assert keys == [{"name": EMBEDDINGS_API_KEY_ENV, "valueFrom": {"secretKeyRef": {"name": "embed", "key": "token"}}}]
    assert not any("token" in a or "apiKey" in a for a in container["args"])
    section = settings_of(container)["embeddings"]
    assert EmbeddingsConfig.model_validate(section) == EmbeddingsConfig(
        base_url="https://embed.example/v1", model="text-embedding-3-small", batch_size=16, timeout=30.0
    )


@pytest.mark.parametrize(
    ("endpoint", "message"),
    [
        ({"baseURL": "http://embed.example/v1", "model": "m", "allowPlainHTTP": True}, "plain http:// only to"),
        ({"baseURL": "http://embed.svc:8080/v1", "model": "m"}, "allowPlainHTTP"),
        ({"baseURL": "https://embed.example/v1", "model": "m"}, "apiKeySecretRef is required"),
    ],
)
def test_an_embeddings_endpoint_is_held_to_the_openai_proposer_s_rules(endpoint: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        spec(embeddings=endpoint)


def test_a_loopback_or_in_cluster_endpoint_needs_no_key() -> None:
    local = {"baseURL": "http://embed.agents.svc:8080/v1", "model": "m", "allowPlainHTTP": True}
    container = dream_container(job({"embeddings": local}))
    assert not [e for e in container["env"] if e["name"] == EMBEDDINGS_API_KEY_ENV]


def test_the_rockbot_section_and_the_source_less_cap_reach_the_cycle_settings() -> None:
    rockbot = {"profileBase": "/data/agent", "auditBasePath": "/data/agent/memory-audit", "archiveRetentionDays": 90.0}
    container = dream_container(
        job({"rockbot": rockbot, "safeguards": {"sourcelessSavesMaxPerCycle": 0, "scope": "rockbot"}})
    )
    settings = CycleSettings.model_validate({k: v for k, v in settings_of(container).items() if k != "proposer"})
    assert settings.rockbot.profile_base == "/data/agent"
    assert settings.rockbot.audit_base_path == "/data/agent/memory-audit"
    assert settings.rockbot.archive_retention_days == 90.0
    assert settings.sourceless_saves_max_per_cycle == 0
    assert settings.scope == "rockbot"
