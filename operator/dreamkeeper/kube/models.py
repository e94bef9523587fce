"""The custom resources as pydantic models: the one source of the CRD schemas and of what the operator reads.

Field names are the Kubernetes camelCase names (aliases); bounds live here so the API server enforces them
(``generate.py`` renders these models into structural OpenAPI schemas) and the operator re-checks them when it
parses a spec. ``x-kubernetes-validations`` (CEL) rules are attached with ``json_schema_extra``.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import ConfigDict, Field, create_model, model_validator

from dreamkeeper.consolidation import COUNTS
from dreamkeeper.kube.model_base import KubeModel, StatusModel, cel
from dreamkeeper.kube.pod_models import (
    CycleSecurityContext,
    LabelSelector,
    ResourceRequirementsSpec,
)

DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
# Relative path inside the volume: segments may not start with a dot, so "." and ".." are impossible.
AGENT_PATH = r"^$|^[A-Za-z0-9_-][A-Za-z0-9._-]*(/[A-Za-z0-9_-][A-Za-z0-9._-]*)*$"
# Five cron fields or a macro. CEL cannot parse cron; croniter in the operator is the real check.
CRON = r"^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|\S+(\s+\S+){4})$"
CATEGORY_PATH = r"^/?[A-Za-z0-9_-]+(/[A-Za-z0-9_-]+)*/?$"
# A vocabulary word: no surrounding whitespace, no control characters.
WORD = r"^[^\s\x00-\x1f]([^\x00-\x1f]*[^\s\x00-\x1f])?$"
CONDITION_REASON = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
# A base URL whose host is loopback or an in-cluster Service (<svc>, <svc>.<ns>.svc, <svc>.<ns>.svc.cluster.local):
# the only places plain http:// may go, and the only servers that may need no API key. A regex (not CEL's url()
# or ip() libraries) so the rule compiles on every API server the chart supports. Userinfo ("a@b") cannot match.
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
INTERNAL_URL = (
    rf"^https?://(localhost|127(\.[0-9]{{1,3}}){{3}}|\[::1\]|{_LABEL}(\.{_LABEL}\.svc(\.cluster\.local)?)?)"
    r"(:[0-9]{1,5})?(/[^@]*)?$"
)

# ---- shared pieces ------------------------------------------------------------------------------------------------


class LocalObjectReference(KubeModel):
    """A reference to an object in the same namespace."""

    name: str = Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN, description="Name of the object.")


class SecretKeySelector(KubeModel):
    """A key of a Secret in the DreamSchedule's namespace."""

    name: str = Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN, description="Name of the Secret.")
    key: str = Field(
        min_length=1, max_length=253, pattern=r"^[-._a-zA-Z0-9]+$", description="Key inside the Secret's data."
    )


class Condition(StatusModel):
    """metav1.Condition."""

    type: str = Field(
        max_length=316,
        pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
        description="Ready, LastRunSucceeded or VocabularyInSync.",
    )
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    observed_generation: int | None = Field(
        default=None, ge=0, description="The metadata.generation the condition was set for."
    )
    last_transition_time: datetime = Field(description="When the status last changed.")
    reason: str = Field(
        min_length=1, max_length=1024, pattern=CONDITION_REASON, description="Why, in one CamelCase word."
    )
    message: str = Field(max_length=32768, description="What happened, for a human.")


Conditions = Annotated[
    list[Condition],
    Field(
        max_length=16,
        description="The latest observations of the object's state (metav1.Condition).",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    ),
]


# ---- DreamSchedule ------------------------------------------------------------------------------------------------


def _cel_internal(field: str) -> str:
    return f"has(self.{field}) && self.{field}.matches({INTERNAL_URL!r})"


