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
    # An entry is rewritten only once its importance has fallen by this much since its last write (or it reaches
    # the decay floor, or leaves the high-value floor). RockBot rewrites every decaying entry on every pass (about
    # two thirds of a mature corpus, twice a day); decay is anchored on updatedAt, so waiting changes no value,
    # only when it is written. 0.01 is the precision the model is shown (importance=0.00). 0: RockBot's cadence.
    min_step: float = Field(default=0.01, ge=0.0, le=1.0)

    @property
    def active(self) -> bool:
        return self.enabled and self.half_life_days > 0


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
    exact_fold: bool = True
    fold_excluded_prefixes: list[Annotated[str, Field(max_length=MAX_TEXT)]] = Field(
        default_factory=lambda: ["feedback", "claim/capability", "observation/theory"], max_length=MAX_LIST
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
        lowered = category.lower()
        return any(lowered == p or lowered.startswith(p + "/") for p in self.fold_excluded_prefixes)
