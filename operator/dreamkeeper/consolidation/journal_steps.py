"""The steps of a cycle's journal, built from its plan: folds, decays, merges, prunes, stamps (``journal.py`` holds
the journal those steps are written to, and its records).

Each builder reads what its step must guard (the fingerprint read at snapshot) and what its undo puts back (the
fields a decay changes, a stamp's previous metadata), so the executor and undo need nothing but the journal.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Final, NamedTuple, TypeVar

from pydantic import BaseModel

from dreamkeeper.consolidation.baseline import baseline_of
from dreamkeeper.consolidation.journal import (
    DECAY_FIELDS,
    ArchiveKind,
    FingerprintModel,
    Journal,
    Step,
    relative_path,
    write_journal_steps,
)
from dreamkeeper.consolidation.plan import DecayAction, Plan
from dreamkeeper.memory import (
    REASON_EPHEMERAL,
    REASON_MERGED_INTO,
    Entry,
    Fingerprint,
    MemoryStore,
    StoredEntry,
    format_timestamp,
    kept_values,
)

_DECAY_KEYS: Final = frozenset(name.lower() for name in DECAY_FIELDS)
_DECAY_SPELLED: Final = frozenset(DECAY_FIELDS)


def steps_from_plan(plan: Plan, store: MemoryStore) -> list[Step]:
    """Folds, then decays, then merges, then prunes, then stamps. A group's archives depend on its create/update.

    A decay of an entry the plan also archives or stamps is carried into that step (its ``before``/``after``: the
    decay's values, written in the same fingerprint-guarded write, undone with it): one write of the file instead of
    two. A decay of an entry a merge is folded into is that update's: its ``before`` is the file as it is (not yet
    decayed), its ``after`` the successor. Either way, no decay step of its own (docs/architecture.md, "Decay carried
    into the cycle's write")."""
    return [build_step(store, recipe) for recipe in plan_recipes(plan)]


# What a step is built from (``plan_recipes``): its kind, its group, and the plan's own objects it reads, ~100 bytes
# where the step is ~2 KB. A cold start's plan at 100,000 entries has ~107,000 steps: plan_steps.py keeps these
# instead of the steps, and builds a step when it is needed. The kind is the step's op, but "fold" (an update).
Recipe = tuple[str, int, Any, Any]


def recipe_op(recipe: Recipe) -> str:
    """The op of the step ``recipe`` builds."""
    return "update" if recipe[0] == "fold" else recipe[0]


def plan_recipes(plan: Plan) -> list[Recipe]:
    """Each step of ``steps_from_plan``, in its order, as (kind, group, what, more): ``build_step`` makes the step."""
    recipes: list[Recipe] = []
    group = 0
    carried = {decay.target.id: decay for decay in plan.decays}
    if carried:
        written = written_by(plan)
        carried = {entry_id: decay for entry_id, decay in carried.items() if entry_id in written}
    for fold in plan.folds:
        group += 1
        recipes.append(("fold", group, fold, None))
        for copy in fold.copies:
            recipes.append(("archive", group, (copy, REASON_MERGED_INTO + fold.survivor.id, "folded"), None))
    for decay in plan.decays:
        if decay.target.id in carried:
            continue
        group += 1
        recipes.append(("decay", group, decay, None))
    for merge in plan.merges:
        group += 1
        if merge.into is not None:
            into = merge.into
            undecayed = carried[into.id].target if into.id in carried else into  # the file as it is on disk
            recipes.append(("update", group, merge, undecayed))
        else:
            recipes.append(("create", group, merge, None))
        for source in merge.sources:
            reason = REASON_MERGED_INTO + merge.successor.id
            recipes.append(("archive", group, (source, reason, "merged"), carried.get(source.id)))
    for prune in plan.prunes:
        group += 1
        recipes.append(("archive", group, (prune.target, REASON_EPHEMERAL, "ephemeral"), carried.get(prune.target.id)))
    for stamp in plan.stamps:
        group += 1
        recipes.append(("stamp", group, stamp, carried.get(stamp.target.id)))
    return recipes


def build_step(store: MemoryStore, recipe: Recipe) -> Step:
    """The step ``recipe`` describes: a pure function of it (the same recipe, an equal step, each time)."""
    op, group, what, more = recipe
    if op == "stamp":
        return stamp_step(store, what.target, what.metadata, group, more)
    if op == "archive":
        stored, reason, kind = what
        return _archive_step(store, stored, group, reason, kind, more)
    if op == "decay":
        return decay_step(store, what, group)
    if op == "create":
        path = _entry_path(store, what.successor)
        return Step(
            op="create",
            id=what.successor.id,
            path=relative_path(store, path),
            group=group,
            after=what.successor.to_json_obj(),
        )
    if op == "fold":  # its survivor, updated
        return Step(
            op="update",
            id=what.survivor.id,
            path=relative_path(store, what.survivor.path),
            group=group,
            expected=FingerprintModel.of(what.survivor.fingerprint),
            before=what.survivor.entry.to_json_obj(),
            after=what.updated.to_json_obj(),
        )
    into, undecayed = what.into, more  # a merge folded into an existing entry
    return Step(
        op="update",
        id=into.id,
        path=relative_path(store, into.path),
        group=group,
        expected=FingerprintModel.of(into.fingerprint),
        before=undecayed.entry.to_json_obj(),
        after=what.successor.to_json_obj(),
        # How the log line names it: a member that held every specific, or a merge restating it.
        reason="subsumed near-duplicates into" if what.subsumed else "folded a merge restating it into",
    )


def written_by(plan: Plan) -> set[str]:
    """Ids of the existing entries the plan's merges, prunes and stamps write: a decay of one of them is carried."""
    written = {s.id for m in plan.merges for s in m.sources} | {p.target.id for p in plan.prunes}
    written |= {m.into.id for m in plan.merges if m.into is not None} | {s.target.id for s in plan.stamps}
    return written


def _carry(step: Step, decay: DecayAction | None) -> Step:
    """``step`` (a stamp or an archive, just built) carrying ``decay``'s values: set on the new step before anyone
    holds it (constructed steps share nothing)."""
    if decay is not None:
        step.__dict__["before"] = decay_values(decay.target.entry)
        step.__dict__["after"] = _decayed_values(decay)
    return step


# The fields every decay (stamp) step sets, and a fingerprint's: one set object shared by all of them (pydantic gives
# each model its own, ~700 bytes a step), never changed (nothing assigns to a journal step's fields).
_DECAY_STEP_FIELDS: Final = {"op", "id", "path", "group", "expected", "before", "after"}
_STAMP_STEP_FIELDS: Final = {"op", "id", "path", "group", "expected", "metadata", "previous"}
_FINGERPRINT_FIELDS: Final = {"sha256", "size", "mtime_ns"}


def _plain_fields(cls: type[BaseModel]) -> dict[str, Any]:
    """Each field of ``cls``, in its order, with its default: None for every field that has one (and for a required
    one, which the caller always gives). Raises TypeError for a model ``_constructed`` would not build as
    ``model_construct`` does (an alias, a default other than None, extras kept, private attributes, a post-init)."""
    if cls.__pydantic_post_init__ or cls.model_config.get("extra") == "allow" or cls.__private_attributes__:
        raise TypeError(f"{cls.__name__}: not a plain model")
    for name, field in cls.model_fields.items():
        if field.alias is not None or field.validation_alias is not None:
            raise TypeError(f"{cls.__name__}.{name}: an alias")
        if not field.is_required() and field.get_default(call_default_factory=True) is not None:
            raise TypeError(f"{cls.__name__}.{name}: a default other than None")
    return dict.fromkeys(cls.model_fields, None)


_STEP_FIELDS: Final = _plain_fields(Step)
_plain_fields(FingerprintModel)  # checked: built by ``_constructed`` too
_new, _set = object.__new__, object.__setattr__
Model = TypeVar("Model", bound=BaseModel)


def _constructed(cls: type[Model], fields: dict[str, Any], fields_set: set[str]) -> Model:
    """``cls.model_construct(fields_set, **values)`` for a plain model (``_plain_fields``), given ``fields``: every
    field in the model's order, the values given in place of their defaults. ``model_construct`` looks up each field's
    aliases and default again for every model it builds: 8.5 against 1.9 us a decay step with its fingerprint
    (bench/results/micro-s40.md), ~6,000 steps a steady cycle at 100,000 entries, a cold start's ~100,000 stamps."""
    model = _new(cls)
    _set(model, "__dict__", fields)
    _set(model, "__pydantic_fields_set__", fields_set)
    _set(model, "__pydantic_extra__", None)
    _set(model, "__pydantic_private__", None)
    return model


def _fingerprint_model(fp: Fingerprint) -> FingerprintModel:
    """``FingerprintModel.of(fp)`` without validating what is already typed (a str and two ints)."""
    fields = {"sha256": fp.sha256, "size": fp.size, "mtime_ns": fp.mtime_ns}
    return _constructed(FingerprintModel, fields, _FINGERPRINT_FIELDS)


def stamp_step(
    store: MemoryStore,
    target: StoredEntry,
    metadata: dict[str, str | None],
    group: int,
    decay: DecayAction | None = None,
) -> Step:
    """A review stamp's journal step, constructed, not validated (a cold start stamps nearly every entry, and
    validating the step cost more than building it): the same step, the same JSON as the validated one
    (tests/consolidation/test_journal_steps.py). ``metadata`` is copied, so the step never shares a caller's dict."""
    fields = dict(_STEP_FIELDS)
    fields.update(
        op="stamp",
        id=target.id,
        path=relative_path(store, target.path),
        group=group,
        expected=_fingerprint_model(target.fingerprint),
        metadata=dict(metadata),
        previous={key: target.entry.meta(key) for key in metadata},
    )
    return _carry(_constructed(Step, fields, _STAMP_STEP_FIELDS), decay)


class FoldedStamp(NamedTuple):
    """What the write-back fold reads of a done stamp step (writeback/ingest.py ``_stamped``): its entry's id, the
    keys it set and their values before. ``stamp_step`` makes a pydantic model with its path and fingerprint too,
    which at 100,000 entries was most of the fold's CPU (65,079 stamps built again for it; issue 27)."""

    id: str
    metadata: dict[str, str | None] | None
    previous: dict[str, str | None] | None


def folded_stamp(target: StoredEntry, metadata: dict[str, str | None]) -> FoldedStamp:
    """The fold's view of ``stamp_step(store, target, metadata, ...)``: the same id, metadata and previous values.
    ``metadata`` is the plan's own dict, read and dropped by the fold (a journal's step copies it)."""
    return FoldedStamp(target.id, metadata, {key: target.entry.meta(key) for key in metadata})


def decay_step(store: MemoryStore, decay: DecayAction, group: int) -> Step:
    """A decay's journal step, built from values that are already what the model holds (a parsed entry's id, a path,
    the fingerprint read, two values): constructed, not validated. A cold start journals one per entry of the
    corpus, all held until the decay has run (issue 27: ~2.3 KB each as validated models at 100,000 entries);
    the same step, the same JSON (tests/consolidation/test_cold_memory.py). The values before are read from the
    file's bytes when they are a kept decay's (``kept_values``: a steady cycle decays the same files each time)."""
    before = kept_values(store.corpus_index, decay.target, DECAY_FIELDS)
    fields = dict(_STEP_FIELDS)
    fields.update(
        op="decay",
        id=decay.target.id,
        path=relative_path(store, decay.target.path),
        group=group,
        expected=_fingerprint_model(decay.target.fingerprint),
        before=decay_values(decay.target.entry) if before is None else before,
        after=_decayed_values(decay),
    )
    return _constructed(Step, fields, _DECAY_STEP_FIELDS)


def _decayed_values(decay: DecayAction) -> dict[str, Any]:
    """``decay_values(decay.updated)`` without building the entry's JSON again, when both values changed: a changed
    value is written as its current JSON form (``Entry.to_json_obj``), i.e. the float and the formatted timestamp.
    Decay always lowers importance and moves updatedAt to now (``plan_decay``); anything else takes the long way."""
    old, new = decay.target.entry, decay.updated
    importance, updated_at = new.importance_score, new.updated_at
    if (
        type(importance) is float
        and math.isfinite(importance)
        and importance != old.importance_score
        and updated_at is not None
        and updated_at != old.updated_at
    ):
        return {"importanceScore": importance, "updatedAt": format_timestamp(updated_at)}
    return decay_values(new)


def decay_values(entry: Entry) -> dict[str, Any]:
    """The fields a decay step changes, as the entry's JSON writes them (the file's own values, for an undo that
    puts back exactly what was there)."""
    obj = entry.to_json_obj(only=_DECAY_KEYS)  # the same values, without building the whole object
    if obj.keys() == _DECAY_SPELLED:  # both present, spelled as RockBot spells them: the common case, as they are
        return {name: obj[name] for name in DECAY_FIELDS}
    spelled = {key.lower(): key for key in obj}
    return {name: obj.get(spelled.get(name.lower(), name)) for name in DECAY_FIELDS}


def put_decay_values(obj: dict[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """An entry's JSON object with a decay step's values written into it, under the file's own key spelling."""
    out = dict(obj)
    spelled = {key.lower(): key for key in out}
    for name in DECAY_FIELDS:
        out[spelled.get(name.lower(), name)] = values.get(name)
    return out


def with_decay_values(entry: Entry, values: Mapping[str, Any]) -> Entry:
    """``entry`` with a decay step's importance and updatedAt (as recorded in the journal)."""
    updated = values.get("updatedAt")
    return entry.evolve(
        importance_score=float(values["importanceScore"]),
        updated_at=None if updated is None else datetime.fromisoformat(str(updated)),
    )


def has_decay_values(entry: Entry, values: Mapping[str, Any]) -> bool:
    """Whether ``entry`` carries exactly these importance and updatedAt values."""
    try:
        wanted = with_decay_values(entry, values)
    except (ValueError, TypeError, KeyError):
        return False
    return entry.importance_score == wanted.importance_score and entry.updated_at == wanted.updated_at


def _entry_path(store: MemoryStore, entry: Entry) -> Path:
    from dreamkeeper.memory import entry_path

    return entry_path(store.root, entry.id, entry.category)


def _archive_step(
    store: MemoryStore,
    stored: StoredEntry,
    group: int,
    reason: str,
    kind: ArchiveKind,
    decay: DecayAction | None = None,
) -> Step:
    step = archive_step(
        stored, group, reason, kind, baseline=baseline_of(stored.entry), path=relative_path(store, stored.path)
    )
    return _carry(step, decay)


def archive_step(
    stored: StoredEntry,
    group: int,
    reason: str,
    kind: ArchiveKind,
    *,
    metadata: dict[str, str | None] | None = None,
    baseline: dict[str, Any] | None = None,
    path: str | None = None,
) -> Step:
    """Archive ``stored`` as the snapshot read it (fingerprint-guarded); ``metadata`` is set in the same write.
    The path is the file's own until the step is journaled (``write_journal_steps`` makes it relative), unless
    ``path`` says how the journal names it."""
    return Step(
        op="archive",
        id=stored.id,
        path=str(stored.path) if path is None else path,
        group=group,
        expected=FingerprintModel.of(stored.fingerprint),
        reason=reason,
        kind=kind,
        metadata=metadata,
        baseline=baseline,
    )


def update_step(
    stored: StoredEntry, after: Entry, group: int, reason: str, baseline: dict[str, Any] | None = None
) -> Step:
    """Rewrite ``stored`` (as the snapshot read it, fingerprint-guarded) as ``after``; undo writes it back."""
    return Step(
        op="update",
        id=stored.id,
        path=str(stored.path),
        group=group,
        expected=FingerprintModel.of(stored.fingerprint),
        before=stored.entry.to_json_obj(),
        after=after.to_json_obj(),
        reason=reason,
        baseline=baseline,
    )


def write_journal(agent_dir: Path, cycle_id: str, plan: Plan, store: MemoryStore, now: datetime) -> Journal:
    return write_journal_steps(agent_dir, cycle_id, steps_from_plan(plan, store), store, now)
