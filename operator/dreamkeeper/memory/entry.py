"""The memory entry: one JSON file per memory, in RockBot's on-disk format.

RockBot writes camelCase, indented JSON with nulls, and reads case-insensitively. dreamkeeper rewrites files the
agent owns, so an entry remembers the exact JSON object it was read from and, on rewrite, keeps every value whose
meaning did not change (unknown fields, unknown metadata keys, 7-digit .NET fractions, key order) as it was.

A corpus holds 100k+ entries, so a parsed entry is lean: what the file said is not kept twice. Only the raw values
that the parsed ones do not reproduce exactly (a 7-digit fraction, 1 for 1.0, a null tags) are kept; the file's
key spelling and order are one shared object per spelling. Well-formed files skip pydantic's validation (a fast
path checked by the same rules); anything unusual goes through the model, which decides and words the errors.
"""

from __future__ import annotations

import copy
import json
import math
from datetime import UTC, datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Final, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator

from dreamkeeper.memory.entry_values import (
    FIELD_PARSERS,
    TIMESTAMP_FIELDS,
    NotFast,
    parse_score,
    parse_tags,
    parse_text,
    parse_timestamp,
)
from dreamkeeper.memory.jsontext import dumps_indented

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
# dreamkeeper's back-off after unusable proposer replies (consolidation/backoff.py); RockBot has no such stamp.
UNUSABLE_HASH = "dreamkeeperUnusableHash"
UNUSABLE_AT = "dreamkeeperUnusableAt"
UNUSABLE_COUNT = "dreamkeeperUnusableCount"
# Stale write-back repair (consolidation/writeback): on an entry an agent's stale changes were carried into, when;
# on a stale copy archived again, the journal that first archived it (whose undo brings it back too).
CARRIED_AT = "dreamkeeperCarriedAt"
STALE_COPY_OF = "dreamkeeperStaleCopyOf"
# `dreamkeeper memory restore`: a person brought the entry back, on purpose. It is never offered for merging or
# pruning again (issue 22: a restored merge source was merged again by the next cycle, its text still in a live
# successor), until the key is removed.
RESTORED_BY_HAND = "dreamkeeperRestoredAt"
# The purge's hold (consolidation/purge_policy.py): an archived entry dreamkeeper keeps past retention is lifted to
# RockBot's high-value floor before RockBot's own purge could reach it; its own importance is kept here, and put
# back by a restore or when the hold is released.
HELD_IMPORTANCE = "dreamkeeperHeldImportance"
HELD_FOR = "dreamkeeperHeldFor"
HELD_AT = "dreamkeeperHeldAt"
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
        UNUSABLE_HASH,
        UNUSABLE_AT,
        UNUSABLE_COUNT,
        CARRIED_AT,
        STALE_COPY_OF,
        RESTORED_BY_HAND,
        HELD_IMPORTANCE,
        HELD_FOR,
        HELD_AT,
    }
)

REASON_MERGED_INTO = "merged into "
REASON_EPHEMERAL = "flagged ephemeral by consolidation"
REASON_STALE_WRITE_BACK = "stale write-back; "  # prefixes the reason a stale copy is archived again with


def successor_in(reason: str | None) -> str | None:
    """The successor an archive reason names ("merged into X", also after the stale write-back prefix), if any."""
    text = reason or ""
    if text.startswith(REASON_STALE_WRITE_BACK):
        text = text[len(REASON_STALE_WRITE_BACK) :]
    if not text.startswith(REASON_MERGED_INTO):
        return None
    successor = text[len(REASON_MERGED_INTO) :].strip()
    return successor or None


def utcnow() -> datetime:
    return datetime.now(UTC)


def format_timestamp(value: datetime) -> str:
    """ISO-8601 round-trip form, always with an offset (RockBot's DateTimeOffset)."""
    global _last_stamp
    last, text = _last_stamp
    if value is last:
        # The very object formatted last (immutable): a cycle writes its one ``now`` into every decay, twice (the
        # journal's step and the file), thousands of times in a steady cycle at 100k entries.
        return text
    text = (value if value.tzinfo is not None else value.replace(tzinfo=UTC)).isoformat(timespec="microseconds")
    _last_stamp = (value, text)
    return text


_last_stamp: tuple[datetime | None, str] = (None, "")


