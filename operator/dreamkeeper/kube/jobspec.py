"""The cycle Job: one pod on the agent's volume that seeds the vocabulary, then runs ``dreamkeeper dream``.

The pod passes Pod Security "restricted" (non-root, read-only root filesystem with an emptyDir /tmp, no
privilege escalation, all capabilities dropped, RuntimeDefault seccomp, no service-account token). backoffLimit
is 0: a failed cycle is retried at the next slot, not hammered (every retry can be a paid LLM run).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from dreamkeeper import __version__
from dreamkeeper.consolidation import FORMAT_SECTION, CycleSettings, format_of
from dreamkeeper.coverage import VOCABULARY_FILE
from dreamkeeper.formats import ROCKBOT
from dreamkeeper.kube import (
    ANNOTATION_AGENT_STOPPED,
    ANNOTATION_CLAIM_NAME,
    ANNOTATION_PINNED_TO,
    ANNOTATION_RUN_NOW_TOKEN,
    ANNOTATION_SCHEDULE_NAME,
    ANNOTATION_SLOT,
    ANNOTATION_VOCABULARY_SHA256,
    API_VERSION,
    DREAM_CONTAINER,
    LABEL_CLAIM,
    LABEL_COMPONENT,
    LABEL_MANAGED_BY,
    LABEL_NAME,
    LABEL_SCHEDULE,
    LABEL_TRIGGER,
    MANAGED_BY,
    SCHEDULE_KIND,
    SEED_CONTAINER,
)
from dreamkeeper.kube.models import DreamScheduleSpec, EmbeddingsSpec, ProposerSpec
from dreamkeeper.kube.naming import label_value
from dreamkeeper.kube.objects import Body
from dreamkeeper.kube.placement import Placement
from dreamkeeper.kube.pod_models import CycleSecurityContext
from dreamkeeper.kube.vocabulary_render import CONFIG_MAP_KEY
from dreamkeeper.proposers import (
    EMBEDDINGS_API_KEY_ENV,
    EMBEDDINGS_SECTION,
    PROPOSER_SECTION,
    EmbeddingsConfig,
    ProposerConfig,
)

Trigger = Literal["schedule", "run-now"]

DATA_MOUNT = "/data"
VOCABULARY_MOUNT = "/etc/dreamkeeper/vocabulary"
TERMINATION_LOG = "/dev/termination-log"
DEFAULT_IMAGE = f"ghcr.io/dreamkeeper/dreamkeeper:{__version__}"
NON_ROOT_DEFAULT = 65532  # the image's USER; used when neither the spec nor the agent pod names one
# SIGTERM (the schedule or the Job deleted, a node drained) lets the cycle reach its next safe point: a stage
# that writes is never cut short, and the report is written (dream_command.py). The kubelet SIGKILLs after this.
TERMINATION_GRACE_SECONDS = 120
NO_API_KEY = "none"  # OPENAI_API_KEY for a server that needs no key (the openai client refuses an empty one)


@dataclass(frozen=True)
class JobDefaults:
    """Operator-wide settings for cycle Jobs (flags of `dreamkeeper operator`)."""

    image: str = DEFAULT_IMAGE
    image_pull_policy: str | None = None
    run_as_user: int = NON_ROOT_DEFAULT
    run_as_group: int = NON_ROOT_DEFAULT
    tmp_size_limit: str = "512Mi"
    redact_logs: bool = False  # the cycle logs ids and counts only, never memory content


@dataclass(frozen=True)
class VocabularySource:
    config_map: str
    sha256: str


@dataclass(frozen=True)
class JobRequest:
    schedule_name: str
    schedule_uid: str
    namespace: str
    spec: DreamScheduleSpec
    job_name: str
    trigger: Trigger
    slot: datetime
    placement: Placement
    vocabulary: VocabularySource | None = None
    run_now_token: str | None = None
    # Stop: the agent's workload this cycle stopped, and the deadline cut to what is left of maxDowntimeSeconds.
    agent_stopped: str | None = None
    active_deadline_seconds: int | None = None


def cycle_settings(spec: DreamScheduleSpec) -> dict[str, Any]:
    """The spec's safeguards as ``CycleSettings`` JSON, validated here so a bad combination fails in the operator
    (condition Ready=False) rather than in a pod. Only the fields the user set are passed."""
    data: dict[str, Any] = {}
    guards = spec.safeguards
    if guards is not None:
        if guards.retention_days is not None:
            data["retention_days"] = guards.retention_days
        if guards.floor is not None:
            data["floor"] = guards.floor.model_dump(exclude_none=True)
        if guards.protected_categories is not None:
            data["protected_categories"] = list(guards.protected_categories)
        if guards.similarity_threshold is not None:
            data["similarity_threshold"] = guards.similarity_threshold
        if guards.max_cluster_size is not None:
            data["max_cluster_size"] = guards.max_cluster_size
        if guards.min_interval_hours is not None:
            data["min_interval_hours"] = guards.min_interval_hours
        if guards.archive_cap is not None:
            data["archive_cap"] = guards.archive_cap
        if guards.archive_cap_min_entries is not None:
            data["archive_cap_min_entries"] = guards.archive_cap_min_entries
        if guards.prune_census is not None:
            data["prune_census"] = guards.prune_census
        if guards.decay is not None:
            data["decay"] = guards.decay.model_dump(exclude_none=True)
        if guards.cluster_split is not None:
            data["cluster_split"] = guards.cluster_split
        if guards.cluster_tokens is not None:
            data["cluster_tokens"] = guards.cluster_tokens
        if guards.subsume is not None:
            data["subsume"] = guards.subsume
        if guards.scope is not None:
            data["scope"] = guards.scope
        if guards.specifics_links is not None:
            data["specifics_links"] = guards.specifics_links
        if guards.offer_new_clusters is not None:
            data["offer_new_clusters"] = guards.offer_new_clusters
        if guards.sourceless_saves_max_per_cycle is not None:
            data["sourceless_saves_max_per_cycle"] = guards.sourceless_saves_max_per_cycle
    if spec.proposer.offer_shape is not None:
        data["offer_shape"] = spec.proposer.offer_shape
    if spec.rockbot is not None:
        data["rockbot"] = spec.rockbot.model_dump(exclude_none=True)
    CycleSettings.model_validate(data)
    return data


def proposer_config(proposer: ProposerSpec) -> ProposerConfig:
    """``spec.proposer`` in the shape the cycle reads (the settings' ``proposer`` section); only what the user set."""
    data = {
        "type": proposer.type,
        "model": proposer.model,
        "base_url": proposer.base_url,
        "token_budget": proposer.token_budget,
        "timeout": proposer.timeout_seconds,
        "temperature": proposer.temperature,
        "max_output_tokens": proposer.max_output_tokens,
        "output_mode": proposer.output_mode,
        "offer_singletons": proposer.offer_singletons,
        "request_token_budget": proposer.request_token_budget,
    }
    return ProposerConfig.model_validate({k: v for k, v in data.items() if v is not None})


def format_section(spec: DreamScheduleSpec) -> dict[str, Any] | None:
    """``spec.format`` and ``spec.formatProfile`` as the settings' ``format`` section (None for rockbot), checked
    here so a bad profile fails in the operator (condition Ready=False) rather than in a pod."""
    if spec.format == ROCKBOT:
        return None
    section: dict[str, Any] = {"name": spec.format}
    if spec.format_profile is not None:
        section.update(spec.format_profile.wire())
    format_of(None, None, section)
    return section


def dream_settings(spec: DreamScheduleSpec) -> dict[str, Any]:
    """The ``--settings-json`` of the dream container: the safeguards, and the proposer and the memory format as
    their own sections."""
    proposer = proposer_config(spec.proposer).model_dump(mode="json", exclude_unset=True)
    settings = {**cycle_settings(spec), PROPOSER_SECTION: proposer}
    section = format_section(spec)
    if section is not None:
        settings[FORMAT_SECTION] = section
    if spec.embeddings is not None:
        settings[EMBEDDINGS_SECTION] = embeddings_config(spec.embeddings).model_dump(mode="json", exclude_unset=True)
    return settings


def embeddings_config(spec: EmbeddingsSpec) -> EmbeddingsConfig:
    """``spec.embeddings`` in the shape the cycle reads (the settings' ``embeddings`` section)."""
    data = {
        "base_url": spec.base_url,
        "model": spec.model,
        "timeout": spec.timeout_seconds,
        "batch_size": spec.batch_size,
    }
    return EmbeddingsConfig.model_validate({k: v for k, v in data.items() if v is not None})


def agent_dir(spec: DreamScheduleSpec) -> str:
    return f"{DATA_MOUNT}/{spec.agent_path}".rstrip("/") if spec.agent_path else DATA_MOUNT


def labels(schedule_name: str, claim_name: str, trigger: Trigger) -> dict[str, str]:
    return {
        LABEL_NAME: "dreamkeeper",
        LABEL_COMPONENT: "dream-cycle",
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_SCHEDULE: label_value(schedule_name),
        LABEL_CLAIM: label_value(claim_name),
        LABEL_TRIGGER: trigger,
    }


def _container_security() -> Body:
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _first(*values: int | None) -> int | None:
    return next((v for v in values if v is not None), None)


def _pod_security(req: JobRequest, defaults: JobDefaults) -> Body:
    wanted = req.spec.security_context or CycleSecurityContext()
    found = req.placement
    user = _first(wanted.run_as_user, found.run_as_user, defaults.run_as_user)
    group = _first(wanted.run_as_group, found.run_as_group, defaults.run_as_group)
    # An identity nobody copied (no spec, no agent pod: the agent is down) is not the owner of the agent's files,
    # so it gets them through the group: the kubelet gives the volume to fsGroup, group-writable (once: policy
    # OnRootMismatch). The cycle's own files stay group-writable too (--shared-group), for the agent and for later
    # cycles under another uid.
    borrowed = wanted.run_as_user is not None or found.run_as_user is not None
    fs_group = _first(wanted.fs_group, found.fs_group, None if borrowed else group)
    security: Body = {
        "runAsNonRoot": True,
        "runAsUser": user,
        "runAsGroup": group,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    if fs_group is not None:
        security["fsGroup"] = fs_group
        # Only touch ownership when the volume root does not match already (never a recursive chown per run).
        security["fsGroupChangePolicy"] = "OnRootMismatch"
    return security


def _resources(spec: DreamScheduleSpec) -> Body:
    if spec.resources is None:
        return {"requests": {"cpu": "50m", "memory": "128Mi"}}
    return spec.resources.wire()


def _dream_args(req: JobRequest, defaults: JobDefaults) -> list[str]:
    spec = req.spec
    args = [
        "dream",
        agent_dir(spec),
        "--settings-json",
        json.dumps(dream_settings(spec), separators=(",", ":"), sort_keys=True),
        "--termination-message-path",
        TERMINATION_LOG,
        "--shared-group",
    ]
    if req.trigger == "run-now":
        args.append("--force")  # a deliberate request: the minimum interval guards against restart storms only
    if defaults.redact_logs:
        args.append("--redact-logs")
    if spec.approve_hold:
        args += ["--approve-hold", spec.approve_hold]
    return args


def _env(req: JobRequest) -> list[Body]:
    env: list[Body] = [
        {"name": "HOME", "value": "/tmp"},
        {"name": "TMPDIR", "value": "/tmp"},
        {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
        {"name": "PYTHONUNBUFFERED", "value": "1"},
    ]
    ref = req.spec.proposer.api_key_secret_ref
    if req.spec.proposer.type == "openai" and ref is not None:
        # The key never appears in the Job spec, the CR or an argument: only this Secret reference.
        env.append({"name": "OPENAI_API_KEY", "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}}})
    elif req.spec.proposer.type == "openai":
        # Admission allows no key only for loopback and in-cluster servers (a local llama.cpp, vLLM): the client
        # still wants a non-empty one.
        env.append({"name": "OPENAI_API_KEY", "value": NO_API_KEY})
    embeddings = req.spec.embeddings
    if embeddings is not None and embeddings.api_key_secret_ref is not None:
        ref = embeddings.api_key_secret_ref
        env.append({"name": EMBEDDINGS_API_KEY_ENV, "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}}})
    return env


def _affinity(placement: Placement) -> Body | None:
    if placement.node_name is None:
        return None
    # matchFields on metadata.name is what DaemonSets use: it works whatever labels the node carries.
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [placement.node_name]}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def build_job(req: JobRequest, defaults: JobDefaults) -> Body:
    spec = req.spec
    image = spec.image or defaults.image
    pull_policy = spec.image_pull_policy or defaults.image_pull_policy
    job_labels = labels(req.schedule_name, spec.claim_name, req.trigger)
    annotations = {
        ANNOTATION_SLOT: req.slot.isoformat().replace("+00:00", "Z"),
        ANNOTATION_SCHEDULE_NAME: req.schedule_name,
        ANNOTATION_CLAIM_NAME: spec.claim_name,
        ANNOTATION_PINNED_TO: req.placement.description,
    }
    if req.run_now_token is not None:
        annotations[ANNOTATION_RUN_NOW_TOKEN] = req.run_now_token
    if req.vocabulary is not None:
        annotations[ANNOTATION_VOCABULARY_SHA256] = req.vocabulary.sha256
    if req.agent_stopped is not None:
        annotations[ANNOTATION_AGENT_STOPPED] = req.agent_stopped
    mounts = [{"name": "data", "mountPath": DATA_MOUNT}, {"name": "tmp", "mountPath": "/tmp"}]
    common: Body = {
        "image": image,
        "securityContext": _container_security(),
        "terminationMessagePath": TERMINATION_LOG,
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "resources": _resources(spec),
    }
    if pull_policy:
        common["imagePullPolicy"] = pull_policy
    dream: Body = {
        "name": DREAM_CONTAINER,
        "command": ["dreamkeeper"],
        "args": _dream_args(req, defaults),
        "env": _env(req),
        "volumeMounts": mounts,
        **common,
    }
    volumes: list[Body] = [
        {"name": "data", "persistentVolumeClaim": {"claimName": spec.claim_name}},
        {"name": "tmp", "emptyDir": {"sizeLimit": defaults.tmp_size_limit}},
    ]
    init_containers: list[Body] = []
    if req.vocabulary is not None:
        volumes.append(
            {
                "name": "vocabulary",
                "configMap": {
                    "name": req.vocabulary.config_map,
                    "items": [{"key": CONFIG_MAP_KEY, "path": CONFIG_MAP_KEY}],
                    "defaultMode": 0o444,
                },
            }
        )
        init_containers.append(
            {
                "name": SEED_CONTAINER,
                "command": ["dreamkeeper"],
                "args": [
                    "seed-vocabulary",
                    "--source",
                    f"{VOCABULARY_MOUNT}/{CONFIG_MAP_KEY}",
                    "--destination",
                    f"{agent_dir(spec)}/{VOCABULARY_FILE}",
                    "--termination-message-path",
                    TERMINATION_LOG,
                ],
                "env": [{"name": "HOME", "value": "/tmp"}, {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}],
                "volumeMounts": [*mounts, {"name": "vocabulary", "mountPath": VOCABULARY_MOUNT, "readOnly": True}],
                **common,
                "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}},
            }
        )
    pod_spec: Body = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": _pod_security(req, defaults),
        "containers": [dream],
        "volumes": volumes,
    }
    if init_containers:
        pod_spec["initContainers"] = init_containers
    affinity = _affinity(req.placement)
    if affinity is not None:
        pod_spec["affinity"] = affinity
    if req.placement.tolerations:
        pod_spec["tolerations"] = req.placement.tolerations
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": req.job_name,
            "namespace": req.namespace,
            "labels": job_labels,
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": API_VERSION,
                    "kind": SCHEDULE_KIND,
                    "name": req.schedule_name,
                    "uid": req.schedule_uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "backoffLimit": 0,
            "completions": 1,
            "parallelism": 1,
            "activeDeadlineSeconds": req.active_deadline_seconds or spec.active_deadline_seconds,
            "template": {"metadata": {"labels": job_labels, "annotations": annotations}, "spec": pod_spec},
        },
    }
