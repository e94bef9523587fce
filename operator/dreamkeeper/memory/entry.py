"""The memory entry: one JSON file per memory, in RockBot's on-disk format.

RockBot writes camelCase, indented JSON with nulls, and reads case-insensitively. dreamkeeper rewrites files the
agent owns, so an entry remembers the exact JSON object it was read from and, on rewrite, keeps every value whose
meaning did not change (unknown fields, unknown metadata keys, 7-digit .NET fractions, key order) as it was.
"""

from __future__ import annotations

import copy
import json
import math
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

# Metadata keys written by RockBot and dreamkeeper. Bookkeeping keys are never copied between entries.
MERGED_FROM = "mergedFrom"
MERGED_AT = "mergedAt"
FOLDED_FROM = "foldedFrom"
FOLDED_AT = "foldedAt"
REVIEWED_HASH = "consolidationReviewedHash"
REVIEWED_AT = "consolidationReviewedAt"
REJECTED_CLUSTER = "consolidationRejectedCluster"
REJECTED_AT = "consolidationRejectedAt"
DECLINED_CLUSTER = "consolidationDeclinedCluster"
DECLINED_AT = "consolidationDeclinedAt"
DECLINED_COUNT = "consolidationDeclinedCount"
ARCHIVED_BY_CYCLE = "dreamkeeperArchivedByCycle"
CREATED_BY_CYCLE = "dreamkeeperCreatedByCycle"
BOOKKEEPING_KEYS = frozenset(
    {
        MERGED_FROM,
        MERGED_AT,
        FOLDED_FROM,
        FOLDED_AT,
        REVIEWED_HASH,
        REVIEWED_AT,
        REJECTED_CLUSTER,
        REJECTED_AT,
        DECLINED_CLUSTER,
        DECLINED_AT,
        DECLINED_COUNT,
        ARCHIVED_BY_CYCLE,
        CREATED_BY_CYCLE,
    }
)

REASON_MERGED_INTO = "merged into "
REASON_EPHEMERAL = "flagged ephemeral by consolidation"


def utcnow() -> datetime:
    return datetime.now(UTC)


