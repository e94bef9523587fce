"""Cycle settings: every safeguard's dial, with RockBot's defaults where it has one.

Strict, because a lax reading loses data: ``{"retention_days": true}`` read as 1 day purges what was archived two
days ago. A boolean is not a number, a string is not a number, nothing is infinite or NaN, every duration and count
has a bound (so no date arithmetic can overflow mid-cycle), and an unknown key is an error. The whole object is
validated before anything runs.
"""

from __future__ import annotations

import fnmatch
from datetime import timedelta
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from dreamkeeper.coverage import VOCABULARY_FILE
from dreamkeeper.memory import HighValueFloor

MAX_DAYS = 36_500  # a century: any longer is "forever", which 0 already says where it applies
MAX_HOURS = 8_760  # a year between cycles
MAX_PER_CYCLE = 100_000
MAX_LIST = 256
MAX_TEXT = 4_096


class DecaySettings(BaseModel):
    """Importance decay, RockBot's pass (DreamService ``RunImportanceDecayPassAsync``, DreamOptions defaults,
    MarimerLLC/rockbot@05346ff0): an entry not seen for ``grace_days`` loses importance with a half-life of
    ``half_life_days``, never below ``floor``. ``enabled=False`` (or a half-life of 0, RockBot's off) stops it."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    enabled: bool = True
    grace_days: float = Field(default=30.0, ge=0.0, le=MAX_DAYS)
    half_life_days: float = Field(default=45.0, ge=0.0, le=MAX_DAYS)
    floor: float = Field(default=0.10, ge=0.0, le=1.0)
    # 0 (the default): every drop is written, as RockBot's pass does (``if (newImportance >= entry.ImportanceScore)
    # continue;`` and nothing else, DreamService.cs @05346ff0), so the importance on disk is always the one RockBot
    # would hold. A positive value is the frugal mode: an entry is rewritten only once its importance has fallen by
    # this much since its last write (or it reaches the decay floor, or leaves the high-value floor); decay is
    # anchored on updatedAt, so waiting changes no value, only when it is written (about a fifth of the writes
    # in the year simulation at 0.01, with what is on disk lagging RockBot's by less than that).
    min_step: float = Field(default=0.0, ge=0.0, le=1.0)

    @property
    def active(self) -> bool:
        return self.enabled and self.half_life_days > 0


class RockBotSettings(BaseModel):
    """Where RockBot keeps what dreamkeeper reads and writes beside it, and what its purge and audit do.

    Each value unset here is read from the agent's own configuration when it is visible (``appsettings*.json`` or
    ``rockbot.env`` in the agent directory, or dreamkeeper's environment: agent_config.py), else RockBot's default.
    Paths are as the agent sees them: relative to its profile directory (the agent directory), or absolute under
    ``profile_base`` (RockBot's ``AgentProfile:BasePath``, e.g. ``/data/agent``), which maps onto the agent
    directory here."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    profile_base: str | None = Field(default=None, min_length=1, max_length=MAX_TEXT, pattern=r"^/[^\x00]*$")
    directive_path: str | None = Field(default=None, min_length=1, max_length=MAX_TEXT, pattern=r"^[^\x00]*$")
    audit_base_path: str | None = Field(default=None, min_length=1, max_length=MAX_TEXT, pattern=r"^[^\x00]*$")
    feedback_base_path: str | None = Field(default=None, min_length=1, max_length=MAX_TEXT, pattern=r"^[^\x00]*$")
    # RockBot's Dream:MemoryArchiveRetention, in days (0: its purge is off, and its audit then counts every purge
    # as a hard delete). The purge never deletes before that window has closed (purge_policy.py).
    archive_retention_days: float | None = Field(default=None, ge=0.0, le=MAX_DAYS)
    read_agent_settings: bool = True  # read appsettings*.json / rockbot.env / the environment (agent_config.py)
    pass_ledger: bool = True  # record each cycle in RockBot's dream-pass-ledger.json (pass_ledger.py)
    # An archived entry dreamkeeper keeps past retention is held above RockBot's high-value floor this long before
    # RockBot's own purge could reach it (purge_policy.py). 7: the audit's purge outlook window (PurgeWarningDays).
    hold_ahead_days: float = Field(default=7.0, ge=0.0, le=MAX_DAYS)
    # Where RockBot's audit state is visible, never take the live corpus down further than its loss alert allows
    # between two of its runs (pacing.py).
    pace_audit_loss: bool = True


ClusterTokens = Literal["rockbot", "unicode"]
ClusterSplit = Literal["rockbot", "neighbours"]

PruneCensus = Literal["identity", "all", "off"]
# How the offer is cut into requests (gating.make_batches): "clusters" asks about one near-duplicate component at a
# time (every chunk of it in the one request) and batches the lone entries for prune review apart; "batches" is
# RockBot's layout, whole components packed with lone entries into batches of batch_max_entries.
OfferShape = Literal["clusters", "batches"]


class CycleSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    similarity_threshold: float = Field(default=0.88, gt=0.0, le=1.0)
    # RockBot's ConsolidationMaxClusterSize (3), split and tokens by default: its cluster identities, so decline
    # stamps written by either engine stay meaningful to the other (docs/rockbot.md).
    max_cluster_size: int = Field(default=3, ge=0, le=64)
    cluster_split: ClusterSplit = "rockbot"
    cluster_tokens: ClusterTokens = "rockbot"
    same_category_clusters: bool = False
    # Entries naming the same rare specifics (two or more, idf-weighted Jaccard at least this) are offered together
    # even when their wording is not a near-duplicate, and an over-large component is cut along such links
    # (clustering/specifics_links.py; 0 turns it off). Measured on the sample (bench/results/dream-ceiling.md).
    # A link never makes two entries near-duplicates for subsumption: a model decides, the coverage check guards.
    specifics_links: float = Field(default=0.5, ge=0.0, le=1.0)
    # corpus: fold, decay and offer every live entry; rockbot: RockBot's snapshot, the 1,000 most recently seen
    # (scope.py says what each means for decay and the floor).
    scope: Literal["corpus", "rockbot"] = "corpus"
    decay: DecaySettings = Field(default_factory=DecaySettings)
    floor: HighValueFloor = Field(default_factory=HighValueFloor)
    protected_categories: list[Annotated[str, Field(max_length=MAX_TEXT)]] = Field(
        default_factory=lambda: ["user-preferences/**"], max_length=MAX_LIST
    )
    retention_days: int = Field(default=90, ge=0, le=MAX_DAYS)
    min_interval_hours: float = Field(default=6.0, ge=0.0, le=MAX_HOURS)
    repair_max_per_cycle: int = Field(default=10, ge=0, le=MAX_PER_CYCLE)
    reopen_interval_days: float = Field(default=7.0, ge=0.0, le=MAX_DAYS)
    reopen_max_interval_days: float = Field(default=56.0, ge=0.0, le=MAX_DAYS)
    reopen_max_per_cycle: int = Field(default=10, ge=0, le=MAX_PER_CYCLE)
    # A cluster of reviewed entries that were never shown together as that cluster (no member carries its decline
    # stamp) is offered at once, within reopen_max_per_cycle, instead of after reopen_interval_days (RockBot's
    # wait). False: RockBot's rule. Measured on the sample (bench/results/dream-ceiling.md).
    offer_new_clusters: bool = True
    exact_fold: bool = True
    # Categories the exact-duplicate fold never touches (their own passes act on them by id), with RockBot's two
    # rules (``IsExactDuplicateEligible``, DreamService.cs @05346ff0): ``feedback`` and ``claim/capability`` are
    # compared ordinally, the category itself or below it (``FeedbackMemoryCategories.IsFeedbackMemory`` @d425b9b4,
    # ``CapabilityClaimCategories.IsCapabilityClaim`` @e9c6443b: "Feedback/x" is folded there); ``observation/
    # theory/`` is a prefix of the trimmed category, ignoring case (so " Observation/Theory/x" is excluded, and
    # "observation/theory" itself is not).
    fold_excluded_prefixes: list[Annotated[str, Field(max_length=MAX_TEXT)]] = Field(
        default_factory=lambda: ["feedback", "claim/capability"], max_length=MAX_LIST
    )
    fold_excluded_prefixes_ignore_case: list[Annotated[str, Field(max_length=MAX_TEXT)]] = Field(
        default_factory=lambda: ["observation/theory/"], max_length=MAX_LIST
    )
    vocabulary_path: str = Field(default=VOCABULARY_FILE, min_length=1, max_length=MAX_TEXT, pattern=r"^[^\x00]*$")
    batch_max_entries: int = Field(default=40, ge=2, le=1_000_000)
    # Measured on the sample with Qwen2.5-Coder 1.5B (bench/results/dream-table.md): one short question per
    # near-duplicate component got merges where 40-entry batches got "nothing to do".
    offer_shape: OfferShape = "clusters"
    # Inside a near-duplicate cluster, a member holding every specific of the others (and newer than any other that
    # says more than it) takes them in with no model asked (subsume.py). False: every cluster goes to the model.
    subsume: bool = True
    # The blast radius (blast.py): a plan taking more than this fraction of the live corpus out (and at least
    # archive_cap_min_entries) waits for a human. 0.10: RockBot's audit calls a larger live drop a loss alert.
    archive_cap: float = Field(default=0.10, gt=0.0, le=1.0)
    archive_cap_min_entries: int = Field(default=10, ge=1, le=MAX_PER_CYCLE)
    # A prune that makes a specific vanish from the live corpus: refused when it is an identity specific (name,
    # e-mail, phone, account id...; "identity"), any specific ("all"), or only counted ("off").
    prune_census: PruneCensus = "identity"
    # Entries whose batch got unusable replies twice in a row wait this long, doubling (backoff.py); 0 = never.
    unusable_backoff_days: float = Field(default=1.0, ge=0.0, le=MAX_DAYS)
    # The clock check (clock.py): purge and decay are refused when the clock is more than this past the newest
    # ledger/journal time (a clock jumped ahead would purge early); 0 = no such bound. Longer than the schedule's
    # period: a weekly schedule needs more than 7.
    clock_max_gap_days: float = Field(default=7.0, ge=0.0, le=MAX_DAYS)
    # Source-less toSave items (sourceless.py): saved, as RockBot does, at most this many a cycle; 0 refuses them.
    sourceless_saves_max_per_cycle: int = Field(default=5, ge=0, le=MAX_PER_CYCLE)
    rockbot: RockBotSettings = Field(default_factory=RockBotSettings)

    @field_validator("protected_categories")
    @classmethod
    def _globs(cls, value: list[str]) -> list[str]:
        return [v.strip().strip("/") if not v.strip().endswith("/**") else v.strip() for v in value if v.strip()]

    @property
    def retention(self) -> timedelta | None:
        return timedelta(days=self.retention_days) if self.retention_days > 0 else None

    @property
    def min_interval(self) -> timedelta:
        return timedelta(hours=self.min_interval_hours)

    def is_protected_category(self, category: str | None) -> bool:
        """Glob match on the category path; ``a/**`` covers ``a`` itself and everything below it."""
        if category is None:
            return False
        for pattern in self.protected_categories:
            if pattern.endswith("/**") and (category == pattern[:-3] or category.startswith(pattern[:-2])):
                return True
            if fnmatch.fnmatchcase(category, pattern):
                return True
        return False

    def is_fold_excluded(self, category: str | None) -> bool:
        if category is None:
            return False
        if any(category == p or category.startswith(p + "/") for p in self.fold_excluded_prefixes):
            return True
        trimmed = category.strip().casefold()
        return any(trimmed.startswith(p.casefold()) for p in self.fold_excluded_prefixes_ignore_case)