class ProposerSpec(KubeModel):
    """Who proposes merges and prunes. Every proposal is validated by the same deterministic safeguards."""

    model_config = ConfigDict(
        strict=True,  # as the cycle's own settings: no boolean or string for a number (the operator reads it too)
        allow_inf_nan=False,
        json_schema_extra={
            "x-kubernetes-validations": [
                cel("self.type != 'openai' || has(self.model)", "proposer.model is required when type is openai"),
                cel(
                    "!has(self.baseURL) || !self.baseURL.startsWith('http://') || "
                    "(has(self.allowPlainHTTP) && self.allowPlainHTTP)",
                    "proposer.baseURL is plain http://: set proposer.allowPlainHTTP: true to send requests (and "
                    "the API key) unencrypted; only to loopback or an in-cluster Service",
                ),
                cel(
                    f"!has(self.baseURL) || !self.baseURL.startsWith('http://') || {_cel_internal('baseURL')}",
                    "proposer.baseURL: plain http:// only to loopback or an in-cluster Service (<svc>, "
                    "<svc>.<namespace>.svc, <svc>.<namespace>.svc.cluster.local)",
                ),
                cel(
                    f"self.type != 'openai' || has(self.apiKeySecretRef) || ({_cel_internal('baseURL')})",
                    "proposer.apiKeySecretRef is required when type is openai, unless baseURL is loopback or an "
                    "in-cluster Service",
                ),
            ]
        },
    )

    type: Literal["offline", "openai"] = Field(
        default="offline",
        description="offline: deterministic, no network (exact folds and near-duplicate merges). "
        "openai: an OpenAI-compatible chat endpoint.",
    )
    model: str | None = Field(default=None, min_length=1, max_length=256, description="openai: model name.")
    base_url: str | None = Field(
        default=None,
        alias="baseURL",
        max_length=2048,
        pattern=r"^https?://\S+$",
        description="openai: base URL of an OpenAI-compatible API (default: api.openai.com). Plain http:// only "
        "with allowPlainHTTP, and only to loopback or an in-cluster Service.",
    )
    allow_plain_http: bool | None = Field(
        default=None,
        alias="allowPlainHTTP",
        description="openai: allow an http:// baseURL (requests and the API key unencrypted). Only loopback and "
        "in-cluster Services are accepted even then.",
    )
    api_key_secret_ref: SecretKeySelector | None = Field(
        default=None,
        description="openai: the API key, read only from this Secret (mounted as an environment variable; "
        "the admission policy requires its author may get that Secret). Required unless baseURL is loopback or "
        "an in-cluster Service.",
    )
    token_budget: int | None = Field(
        default=None, ge=1, le=1_000_000_000, description="openai: maximum tokens (input + output) per cycle."
    )
    timeout_seconds: float | None = Field(
        default=None, gt=0, le=3600, description="openai: seconds one request may take (default 120)."
    )
    temperature: float | None = Field(
        default=None, ge=0, le=2, description="openai: sampling temperature (default: the server's)."
    )
    max_output_tokens: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="openai: every request's max_tokens (default: sized from the entries each shows).",
    )
    output_mode: Literal["json_schema", "json_object", "none"] | None = Field(
        default=None,
        description="openai: structured output to ask for first (default json_schema); a server that rejects it "
        "is asked in the next mode.",
    )
    offer_singletons: bool | None = Field(
        default=None,
        description="openai: show new or changed entries that have no near-duplicate too, for the model to prune "
        "(default: in RockBot's layout yes, as RockBot's gating; in the clusters shape no, measured: small models "
        "named people and past events obsolete); false stamps them reviewed without asking.",
    )
    offer_shape: Literal["clusters", "batches"] | None = Field(
        default=None,
        description="How the offer is cut into requests: clusters (each near-duplicate component asked about on its "
        "own in a short request, lone entries reviewed for pruning apart; default) or batches (RockBot's layout).",
    )
    request_token_budget: int | None = Field(
        default=None,
        ge=256,
        le=10_000_000,
        description="openai: a request whose prompt would be larger is asked in parts, clusters kept whole "
        "(default: no limit).",
    )

    @model_validator(mode="after")
    def _model_for_openai(self) -> ProposerSpec:
        # The CEL rules above, re-checked for specs that did not come through an API server.
        if self.type == "openai" and not self.model:
            raise ValueError("proposer.model is required when type is openai")
        internal = self.base_url is not None and re.fullmatch(INTERNAL_URL, self.base_url) is not None
        if self.base_url is not None and self.base_url.startswith("http://"):
            if not self.allow_plain_http:
                raise ValueError("proposer.baseURL is plain http://: set proposer.allowPlainHTTP: true")
            if not internal:
                raise ValueError("proposer.baseURL: plain http:// only to loopback or an in-cluster Service")
        if self.type == "openai" and self.api_key_secret_ref is None and not internal:
            raise ValueError("proposer.apiKeySecretRef is required when type is openai")
        return self