def unheld(entry: Entry) -> Entry:
    """The entry as it was before the purge's hold lifted its importance (itself when it is not held)."""
    held = entry.meta(HELD_IMPORTANCE)
    if held is None:
        return entry
    try:
        importance = float(held)
    except ValueError:
        return entry.with_meta(**{HELD_IMPORTANCE: None, HELD_FOR: None, HELD_AT: None})
    restored = entry.evolve(importance_score=importance)
    return restored.with_meta(**{HELD_IMPORTANCE: None, HELD_FOR: None, HELD_AT: None})


def as_aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


class Entry(BaseModel):
    """One memory. Field names are Python; aliases are RockBot's camelCase JSON names."""

    model_config = ConfigDict(populate_by_name=True, extra="allow", validate_assignment=False)

    # How this entry was read (None when built in code): a slot rather than a pydantic private attribute, whose
    # per-instance dict alone cost ~180 bytes an entry. Not annotated in the class body: pydantic would make it one.
    __slots__ = ("_origin",)
    if TYPE_CHECKING:
        _origin: _Origin | None

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

    def model_post_init(self, context: Any, /) -> None:
        _set(self, "_origin", None)

    # ---- copies keep the origin (it is immutable, so it is shared) -------------------------------------

    def __copy__(self) -> Self:
        clone = super().__copy__()
        _set(clone, "_origin", getattr(self, "_origin", None))
        return clone

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Self:
        clone = super().__deepcopy__(memo)
        _set(clone, "_origin", getattr(self, "_origin", None))
        return clone

    def __getstate__(self) -> dict[Any, Any]:
        state = super().__getstate__()
        state["_origin"] = getattr(self, "_origin", None)
        return state

    def __setstate__(self, state: dict[Any, Any]) -> None:
        super().__setstate__(state)
        _set(self, "_origin", state.get("_origin"))

    def __reduce__(self) -> tuple[Any, ...]:
        # Flat values, rebuilt by ``entry_state.restored`` (an index loads 100k entries: pydantic's state dict per
        # entry cost a third of it). The fields-set and origin go by reference: entries sharing them still do.
        from dreamkeeper.memory.entry_state import restored, state

        return (restored, state(self))

    def __setattr__(self, name: str, value: Any) -> None:
        # Parsed entries share one fields-set per file shape; pydantic adds an assigned field's name to it in
        # place, so an entry gets its own set before that can leak into its neighbours.
        fields_set = self.__pydantic_fields_set__
        if name not in fields_set:
            _set(self, "__pydantic_fields_set__", set(fields_set))
        if self.__pydantic_extra__ is None and name not in _FIELD_NAMES and not name.startswith("_"):
            _set(self, "__pydantic_extra__", {})  # a new unknown field goes there
        super().__setattr__(name, value)

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
        # A shallow copy (the origin is shared: immutable) plus fresh containers for the mutable fields: the same
        # result as deep=True (tags is list[str], metadata dict[str, str]; extras are deep-copied), far cheaper.
        clone = self.model_copy(update=changes)
        # pydantic gives the copy its own fields-set (728 bytes for a file's 13 keys): when it says what the
        # original's says (a decay, a stamp: fields the file already had), the original's is shared, as parsed
        # entries of one shape share theirs (`_Shape`); ``__setattr__`` copies it before it could ever change. A cold
        # cycle decays nearly every entry: half the footprint of each decayed copy (issue 27).
        if clone.__pydantic_fields_set__ == self.__pydantic_fields_set__:
            _set(clone, "__pydantic_fields_set__", self.__pydantic_fields_set__)
        for name in _MUTABLE_FIELDS:
            value = clone.__dict__[name]
            if name not in changes and value is not None:
                clone.__dict__[name] = value.copy()
        extra = clone.__pydantic_extra__
        if extra:
            for key, value in extra.items():
                if key not in changes:
                    extra[key] = copy.deepcopy(value)
        return clone

    # ---- JSON ----------------------------------------------------------------------------------------

    @classmethod
    def from_json_obj(cls, obj: dict[str, Any]) -> Entry:
        """Parse one entry file's object. Property names are matched case-insensitively, as RockBot does."""
        if not isinstance(obj, dict):
            raise ValueError(f"expected a JSON object, found {type(obj).__name__}")
        shape = _shape_of(obj)
        values = list(obj.values())
        position = shape.position
        id_at = position.get("id")
        entry_id = values[id_at] if id_at is not None else None
        if not isinstance(entry_id, str) or not entry_id.strip():
            raise ValueError("missing or blank 'id'")
        try:
            fields, kept = _fast_fields(shape, values)
        except NotFast:
            # Anything but plain JSON types in their usual form goes through pydantic, whose rules (lax
            # coercions) and error messages are the definition.
            entry = cls._validate(shape, values)
            fields = entry.__dict__
            kept = _kept(shape, values, fields)
        else:
            entry = cls.__new__(cls)
            _set(entry, "__dict__", fields)
            # None, not {}, when the file has no unknown field (pydantic reads both alike): 64 bytes an entry.
            extras = {shape.keys[at]: values[at] for at in shape.unknown} if shape.unknown else None
            _set(entry, "__pydantic_extra__", extras)
            _set(entry, "__pydantic_fields_set__", shape.fields_set)
            _set(entry, "__pydantic_private__", None)
        if not kept and "created_at" in shape.position:
            _set(entry, "_origin", shape.plain)  # the common case: nothing of the file to keep but its shape
        else:
            created_default = None if "created_at" in shape.position else fields["created_at"]
            _set(entry, "_origin", _Origin(shape, tuple(kept), created_default))
        return entry

    @classmethod
    def _validate(cls, shape: _Shape, values: list[Any]) -> Entry:
        """The pydantic path: every field validated (and coerced, or refused with its error) by the model."""
        normalised: dict[str, Any] = {}
        for key, name, value in zip(shape.keys, shape.names, values, strict=True):
            normalised[key if name is None else _ALIAS_OF[name]] = value
        if normalised.get("content") is None:
            normalised["content"] = ""
        # by_name=False: an unknown key spelled like a Python field name ("archived_at") is an unknown field to
        # RockBot, so it must stay one here instead of silently archiving (or re-scoring) the entry.
        return cls.model_validate(normalised, by_alias=True, by_name=False)

    def to_json_obj(self, only: frozenset[str] | None = None) -> dict[str, Any]:
        """The object to write: the original JSON with only the values whose meaning changed replaced.

        ``only`` (lowercased keys): just those keys of that object, computed the same way. A decay step journals two
        values of each of up to every entry of a corpus on a cold start; building the whole object twice for them
        cost more than writing the files (issue 27)."""
        extras = self.__pydantic_extra__ or {}
        names, datetime_aliases, plain = _ALL if only is None else _restricted(only)
        # include, not exclude=extras: an unknown key may be spelled like a field name ("importance_score"). The
        # timestamps are left out: each is formatted only when it is written from its value (``_stamp_json``): an
        # unchanged one of RockBot's is written from its raw text (a cold start builds this object ~2x a written file).
        fields = self.__dict__
        if only is not None and _all_plain_json(fields, plain):
            # Each value is its own JSON form, as pydantic's dump gives it (a finite float, a str, None): a decay
            # step asks for importance alone, once or twice per decayed entry of a cold start, and the dump's own
            # cost per call was most of building that step (issue 27).
            current = {_ALIAS_OF[name]: fields[name] for name in plain}
        else:
            current = self.model_dump(mode="json", by_alias=True, include=plain)
        origin: _Origin | None = getattr(self, "_origin", None)
        if origin is None:
            # Built in code, never read: every field is written.
            for alias in datetime_aliases:
                current[alias] = _stamp_json(fields[_ALIASES[alias]])
            out = {alias: current[alias] for alias in _ALIASES if alias in current}
        else:
            shape = origin.shape
            kept = origin.kept_values() if origin.kept else _NOTHING_KEPT  # read, never written
            out = {}
            positions = enumerate(zip(shape.keys, shape.names, strict=True)) if only is None else _at(shape, only)
            for at, (key, name) in positions:
                raw = kept.get(at, _DERIVED)
                if name is None:
                    # Unknown field: kept exactly unless the caller replaced it on purpose.
                    out[key] = extras.get(key, raw)
                elif raw is _DERIVED or fields[name] != _reparse(name, raw):
                    # A derived value is the current value's own JSON form when unchanged, so this one branch
                    # writes both an unchanged value and a changed one.
                    out[key] = _stamp_json(fields[name]) if name in TIMESTAMP_FIELDS else current[_ALIAS_OF[name]]
                else:
                    out[key] = raw  # unchanged, and written as the file had it (7-digit fraction, 1 for 1.0, null)
            for name in names:
                # A field the file did not have stays absent unless the caller set it (never invent a createdAt).
                if name not in shape.position and fields[name] != origin.absent_value(name):
                    alias = _ALIAS_OF[name]
                    out[alias] = _stamp_json(fields[name]) if name in TIMESTAMP_FIELDS else current[alias]
        for key, value in extras.items():
            if only is None or key.lower() in only:
                out.setdefault(key, value)
        return out

    def to_json_bytes(self) -> bytes:
        # json.dumps(indent=2, ensure_ascii=False), byte for byte, without the pure-Python indenting encoder.
        return (dumps_indented(self.to_json_obj()) + "\n").encode("utf-8")

    @classmethod
    def from_json_bytes(cls, data: bytes) -> Entry:
        """Parse an entry file's bytes; anything that cannot be rewritten faithfully is a ValueError."""
        return cls.from_json_obj(parse_json_object(data))