def format_timestamp(value: datetime) -> str:
    """ISO-8601 round-trip form, always with an offset (RockBot's DateTimeOffset)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.isoformat(timespec="microseconds")


def as_aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


class Entry(BaseModel):
    """One memory. Field names are Python; aliases are RockBot's camelCase JSON names."""

    model_config = ConfigDict(populate_by_name=True, extra="allow", validate_assignment=False)

    id: str
    content: str = ""
    category: str | None = None
    tags: list[str] = Field(default_factory=list)
    created_at: datetime = Field(default_factory=utcnow, alias="createdAt")
    updated_at: datetime | None = Field(default=None, alias="updatedAt")
    last_seen_at: datetime | None = Field(default=None, alias="lastSeenAt")
    reinforcement_count: int = Field(default=1, alias="reinforcementCount")
    importance_score: float = Field(default=0.5, alias="importanceScore")
    metadata: dict[str, str] | None = None
    superseded_by: str | None = Field(default=None, alias="supersededBy")
    archived_at: datetime | None = Field(default=None, alias="archivedAt")
    archive_reason: str | None = Field(default=None, alias="archiveReason")

    # The JSON object this entry was read from, the key spelling used for each known field in it, and the field
    # values parsed from it (so "unchanged" is judged against what was read, defaults and nulls included).
    _raw: dict[str, Any] = PrivateAttr(default_factory=dict)
    _key_names: dict[str, str] = PrivateAttr(default_factory=dict)
    _loaded: dict[str, Any] = PrivateAttr(default_factory=dict)

    @field_validator("tags", mode="before")
    @classmethod
    def _tags_null_is_empty(cls, value: Any) -> Any:
        return [] if value is None else value

    @field_validator("created_at", "updated_at", "last_seen_at", "archived_at")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        return None if value is None else as_aware(value)

    @field_validator("importance_score")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("importanceScore must be a finite number")
        return value

    # ---- derived views -------------------------------------------------------------------------------

    @property
    def is_archived(self) -> bool:
        return self.archived_at is not None

    @property
    def is_live(self) -> bool:
        return self.archived_at is None and not self.superseded_by

    @property
    def seen_at(self) -> datetime:
        return self.last_seen_at or self.created_at

    def meta(self, key: str) -> str | None:
        return (self.metadata or {}).get(key)

    def with_meta(self, **values: str | None) -> Entry:
        """A copy with metadata keys set (None removes a key); the raw JSON is carried along."""
        metadata = dict(self.metadata or {})
        for key, value in values.items():
            if value is None:
                metadata.pop(key, None)
            else:
                metadata[key] = value
        if metadata == (self.metadata or {}):
            # Removing an absent key is no change: a null (or missing) metadata must not become {}.
            return self.evolve()
        return self.evolve(metadata=metadata)

    def evolve(self, **changes: Any) -> Entry:
        """A copy with fields changed; it remembers the same original JSON so unchanged values round-trip."""
        # A shallow copy plus fresh containers for the mutable fields: the same result as deep=True (tags is
        # list[str], metadata dict[str, str]; extras are deep-copied), without deep-copying the private raw JSON
        # that is replaced just below (that deep copy dominated scans and stamping at 10k+ entries).
        clone = self.model_copy(update=changes)
        for name in _MUTABLE_FIELDS:
            value = clone.__dict__[name]
            if name not in changes and value is not None:
                clone.__dict__[name] = value.copy()
        extra = clone.__pydantic_extra__
        if extra:
            for key, value in extra.items():
                if key not in changes:
                    extra[key] = copy.deepcopy(value)
        clone._raw = self._raw
        clone._key_names = self._key_names
        clone._loaded = self._loaded
        return clone

    # ---- JSON ----------------------------------------------------------------------------------------

    @classmethod
    def from_json_obj(cls, obj: dict[str, Any]) -> Entry:
        """Parse one entry file's object. Property names are matched case-insensitively, as RockBot does."""
        if not isinstance(obj, dict):
            raise ValueError(f"expected a JSON object, found {type(obj).__name__}")
        by_lower = _BY_LOWER
        normalised: dict[str, Any] = {}
        key_names: dict[str, str] = {}
        for key, value in obj.items():
            alias = by_lower.get(key.lower())
            if alias is None:
                normalised[key] = value
            else:
                if alias in key_names:
                    raise ValueError(f"property {alias!r} appears twice ({key_names[alias]!r} and {key!r})")
                normalised[alias] = value
                key_names[alias] = key
        if "id" not in normalised or not isinstance(normalised["id"], str) or not normalised["id"].strip():
            raise ValueError("missing or blank 'id'")
        if normalised.get("content") is None:
            normalised["content"] = ""
        # by_name=False: an unknown key spelled like a Python field name ("archived_at") is an unknown field to
        # RockBot, so it must stay one here instead of silently archiving (or re-scoring) the entry.
        entry = cls.model_validate(normalised, by_alias=True, by_name=False)
        entry._raw = obj
        entry._key_names = _shared_key_names(key_names)
        entry._loaded = {name: _snapshot(getattr(entry, name)) for name in _ALIASES.values()}
        return entry

    def to_json_obj(self) -> dict[str, Any]:
        """The object to write: the original JSON with only the values whose meaning changed replaced."""
        extras = self.model_extra or {}
        current = self.model_dump(mode="json", by_alias=True, exclude=set(extras))
        for alias in _DATETIME_ALIASES:
            value = getattr(self, _ALIASES[alias])
            current[alias] = None if value is None else format_timestamp(value)
        # Private attributes are read once (pydantic's __getattr__ is slow) and each field compared at most once.
        raw, loaded = self._raw, self._loaded
        alias_of = {original: alias for alias, original in self._key_names.items()}
        unchanged: dict[str, bool] = {}

        def is_unchanged(alias: str) -> bool:
            if alias not in unchanged:
                field_name = _ALIASES[alias]
                unchanged[alias] = field_name in loaded and bool(getattr(self, field_name) == loaded[field_name])
            return unchanged[alias]

        out: dict[str, Any] = {}
        written: set[str | None] = set()
        for key, raw_value in raw.items():
            known = alias_of.get(key) or (key if key in _ALIASES else None)
            written.add(known)
            if known is None:
                # Unknown field: kept exactly unless the caller replaced it on purpose.
                out[key] = extras.get(key, raw_value)
                continue
            out[key] = raw_value if is_unchanged(known) else current[known]
        for alias in _ALIASES:
            # A field the file did not have stays absent unless the caller set it (never invent a createdAt).
            if alias not in written and not (loaded and is_unchanged(alias)):
                out[alias] = current[alias]
        for key, value in extras.items():
            out.setdefault(key, value)
        return out

    def to_json_bytes(self) -> bytes:
        return (json.dumps(self.to_json_obj(), indent=2, ensure_ascii=False) + "\n").encode("utf-8")

    def _unchanged(self, alias: str) -> bool:
        """True when the field still has the value parsed from the file (so the file's own spelling is kept)."""
        field_name = _ALIASES[alias]
        if field_name not in self._loaded:
            return False
        return bool(getattr(self, field_name) == self._loaded[field_name])


_MUTABLE_FIELDS = ("tags", "metadata")


def _snapshot(value: Any) -> Any:
    """A copy of a parsed field value; fields hold str/number/datetime/None, list[str] or dict[str, str], so a
    container copy is a deep copy (and far cheaper than copy.deepcopy)."""
    if isinstance(value, list | dict):
        return value.copy()
    return value


_ALIASES: dict[str, str] = {(info.alias or name): name for name, info in Entry.model_fields.items()}
_DATETIME_ALIASES = ("createdAt", "updatedAt", "lastSeenAt", "archivedAt")
_BY_LOWER = {alias.lower(): alias for alias in _ALIASES}

# Key spellings are read-only once parsed, and nearly every file of a corpus spells its keys the same way: one
# shared dict per spelling instead of one per entry (about 2 KB an entry, 0.2 GB at 100k). Bounded, in case a
# corpus has many spellings (then the rest keep their own dicts).
_KEY_NAMES: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
_KEY_NAMES_MAX = 256


def _shared_key_names(key_names: dict[str, str]) -> dict[str, str]:
    signature = tuple(key_names.items())
    shared = _KEY_NAMES.get(signature)
    if shared is None:
        if len(_KEY_NAMES) >= _KEY_NAMES_MAX:
            return key_names
        _KEY_NAMES[signature] = shared = key_names
    return shared


def _alias_of(key: str, key_names: dict[str, str]) -> str | None:
    for alias, original in key_names.items():
        if original == key:
            return alias
    return key if key in _ALIASES else None