class EmbeddingsSpec(KubeModel):
    """An OpenAI-compatible embeddings endpoint: vectors missing from the agent's memory are generated before
    clustering and written where RockBot's EmbeddingCache keeps them (docs/rockbot.md). It is sent memory content,
    so it is held to the same rules as an openai proposer."""

    model_config = ConfigDict(
        strict=True,
        allow_inf_nan=False,
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "!self.baseURL.startsWith('http://') || (has(self.allowPlainHTTP) && self.allowPlainHTTP)",
                    "embeddings.baseURL is plain http://: set embeddings.allowPlainHTTP: true to send memory (and "
                    "the API key) unencrypted; only to loopback or an in-cluster Service",
                ),
                cel(
                    f"!self.baseURL.startsWith('http://') || {_cel_internal('baseURL')}",
                    "embeddings.baseURL: plain http:// only to loopback or an in-cluster Service",
                ),
                cel(
                    f"has(self.apiKeySecretRef) || ({_cel_internal('baseURL')})",
                    "embeddings.apiKeySecretRef is required unless baseURL is loopback or an in-cluster Service",
                ),
            ]
        },
    )

    base_url: str = Field(
        alias="baseURL",
        min_length=1,
        max_length=2048,
        pattern=r"^https?://\S+$",
        description="Base URL of an OpenAI-compatible API with POST /embeddings (the agent's embedding model). Plain "
        "http:// only with allowPlainHTTP, and only to loopback or an in-cluster Service.",
    )
    model: str = Field(min_length=1, max_length=256, description="The embedding model's name (the agent's).")
    allow_plain_http: bool | None = Field(
        default=None, alias="allowPlainHTTP", description="Allow an http:// baseURL (loopback or in-cluster only)."
    )
    api_key_secret_ref: SecretKeySelector | None = Field(
        default=None,
        description="The API key, read only from this Secret (the admission policy requires its author may get it). "
        "Required unless baseURL is loopback or an in-cluster Service.",
    )
    timeout_seconds: float | None = Field(default=None, gt=0, le=3600, description="Seconds per request (60).")
    batch_size: int | None = Field(default=None, ge=1, le=4096, description="Texts per request (64).")

    @model_validator(mode="after")
    def _reachable(self) -> EmbeddingsSpec:
        internal = re.fullmatch(INTERNAL_URL, self.base_url) is not None
        if self.base_url.startswith("http://"):
            if not self.allow_plain_http:
                raise ValueError("embeddings.baseURL is plain http://: set embeddings.allowPlainHTTP: true")
            if not internal:
                raise ValueError("embeddings.baseURL: plain http:// only to loopback or an in-cluster Service")
        if self.api_key_secret_ref is None and not internal:
            raise ValueError("embeddings.apiKeySecretRef is required unless baseURL is loopback or in-cluster")
        return self


class RockBotSpec(KubeModel):
    """Where the agent (RockBot) keeps what dreamkeeper reads and writes beside it, and its purge window. Unset
    fields are read from the agent's appsettings*.json / rockbot.env in agentPath when present, else RockBot's
    defaults; the cycle report says which was used."""

    model_config = ConfigDict(strict=True, allow_inf_nan=False)

    profile_base: str | None = Field(
        default=None,
        min_length=1,
        max_length=1024,
        pattern=r"^/",
        description="The agent's AgentProfile:BasePath as it sees it (e.g. /data/agent): absolute paths under it "
        "are read under agentPath.",
    )
    directive_path: str | None = Field(default=None, min_length=1, max_length=1024, description="Dream:DirectivePath.")
    audit_base_path: str | None = Field(
        default=None, min_length=1, max_length=1024, description="MemoryAudit:BasePath (where its pause marker is)."
    )
    feedback_base_path: str | None = Field(
        default=None, min_length=1, max_length=1024, description="Feedback:BasePath."
    )
    archive_retention_days: float | None = Field(
        default=None,
        ge=0.0,
        le=36500.0,
        description="RockBot's Dream:MemoryArchiveRetention in days: nothing is purged before it (0: nothing at all).",
    )
    read_agent_settings: bool | None = Field(
        default=None, description="Read the agent's appsettings*.json and rockbot.env in agentPath (default true)."
    )
    pass_ledger: bool | None = Field(
        default=None, description="Record each cycle in RockBot's dream-pass-ledger.json (default true)."
    )
    hold_ahead_days: float | None = Field(
        default=None,
        ge=0.0,
        le=36500.0,
        description="Days before RockBot's purge window closes that an archived entry dreamkeeper keeps is held above "
        "RockBot's floor (default 7).",
    )


class FloorSpec(KubeModel):
    """Entries at or above either bound are never pruned standalone and never purged."""

    model_config = ConfigDict(strict=True, allow_inf_nan=False)

    importance: float | None = Field(default=None, ge=0.0, le=2.0, description="Importance floor (default 0.80).")
    reinforcement: int | None = Field(
        default=None, ge=0, le=1_000_000_000, description="Reinforcement-count floor (default 5)."
    )