MAX_NESTING: Final = 64
"""Deepest nesting an entry file may have (RockBot's are two levels deep). Deeper values could not be copied or
written back without running out of stack, so such a file is malformed."""


class _DuplicateKeys(ValueError):
    pass


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                # Only one of the values would survive a rewrite: the file cannot be written back as it is.
                raise _DuplicateKeys(f"property {key!r} appears more than once")
            seen.add(key)
    return obj


_DECODER: Final = json.JSONDecoder(object_pairs_hook=_no_duplicate_keys)


def parse_json_object(data: bytes) -> dict[str, Any]:
    """A JSON object from an entry file: UTF-8 (a BOM allowed), no duplicate property, at most MAX_NESTING deep.
    Every refusal is a ValueError saying what was wrong (UnicodeDecodeError is one)."""
    text = data.decode("utf-8-sig")
    try:
        obj = _DECODER.decode(text)
    except RecursionError:
        raise ValueError(f"nested too deeply (more than {MAX_NESTING} levels)") from None
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, found {type(obj).__name__}")
    for value in obj.values():
        if isinstance(value, dict | list) and _deeper_than(value, MAX_NESTING - 1):
            raise ValueError(f"nested too deeply (more than {MAX_NESTING} levels)")
    return obj


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether a parsed JSON value nests deeper than ``limit`` levels (iterative: no stack to run out of)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        current, depth = stack.pop()
        if depth > limit:
            return True
        children = current.values() if isinstance(current, dict) else current
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


