"""The cycle Job: Pod Security restricted, API key only from the Secret, settings passed through."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.dream_command import proposer_config
from dreamkeeper.kube.jobspec import JobDefaults, JobRequest, VocabularySource, build_job, cycle_settings
from dreamkeeper.kube.models import DreamScheduleSpec
from dreamkeeper.kube.placement import Placement
from dreamkeeper.proposers.config import ProposerConfig

SLOT = datetime(2026, 1, 1, 3, tzinfo=UTC)


def job(
    spec: dict[str, Any],
    *,
    placement: Placement | None = None,
    vocabulary: bool = False,
    defaults: JobDefaults | None = None,
    **kw: Any,
) -> Any:
    request = JobRequest(
        schedule_name="nightly",
        schedule_uid="uid-1",
        namespace="agents",
        spec=DreamScheduleSpec.model_validate({"schedule": "0 3 * * *", "claimName": "agent-data", **spec}),
        job_name="nightly-1",
        trigger=kw.pop("trigger", "schedule"),
        slot=SLOT,
        placement=placement or Placement(),
        vocabulary=VocabularySource("words-memvocab", "a" * 64) if vocabulary else None,
        **kw,
    )
    return build_job(request, defaults or JobDefaults(image="localhost/dreamkeeper:test"))


def containers(manifest: Any) -> list[dict[str, Any]]:
    pod = manifest["spec"]["template"]["spec"]
    return [*pod.get("initContainers", []), *pod["containers"]]


def test_pods_pass_pod_security_restricted() -> None:
    manifest = job({}, vocabulary=True)
    pod = manifest["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    allowed_volumes = {"persistentVolumeClaim", "emptyDir", "configMap"}
    assert all(set(v) - {"name"} <= allowed_volumes for v in pod["volumes"])
    assert len(containers(manifest)) == 2
    for container in containers(manifest):
        sc = container["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False
        assert sc["readOnlyRootFilesystem"] is True
        assert sc["runAsNonRoot"] is True
        assert sc["capabilities"] == {"drop": ["ALL"]}
        assert "/tmp" in [m["mountPath"] for m in container["volumeMounts"]]  # writable scratch on a RO root
        assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert {"name": "tmp", "emptyDir": {"sizeLimit": "512Mi"}} in pod["volumes"]


def test_a_failed_cycle_is_not_retried_and_is_bounded_in_time() -> None:
    spec = job({"activeDeadlineSeconds": 900})["spec"]
    assert spec["backoffLimit"] == 0
    assert spec["activeDeadlineSeconds"] == 900
    assert spec["template"]["spec"]["restartPolicy"] == "Never"


def test_the_dream_container_gets_the_agent_dir_and_the_settings() -> None:
    manifest = job({"agentPath": "profiles/rockbot", "safeguards": {"retentionDays": 30, "floor": {"importance": 0.9}}})
    dream = manifest["spec"]["template"]["spec"]["containers"][0]
    args = dream["args"]
    assert dream["command"] == ["dreamkeeper"]
    assert args[:2] == ["dream", "/data/profiles/rockbot"]
    settings = json.loads(args[args.index("--settings-json") + 1])
    assert settings == {"retention_days": 30, "floor": {"importance": 0.9}, "proposer": {"type": "offline"}}
    cycle = {k: v for k, v in settings.items() if k != "proposer"}
    assert CycleSettings.model_validate(cycle).floor.reinforcement == 5
    assert args[args.index("--termination-message-path") + 1] == "/dev/termination-log"
    assert "--force" not in args
    assert (
        "--force" in job({}, trigger="run-now", run_now_token="t")["spec"]["template"]["spec"]["containers"][0]["args"]
    )


def test_the_api_key_comes_only_from_the_secret() -> None:
    manifest = job(
        {
            "proposer": {
                "type": "openai",
                "model": "gpt-x",
                "baseURL": "https://llm.example/v1",
                "apiKeySecretRef": {"name": "llm", "key": "token"},
                "tokenBudget": 50000,
            }
        }
    )
    dream = manifest["spec"]["template"]["spec"]["containers"][0]
    key = [e for e in dream["env"] if e["name"] == "OPENAI_API_KEY"]
    assert key == [{"name": "OPENAI_API_KEY", "valueFrom": {"secretKeyRef": {"name": "llm", "key": "token"}}}]
    assert not any("OPENAI_API_KEY" in a or "apiKey" in a for a in dream["args"])


def test_the_proposer_spec_reaches_the_cycle_as_its_settings_section(tmp_path: Path) -> None:
    proposer = {
        "type": "openai",
        "model": "gpt-x",
        "baseURL": "https://llm.example/v1",
        "apiKeySecretRef": {"name": "llm", "key": "api-key"},
        "tokenBudget": 50000,
        "timeoutSeconds": 45,
        "temperature": 0.2,
        "maxOutputTokens": 900,
        "outputMode": "json_object",
    }
    args = job({"proposer": proposer})["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--proposer" not in args and "--model" not in args  # one shape: the settings' proposer section
    section = json.loads(args[args.index("--settings-json") + 1])["proposer"]
    assert section == {
        "type": "openai",
        "model": "gpt-x",
        "base_url": "https://llm.example/v1",
        "token_budget": 50000,
        "timeout": 45.0,
        "temperature": 0.2,
        "max_output_tokens": 900,
        "output_mode": "json_object",
    }
    # What the dream command builds from that section (no flags given) is what the operator validated.
    config = proposer_config(tmp_path, section, {})
    assert config == ProposerConfig.model_validate(section)
    assert (config.timeout, config.temperature, config.max_output_tokens) == (45.0, 0.2, 900)


def test_an_openai_proposer_without_a_model_is_an_invalid_spec() -> None:
    with pytest.raises(ValidationError, match=r"proposer\.model is required"):
        DreamScheduleSpec.model_validate({"claimName": "c", "schedule": "@daily", "proposer": {"type": "openai"}})


def test_the_init_container_seeds_from_the_config_map_without_clobbering() -> None:
    manifest = job({"agentPath": "agent"}, vocabulary=True)
    pod = manifest["spec"]["template"]["spec"]
    seed = pod["initContainers"][0]
    assert seed["args"][0] == "seed-vocabulary"
    assert seed["args"][seed["args"].index("--destination") + 1] == "/data/agent/merge-coverage-vocabulary.json"
    vocab = next(v for v in pod["volumes"] if v["name"] == "vocabulary")
    assert vocab["configMap"]["name"] == "words-memvocab"
    assert manifest["metadata"]["annotations"]["dreamkeeper.io/vocabulary-sha256"] == "a" * 64


def test_identity_comes_from_the_spec_then_the_agent_pod_then_the_default() -> None:
    found = Placement(node_name="n1", agent_pod="agent-0", run_as_user=1000, run_as_group=1001, fs_group=2000)
    pod = job({}, placement=found)["spec"]["template"]["spec"]["securityContext"]
    assert (pod["runAsUser"], pod["runAsGroup"], pod["fsGroup"]) == (1000, 1001, 2000)
    assert pod["fsGroupChangePolicy"] == "OnRootMismatch"
    explicit = job({"securityContext": {"runAsUser": 4242, "fsGroup": 7}}, placement=found)
    sc = explicit["spec"]["template"]["spec"]["securityContext"]
    assert (sc["runAsUser"], sc["runAsGroup"], sc["fsGroup"]) == (4242, 1001, 7)
    # Nobody to copy (the agent is down): the image's user, given the agent's files through the group.
    default = job({})["spec"]["template"]["spec"]["securityContext"]
    assert (default["runAsUser"], default["runAsGroup"], default["fsGroup"]) == (65532, 65532, 65532)
    assert default["fsGroupChangePolicy"] == "OnRootMismatch"
    # The agent's own identity needs no fsGroup: it owns its files already.
    no_fs = Placement(node_name="n1", agent_pod="agent-0", run_as_user=1000, run_as_group=1000)
    sc = job({}, placement=no_fs)["spec"]["template"]["spec"]["securityContext"]
    assert (sc["runAsUser"], sc["runAsGroup"]) == (1000, 1000) and "fsGroup" not in sc


def test_the_cycle_creates_group_writable_files_and_gets_a_grace_period_to_stop_cleanly() -> None:
    pod = job({})["spec"]["template"]["spec"]
    assert "--shared-group" in pod["containers"][0]["args"]
    assert pod["terminationGracePeriodSeconds"] >= 60


def test_redacted_logs_reach_the_cycle_only_when_the_operator_asks() -> None:
    assert "--redact-logs" not in job({})["spec"]["template"]["spec"]["containers"][0]["args"]
    redacting = job({}, defaults=JobDefaults(redact_logs=True))
    assert "--redact-logs" in redacting["spec"]["template"]["spec"]["containers"][0]["args"]


def test_root_is_refused_by_the_spec_model() -> None:
    with pytest.raises(ValidationError):
        DreamScheduleSpec.model_validate({"schedule": "@daily", "claimName": "c", "securityContext": {"runAsUser": 0}})


def test_invalid_safeguards_fail_in_the_operator_not_in_a_pod() -> None:
    spec = DreamScheduleSpec.model_validate(
        {"schedule": "@daily", "claimName": "c", "safeguards": {"protectedCategories": ["user-preferences/**"]}}
    )
    assert cycle_settings(spec) == {"protected_categories": ["user-preferences/**"]}