class DecaySpec(KubeModel):
    """Importance decay, RockBot's pass: an entry not seen for graceDays loses importance with a half-life, never
    below the floor. Unset fields keep RockBot's defaults (on, 30 days, 45 days, 0.10)."""

    enabled: bool | None = Field(default=None, description="Decay importance at all (default true).")
    grace_days: float | None = Field(
        default=None, ge=0.0, le=36500.0, description="Days since an entry was last seen before it decays (30)."
    )
    half_life_days: float | None = Field(
        default=None, ge=0.0, le=36500.0, description="Days for importance to halve (45; 0 turns decay off)."
    )
    floor: float | None = Field(default=None, ge=0.0, le=1.0, description="Decay never goes below (0.10).")
    min_step: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="An entry is rewritten once its importance has fallen this much (default 0: every drop, as "
        "RockBot; 0.01 writes about a fifth as often).",
    )


class SafeguardsSpec(KubeModel):
    """The cycle's deterministic safeguards. Unset fields keep the engine's defaults."""

    # Strict, as the cycle's settings are (consolidation/settings.py): `retentionDays: true` read as 1 day would purge
    # what was archived the day before yesterday. The API server checks the types too; the operator never relaxes them.
    model_config = ConfigDict(strict=True, allow_inf_nan=False)

    retention_days: int | None = Field(
        default=None, ge=0, le=36500, description="Days an archived entry is kept before purge (0 = forever)."
    )
    floor: FloorSpec | None = None
    protected_categories: list[Annotated[str, Field(min_length=1, max_length=253)]] | None = Field(
        default=None,
        max_length=128,
        description="Category globs never pruned standalone; 'a/**' covers a and everything below it.",
    )
    similarity_threshold: float | None = Field(
        default=None, gt=0.0, le=1.0, description="Near-duplicate similarity threshold (default 0.88)."
    )
    max_cluster_size: int | None = Field(
        default=None, ge=0, le=64, description="Largest near-duplicate cluster offered at once (0 disables)."
    )
    min_interval_hours: float | None = Field(
        default=None, ge=0.0, le=8760.0, description="Minimum hours between completed cycles (default 6)."
    )
    archive_cap: float | None = Field(
        default=None,
        gt=0.0,
        le=1.0,
        description="Blast radius: a plan taking more than this fraction of the live corpus out (merge sources and "
        "prunes, minus the successors) is held for approval instead of applied (default 0.10: RockBot's audit "
        "calls a larger live drop a loss; 1 turns the hold off).",
    )
    archive_cap_min_entries: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="Blast radius: a plan is held only when it takes at least this many entries out (default 10).",
    )
    prune_census: Literal["identity", "all", "off"] | None = Field(
        default=None,
        description="A prune that makes a specific vanish from the live corpus is refused when it is an identity "
        "specific: a name, acronym, e-mail, phone or account id (identity, the default), any specific (all), or "
        "never, only counted (off).",
    )
    decay: DecaySpec | None = None
    cluster_split: Literal["rockbot", "neighbours"] | None = Field(
        default=None,
        description="How an over-large cluster is split: rockbot (fixed chunks in id order, RockBot's cluster "
        "identities and decline stamps; default) or neighbours (each entry kept beside a near-duplicate).",
    )
    cluster_tokens: Literal["rockbot", "unicode"] | None = Field(
        default=None,
        description="Words compared for near-duplicates: rockbot (RockBot's ASCII words; default) or unicode "
        "(every script, so non-Latin text clusters too, at the cost of RockBot-compatible cluster identities).",
    )
    subsume: bool | None = Field(
        default=None,
        description="Settle a near-duplicate cluster without the model when one member holds every specific of the "
        "others (and no newer member may be news): the others are archived merged into it (default true).",
    )
    sourceless_saves_max_per_cycle: int | None = Field(
        default=None,
        ge=0,
        le=100_000,
        description="Source-less saves (a new entry written from the feedback shown, as RockBot's directive asks) "
        "accepted per cycle (default 5; 0 refuses them).",
    )
    scope: Literal["corpus", "rockbot"] | None = Field(
        default=None,
        description="Entries a cycle folds, decays and offers: corpus (every live entry; default) or rockbot "
        "(RockBot's snapshot: the 1000 most recently seen; older ones keep their importance and are never offered).",
    )


MemoryFormatName = Literal["rockbot", "openclaw", "hermes", "claude"]
FilePattern = Annotated[str, Field(min_length=1, max_length=256)]