_set = object.__setattr__
_MUTABLE_FIELDS = ("tags", "metadata")
_ALIASES: dict[str, str] = {(info.alias or name): name for name, info in Entry.model_fields.items()}
_ALIAS_OF: dict[str, str] = {name: alias for alias, name in _ALIASES.items()}
_FIELD_NAMES: tuple[str, ...] = tuple(Entry.model_fields)
_DATETIME_ALIASES = ("createdAt", "updatedAt", "lastSeenAt", "archivedAt")
_BY_LOWER = {alias.lower(): alias for alias in _ALIASES}
# (field names, datetime aliases, the fields pydantic dumps: all but the timestamps), for every field or ``only``'s
_Fields = tuple[tuple[str, ...], tuple[str, ...], set[str]]
_ALL: _Fields = (_FIELD_NAMES, _DATETIME_ALIASES, {name for name in _FIELD_NAMES if name not in TIMESTAMP_FIELDS})


@lru_cache(maxsize=16)
def _restricted(only: frozenset[str]) -> _Fields:
    """``_ALL`` restricted to ``only`` (lowercased keys), for ``to_json_obj(only=...)``."""
    names = tuple(name for name in _FIELD_NAMES if _ALIAS_OF[name].lower() in only)
    aliases = tuple(alias for alias in _DATETIME_ALIASES if alias.lower() in only)
    return names, aliases, {name for name in names if name not in TIMESTAMP_FIELDS}


