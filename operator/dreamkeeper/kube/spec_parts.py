"""The parts of a DreamSchedule's spec (proposer, embeddings, RockBot, safeguards, format profile): split from
``models.py`` by concern so each module stays readable; ``models`` re-exports them."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, model_validator

from dreamkeeper.kube.model_base import KubeModel, cel
from dreamkeeper.kube.patterns import (
    AGENT_PATH,
    DNS_SUBDOMAIN,
    INTERNAL_URL,
)


class LocalObjectReference(KubeModel):
    """A reference to an object in the same namespace."""

    name: str = Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN, description="Name of the object.")


class SecretKeySelector(KubeModel):
    """A key of a Secret in the DreamSchedule's namespace."""

    name: str = Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN, description="Name of the Secret.")
    key: str = Field(
        min_length=1, max_length=253, pattern=r"^[-._a-zA-Z0-9]+$", description="Key inside the Secret's data."
    )


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
    specifics_links: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Entries naming the same rare specifics (two or more, idf-weighted Jaccard at least this) are "
        "offered together even when their wording is not near, and an over-large cluster is cut along such links "
        "(default 0.5; 0: RockBot's lexical clusters only). A link only puts entries before the model.",
    )
    offer_new_clusters: bool | None = Field(
        default=None,
        description="A cluster of reviewed entries never shown together as that cluster is offered at once "
        "(default true); false: RockBot's rule, after the reopen wait (7 days, doubling).",
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