class FormatProfileSpec(KubeModel):
    """What a deployment changes of a Markdown format's shipped profile (docs/formats.md). Unset fields keep it."""

    model_config = ConfigDict(strict=True)

    memory_dir: str | None = Field(
        default=None,
        max_length=1024,
        pattern=AGENT_PATH,
        description="The agent's memory directory relative to agentPath (openclaw: workspace, hermes: memories, "
        "claude: memory).",
    )
    caps: dict[FilePattern, Annotated[int, Field(ge=1, le=10_000_000)]] | None = Field(
        default=None,
        max_length=16,
        description="Character caps by file pattern, e.g. MEMORY.md: 12000 (openclaw 10000 and 4000 for "
        "USER.md; hermes 2200 and 1375). A rewrite never takes a file over its cap.",
    )
    append_only_logs: bool | None = Field(
        default=None,
        description="openclaw: daily notes are append-only logs, never rewritten (default true; false lets a "
        "cycle take consolidated lines out of past days).",
    )


WorkloadKind = Literal["Deployment", "StatefulSet"]
Coordination = Literal["Stop", "RestartAfter", "None"]


class WorkloadReference(KubeModel):
    """An apps/v1 Deployment or StatefulSet in the DreamSchedule's namespace."""

    kind: WorkloadKind = Field(description="Deployment or StatefulSet (apps/v1).")
    name: str = Field(
        min_length=1, max_length=253, pattern=DNS_SUBDOMAIN, description="Name of the workload (same namespace)."
    )


class AgentSpec(KubeModel):
    """The agent's own workload, and how a cycle coordinates with it.

    An agent that caches its memory (RockBot loads its index once and writes its cached copies back) must not
    run while a cycle changes its files, or must reload them afterwards.
    """

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "!has(self.scaleDownTimeoutSeconds) || !has(self.maxDowntimeSeconds) || "
                    "self.scaleDownTimeoutSeconds < self.maxDowntimeSeconds",
                    "agent.scaleDownTimeoutSeconds must be below agent.maxDowntimeSeconds",
                )
            ]
        }
    )

    workload_ref: WorkloadReference = Field(description="The Deployment or StatefulSet running the agent.")
    coordination: Coordination = Field(
        default="Stop",
        description="Stop (default): record the replicas, scale the workload to 0, wait until no pod mounts the "
        "claim, run the cycle, restore the recorded replicas (also when the cycle fails or is deleted). "
        "RestartAfter: run beside the agent, then restart the workload (like kubectl rollout restart) when the "
        "cycle changed anything, so the agent reloads its memory. None: for agents that re-read their files.",
    )
    scale_down_timeout_seconds: int = Field(
        default=300,
        ge=10,
        le=3600,
        description="Stop: how long to wait for the agent's pods to go after the scale-down; then the replicas "
        "are restored and no cycle runs.",
    )
    max_downtime_seconds: int = Field(
        default=1800,
        ge=60,
        le=86400,
        description="Stop: the longest the agent is kept down, from the scale-down request to the restore: the "
        "cycle's activeDeadlineSeconds is cut to what is left of it.",
    )

    @model_validator(mode="after")
    def _timeouts_nest(self) -> AgentSpec:
        if self.scale_down_timeout_seconds >= self.max_downtime_seconds:
            raise ValueError("agent.scaleDownTimeoutSeconds must be below agent.maxDowntimeSeconds")
        return self