def _at(shape: _Shape, only: frozenset[str]) -> tuple[tuple[int, tuple[str, str | None]], ...]:
    """The positions of ``shape``'s keys in ``only`` (lowercased), in the file's order, with each key and the field
    it names: worked out once per shape and key set, not by walking every key of each file (a decay step asks for
    two keys of a dozen, once or twice per decayed entry)."""
    found = _AT.get((shape, only))
    if found is None:
        keys, names = shape.keys, shape.names
        found = tuple((at, (key, names[at])) for at, key in enumerate(keys) if key.lower() in only)
        if len(_AT) >= _SHAPES_MAX:
            _AT.clear()  # bounded as ``_SHAPES`` is (an index's shapes are objects of their own)
        _AT[(shape, only)] = found
    return found


_NOTHING_KEPT: Final[dict[int, Any]] = {}
# ``_reparse``'s last answers for timestamp strings (``parse_timestamp``'s memo): bounded, as the strings of one
# entry's writes come together (a cold start writes each of RockBot's entries once or twice, each asking ~4 times).
_REPARSED: dict[str, tuple[datetime, bool]] = {}
_REPARSED_MAX: Final = 64
_AT: dict[tuple[_Shape, frozenset[str]], tuple[tuple[int, tuple[str, str | None]], ...]] = {}


def _plain_json(value: Any) -> bool:
    """Whether ``value`` is its own JSON form in pydantic's dump (``mode="json"``) whatever its field: None, a str, a
    finite float. Not an int (a float field holding one is dumped as a float) and not a container (dumped as a copy)."""
    kind = type(value)
    return value is None or kind is str or (kind is float and math.isfinite(value))


def _all_plain_json(fields: dict[str, Any], names: set[str]) -> bool:
    # A loop, not ``all(...)`` over a generator (~1 µs more a call): this runs once or twice per decay step.
    for name in names:  # noqa: SIM110
        if not _plain_json(fields[name]):
            return False
    return True


def _stamp_json(value: datetime | None) -> str | None:
    """A timestamp field's JSON form written from its value (``to_json_obj``: pydantic's dump leaves them out)."""
    return None if value is None else format_timestamp(value)


# What a parse gives a field its file does not have (createdAt's load-time default is kept per entry).
_ABSENT: dict[str, Any] = {
    "id": None,
    "content": "",
    "category": None,
    "tags": [],
    "created_at": None,
    "updated_at": None,
    "last_seen_at": None,
    "reinforcement_count": 1,
    "importance_score": 0.5,
    "metadata": None,
    "superseded_by": None,
    "archived_at": None,
    "archive_reason": None,
}
if tuple(_ABSENT) != _FIELD_NAMES:  # the fast path builds __dict__ from it: it must be in the model's order
    raise AssertionError("_ABSENT must list every field in the model's order")


class _Derived:
    """Marker: the file's value is exactly the JSON form of the parsed value, so it need not be kept."""

    __slots__ = ()


_DERIVED = _Derived()


class _Shape:
    """A file's keys, in order and as spelled, and the field each names: one shared object per spelling.

    Nearly every file of a corpus is spelled alike, so the key strings, the key -> field map and pydantic's
    fields-set (700+ bytes as a per-entry set) are held once instead of once per entry.
    """

    __slots__ = ("fields_set", "keys", "names", "plain", "position", "unknown")

    def __init__(self, keys: tuple[str, ...]) -> None:
        names: list[str | None] = []
        position: dict[str, int] = {}
        for at, key in enumerate(keys):
            alias = _BY_LOWER.get(key.lower())
            name = None if alias is None else _ALIASES[alias]
            if name is not None:
                if name in position:
                    raise ValueError(f"property {alias!r} appears twice ({keys[position[name]]!r} and {key!r})")
                position[name] = at
            names.append(name)
        self.keys = keys
        self.names: tuple[str | None, ...] = tuple(names)
        self.position = position
        self.unknown = tuple(at for at, name in enumerate(names) if name is None)
        # As pydantic records it: the fields given (content always is, null becoming ""), plus unknown keys.
        self.fields_set = {*position, "content", *(keys[at] for at in self.unknown)}
        self.plain = _Origin(self, ())