class DreamScheduleSpec(KubeModel):
    """When and how to consolidate one agent's memory on its PersistentVolumeClaim."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "!has(self.formatProfile) || self.format != 'rockbot'",
                    "formatProfile is for a Markdown format (openclaw, hermes, claude), not rockbot",
                )
            ]
        }
    )

    schedule: str = Field(
        min_length=1, max_length=128, pattern=CRON, description="Cron schedule (5 fields or @daily, @hourly, ...)."
    )
    time_zone: str = Field(
        default="UTC",
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9_+\-/]+$",
        description="IANA time zone of the schedule (default UTC).",
    )
    suspend: bool = Field(default=False, description="Skip scheduled slots (a runNowToken still runs).")
    starting_deadline_seconds: int | None = Field(
        default=None,
        ge=0,
        le=31_536_000,
        description="A slot later than this many seconds is recorded as missed instead of run (default: none).",
    )
    claim_name: str = Field(
        min_length=1,
        max_length=253,
        pattern=DNS_SUBDOMAIN,
        description="The agent's PersistentVolumeClaim (immutable). The cycle runs on the node that mounts it.",
        json_schema_extra={"x-kubernetes-validations": [cel("self == oldSelf", "claimName is immutable")]},
    )
    agent_path: str = Field(
        default="agent",
        max_length=1024,
        pattern=AGENT_PATH,
        description="Agent data directory inside the volume (memory under <agentPath>/memory).",
    )
    agent_selector: LabelSelector | None = Field(
        default=None, description="Labels of the agent's pods, to find the node mounting the claim quickly."
    )
    vocabulary_ref: LocalObjectReference | None = Field(
        default=None,
        description="MemoryVocabulary seeded into the volume when the file is absent (never overwritten).",
    )
    agent: AgentSpec | None = Field(
        default=None,
        description="The agent's workload and how cycles coordinate with it (default policy Stop). Without it "
        "the cycle runs beside whatever mounts the claim.",
    )
    proposer: ProposerSpec = Field(default_factory=ProposerSpec)
    embeddings: EmbeddingsSpec | None = Field(
        default=None, description="An embeddings endpoint that fills in missing vectors (default: none)."
    )
    rockbot: RockBotSpec | None = Field(
        default=None, description="The agent's (RockBot's) paths and purge window, where they are not its defaults."
    )
    safeguards: SafeguardsSpec | None = None
    format: MemoryFormatName = Field(
        default="rockbot",
        description="How the agent keeps its memory: rockbot (one JSON file per entry under <agentPath>/memory), "
        "openclaw (<agentPath> is OpenClaw's state directory: workspace/MEMORY.md, USER.md, memory/YYYY-MM-DD.md), "
        "hermes (<agentPath> is HERMES_HOME: memories/MEMORY.md, USER.md) or claude (one file per memory under "
        "<agentPath>/memory with a MEMORY.md index). See docs/formats.md.",
    )
    format_profile: FormatProfileSpec | None = Field(
        default=None, description="A Markdown format's profile fields (not for rockbot)."
    )

    @model_validator(mode="after")
    def _profile_of_a_markdown_format(self) -> DreamScheduleSpec:
        if self.format_profile is not None and self.format == "rockbot":
            raise ValueError("formatProfile is for a Markdown format (openclaw, hermes, claude), not rockbot")
        return self

    image: str | None = Field(
        default=None,
        min_length=1,
        max_length=512,
        pattern=r"^\S+$",
        description="Cycle image (default: the operator's setting). The admission policy requires its author may "
        "create pods in the namespace, or that the image is an allowed one (an exact reference, or under an "
        "allowed prefix ending in '/', ':' or '@').",
    )
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = Field(
        default=None, description="Pull policy of the cycle image (default: the operator's setting)."
    )
    resources: ResourceRequirementsSpec | None = Field(
        default=None, description="Compute resources of the cycle's containers (default: requests 50m CPU, 128Mi)."
    )
    security_context: CycleSecurityContext | None = Field(
        default=None,
        description="Identity of the cycle's pod (default: the agent pod's; with no agent pod, the image's user "
        "with an fsGroup of the same id).",
    )
    active_deadline_seconds: int = Field(
        default=3600, ge=60, le=604800, description="A cycle running longer than this is stopped and marked failed."
    )
    successful_jobs_history_limit: int = Field(
        default=3, ge=0, le=100, description="Finished, counted successful Jobs kept (the oldest are deleted)."
    )
    failed_jobs_history_limit: int = Field(
        default=1, ge=0, le=100, description="Finished, counted failed Jobs kept (the oldest are deleted)."
    )
    run_now_token: str | None = Field(
        default=None,
        min_length=1,
        max_length=253,
        description="Set to a new value to run one cycle now (also when suspended); handled once per value.",
    )
    approve_hold: str | None = Field(
        default=None,
        min_length=1,
        max_length=128,
        pattern=r"^[A-Za-z0-9_.:-]+$",
        description="The cycle id of a plan held over the blast-radius cap (condition/Event ArchivesHeld): the next "
        "cycle applies it if the corpus is unchanged (set a new runNowToken to run it now).",
    )


class JobRef(StatusModel):
    """The cycle Job running now."""

    name: str = Field(max_length=63, description="The Job's name.")
    uid: str = Field(max_length=64, description="The Job's uid.")
    trigger: Literal["schedule", "run-now"] = Field(description="What started it: a cron slot or a runNowToken.")
    slot: datetime = Field(description="The slot it runs for (the run-now time for a runNowToken).")
    created_at: datetime | None = Field(default=None, description="When the Job was created.")


class VocabularyState(StatusModel):
    """What the init container found in the volume on the last run, against the CR's rendered file."""

    result: Literal["created", "already-present", "failed"] = Field(description="What seeding did.")
    sha256: str | None = Field(default=None, max_length=64, description="sha256 of the file in the volume.")
    expected_sha256: str | None = Field(default=None, max_length=64, description="sha256 the CR renders to.")
    job_name: str | None = Field(default=None, max_length=63, description="The Job whose init container said so.")
    message: str | None = Field(default=None, max_length=1024, description="What seeding reported.")