class _Origin:
    """How an entry was read: its file's shape, the raw values that are not derivable from the parsed ones
    (positions and values, flat), and, when the file had no createdAt, the load-time default it was given."""

    __slots__ = ("created_default", "kept", "shape")

    def __init__(self, shape: _Shape, kept: tuple[Any, ...], created_default: datetime | None = None) -> None:
        self.shape = shape
        self.kept = kept
        self.created_default = created_default

    def kept_values(self) -> dict[int, Any]:
        return dict(zip(self.kept[::2], self.kept[1::2], strict=True))

    def absent_value(self, name: str) -> Any:
        return self.created_default if name == "created_at" else _ABSENT[name]


_SHAPES: dict[tuple[str, ...], _Shape] = {}
_SHAPES_MAX = 1024  # bounded, in case a corpus has many spellings (then the rest get their own shapes)


def _shape_of(obj: dict[str, Any]) -> _Shape:
    keys = tuple(obj)
    shape = _SHAPES.get(keys)
    if shape is None:
        shape = _Shape(keys)
        if len(_SHAPES) < _SHAPES_MAX:
            _SHAPES[keys] = shape
    return shape


def _kept(shape: _Shape, values: list[Any], fields: dict[str, Any]) -> list[Any]:
    """Positions and raw values (flat) of what the parsed fields do not reproduce exactly: unknown fields, and
    known ones whose raw value is not the JSON form to_json_obj writes for the parsed value (type and value)."""
    kept: list[Any] = []
    for at, name in enumerate(shape.names):
        raw = values[at]
        if name is None:
            kept += (at, raw)
            continue
        value = fields[name]
        if isinstance(value, datetime):
            derivable = type(raw) is str and raw == format_timestamp(value)
        else:
            derivable = type(raw) is type(value) and bool(raw == value)
        if not derivable:
            kept += (at, raw)
    return kept


def _fast_fields(shape: _Shape, values: list[Any]) -> tuple[dict[str, Any], list[Any]]:
    """The model's fields for a file of plain JSON values, and what _kept would keep; or NotFast."""
    fields = _ABSENT.copy()  # the model's field order, as pydantic's own __dict__
    kept: list[Any] = []
    memo: dict[str, tuple[datetime, bool]] = {}
    for at, name in enumerate(shape.names):
        raw = values[at]
        if name is None:
            kept += (at, raw)  # unknown field
        elif name in TIMESTAMP_FIELDS:
            if raw is None and name != "created_at":
                fields[name] = None
            else:
                fields[name] = parse_timestamp(raw, memo)
                if not memo[raw][1]:
                    kept += (at, raw)  # a 7-digit .NET fraction, "Z", no offset, ...
        elif name == "content":
            if raw is None:
                fields[name] = ""
                kept += (at, raw)
            else:
                fields[name] = parse_text(raw)
        elif name == "tags":
            fields[name] = parse_tags(raw)
            if raw is None:
                kept += (at, raw)
        elif name == "importance_score":
            fields[name] = parse_score(raw)
            if type(raw) is int:
                kept += (at, raw)  # 1, not 1.0
        else:
            fields[name] = FIELD_PARSERS[name](raw)  # the file's own value is the parsed one (or equal to it)
    if "created_at" not in shape.position:
        fields["created_at"] = utcnow()
    if "tags" not in shape.position:
        fields["tags"] = []
    return fields, kept


def _reparse(name: str, raw: Any) -> Any:
    """The value a field was given from ``raw`` when the file was read (re-derived at write time, not kept)."""
    if name in TIMESTAMP_FIELDS and type(raw) is str:
        # What ``_fast_fields`` gives a timestamp string, without building a shape for it: RockBot writes all three
        # timestamps with a 7-digit .NET fraction, kept raw, so every write of one of its files asks this three
        # times (and each decay step's journal values once more), mostly of one string (RockBot gives a new entry
        # one time for all three). So the last few answers are kept (``_REPARSED``: a datetime is immutable, and
        # the parse a function of the string). NotFast: the model decides, as below.
        if len(_REPARSED) >= _REPARSED_MAX:
            _REPARSED.clear()
        try:
            return parse_timestamp(raw, _REPARSED)
        except NotFast:
            pass
    try:
        return _fast_fields(_shape_of({_ALIAS_OF[name]: raw, "id": "x"}), [raw, "x"])[0][name]
    except NotFast:
        return Entry.model_validate({"id": "x", _ALIAS_OF[name]: raw}, by_alias=True, by_name=False).__dict__[name]