def count_fields(*, summed: bool = False) -> dict[str, Any]:
    """The cycle counts a Job's run carries (``summed``: those a schedule adds into its totals, under their
    status.totals keys), as pydantic field definitions — from the one table, ``consolidation/counts.py``."""
    fields: dict[str, Any] = {}
    for count in COUNTS:
        if not (count.summed if summed else count.in_run):
            continue
        if count.state:  # unknown (absent) when the run left no report
            fields[count.name] = (int | None, Field(default=None, ge=0, description=count.description))
            continue
        alias = count.totals_key if summed else None  # None: the camelCase of the name
        fields[count.name] = (int, Field(default=0, ge=0, alias=alias, description=count.description))
    return fields


class RunSummaryBase(StatusModel):
    """The last finished cycle, from its container's termination message."""

    job_name: str = Field(max_length=63, description="The cycle's Job.")
    job_uid: str = Field(max_length=64, alias="jobUID", description="The Job's uid (counted once).")
    trigger: Literal["schedule", "run-now"] = Field(description="What started it: a cron slot or a runNowToken.")
    slot: datetime | None = Field(default=None, description="The slot it ran for.")
    result: Literal["completed", "skipped", "failed", "proposer-failed"] = Field(
        description="completed, skipped, failed, or proposer-failed (the cycle ran; no usable reply from the model)."
    )
    reason: str = Field(max_length=128, pattern=CONDITION_REASON, description="Why, in one CamelCase word.")
    started_at: datetime | None = Field(default=None, description="When the cycle started.")
    first_write_at: datetime | None = Field(
        default=None, description="When the cycle first wrote under memory/ (absent: it wrote nothing)."
    )
    finished_at: datetime | None = Field(default=None, description="When it finished.")
    duration_seconds: float | None = Field(default=None, ge=0, description="How long it took.")
    cycle_id: str | None = Field(
        default=None, max_length=128, description="The cycle's id: its report is .dreamkeeper/cycles/<id>.json."
    )
    skip_reason: str | None = Field(default=None, max_length=1024, description="Why it was skipped.")
    error: str | None = Field(default=None, max_length=1024, description="Why it failed.")


class AgentStop(StatusModel):
    """A Stop in progress; the workload carries the same record in its ``dreamkeeper.io/agent-stop`` annotation."""

    kind: WorkloadKind = Field(description="The stopped workload's kind.")
    name: str = Field(max_length=253, description="The stopped workload's name.")
    replicas: int = Field(ge=0, description="Replicas recorded before the scale-down; restored after the cycle.")
    phase: Literal["Stopping", "CycleRunning", "Restored"] = Field(
        description="Stopping: scaling down, waiting until no pod mounts the claim. CycleRunning: the cycle Job "
        "exists. Restored: the replicas are back; the record is being released."
    )
    stopped_at: datetime = Field(description="When the stop began (the downtime bound counts from here).")
    job_name: str = Field(max_length=63, description="The cycle Job this stop is for.")
    trigger: Literal["schedule", "run-now"] = Field(description="What asked for the cycle.")
    slot: datetime = Field(description="The slot (or the run-now time) of the cycle.")
    run_now_token: str | None = Field(default=None, max_length=253, description="The runNowToken it handles.")
    cycle_started_at: datetime | None = Field(default=None, description="When the cycle Job was created.")
    restored_at: datetime | None = Field(default=None, description="When the replicas were restored.")
    reason: str | None = Field(
        default=None, max_length=128, pattern=CONDITION_REASON, description="Why the stop ended (Restored)."
    )


class AgentStopSummary(StatusModel):
    """The last finished Stop."""

    job_name: str = Field(max_length=63, description="The cycle Job the agent was stopped for.")
    replicas: int = Field(ge=0, description="Replicas restored.")
    stopped_at: datetime = Field(description="When the stop began.")
    restored_at: datetime = Field(description="When the replicas were restored.")
    downtime_seconds: float = Field(ge=0, description="From the scale-down request to the restore.")
    reason: str = Field(max_length=128, pattern=CONDITION_REASON, description="CycleFinished, or why not.")


class AgentRestart(StatusModel):
    """RestartAfter: a restart of the agent's workload after a cycle that changed its files."""

    job_name: str = Field(max_length=63, description="The cycle that changed the files.")
    cycle_started_at: datetime | None = Field(
        default=None, description="When that cycle started (its first write is after this)."
    )
    first_write_at: datetime | None = Field(
        default=None, description="When that cycle first wrote under memory/: the agent's index is stale from then."
    )
    requested_at: datetime = Field(description="The kubectl.kubernetes.io/restartedAt value (once per cycle).")
    restarted_at: datetime | None = Field(default=None, description="When the workload was patched.")
    window_seconds: float | None = Field(
        default=None,
        ge=0,
        description="From the cycle's first write (else its start) to the restart: the agent ran on a stale index.",
    )


class AgentStatus(StatusModel):
    """Coordination with the agent's workload (``spec.agent``)."""

    stop: AgentStop | None = Field(default=None, description="The Stop in progress.")
    last_stop: AgentStopSummary | None = Field(default=None, description="The last finished Stop.")
    pending_restart: AgentRestart | None = Field(default=None, description="RestartAfter: a restart not done yet.")
    last_restart: AgentRestart | None = Field(default=None, description="RestartAfter: the last restart done.")


class TotalsBase(StatusModel):
    """Cumulative counts over every counted cycle (each Job counted exactly once, by UID)."""

    cycles_completed: int = Field(default=0, ge=0, description="Cycles completed.")
    cycles_skipped: int = Field(default=0, ge=0, description="Cycles skipped (too soon, lock held).")
    cycles_failed: int = Field(default=0, ge=0, description="Cycles failed.")
    cycles_proposer_failed: int = Field(
        default=0, ge=0, description="Cycles that ran but got no usable reply from the proposer."
    )
    missed_slots: int = Field(
        default=0, ge=0, description="Slots that passed without a run (operator down, past the deadline)."
    )
    skipped_slots: dict[str, Annotated[int, Field(ge=0)]] = Field(
        default_factory=dict, max_length=16, description="Slots skipped, by reason (suspended, concurrent, ...)."
    )


# The counts are fields of these models, made from the table at import; the type checker knows the bases (code
# here reads counts through the table, by name).
if TYPE_CHECKING:
    RunSummary = RunSummaryBase
    Totals = TotalsBase
else:
    RunSummary = create_model(
        "RunSummary", __base__=RunSummaryBase, __module__=__name__, __doc__=RunSummaryBase.__doc__, **count_fields()
    )
    Totals = create_model(
        "Totals", __base__=TotalsBase, __module__=__name__, __doc__=TotalsBase.__doc__, **count_fields(summed=True)
    )


MAX_COUNTED_UIDS = 32


class DreamScheduleStatus(StatusModel):
    """What the operator observed and did."""

    observed_generation: int | None = Field(default=None, ge=0, description="The generation last acted on.")
    conditions: Conditions | None = None
    last_schedule_time: datetime | None = Field(
        default=None, description="The latest slot acted on (run, skipped or missed); the next slot follows it."
    )
    next_schedule_time: datetime | None = Field(default=None, description="The next cron slot.")
    last_run_now_token: str | None = Field(default=None, max_length=253, description="The last runNowToken handled.")
    active_job: JobRef | None = None
    last_run: RunSummary | None = None
    last_successful_time: datetime | None = Field(default=None, description="When a cycle last succeeded.")
    totals: Totals | None = None
    counted_job_uids: list[Annotated[str, Field(max_length=64)]] | None = Field(
        default=None,
        alias="countedJobUIDs",
        max_length=MAX_COUNTED_UIDS,
        description="Recently counted Job UIDs (never counted twice).",
    )
    vocabulary: VocabularyState | None = None
    agent: AgentStatus | None = Field(default=None, description="Coordination with the agent's workload.")


# ---- MemoryVocabulary -------------------------------------------------------------------------------------------

Word = Annotated[str, Field(min_length=1, max_length=128, pattern=WORD)]


class MemoryVocabularySpec(KubeModel):
    """merge-coverage-vocabulary.json for the agents that reference it (seeded once, never overwritten)."""

    extra_common_words: list[Word] = Field(
        default_factory=list, max_length=4096, description="Ordinary words here that are not specifics."
    )
    always_specific_words: list[Word] = Field(
        default_factory=list,
        max_length=4096,
        description="Names that collide with common words (May, Will, Rose); always protected.",
    )
    numeric_exempt_categories: list[Annotated[str, Field(min_length=1, max_length=253, pattern=CATEGORY_PATH)]] = Field(
        default_factory=list, max_length=256, description="Categories whose numbers are incidental."
    )


class MemoryVocabularyStatus(StatusModel):
    """The render and whether it could be published."""

    observed_generation: int | None = Field(default=None, ge=0, description="The generation last rendered.")
    conditions: Conditions | None = None
    sha256: str | None = Field(default=None, max_length=64, description="sha256 of the rendered file.")
    config_map_name: str | None = Field(default=None, max_length=253, description="The ConfigMap holding it.")
    common_words: int | None = Field(default=None, ge=0, description="extraCommonWords after de-duplication.")
    specific_words: int | None = Field(default=None, ge=0, description="alwaysSpecificWords after de-duplication.")
    exempt_categories: int | None = Field(
        default=None, ge=0, description="numericExemptCategories after de-duplication."
    )
