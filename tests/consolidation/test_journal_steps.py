"""Journal steps built without pydantic validation, and decays written from the plan's entry (issue 27: a cold cycle
journals a step per decayed and per stamped entry of the corpus): the same steps, the same JSON, the same bytes on
disk as the validated, rebuilt ones, whatever the file's shape."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dreamkeeper.consolidation.decay import plan_decay
from dreamkeeper.consolidation.executor import Executor
from dreamkeeper.consolidation.journal import FingerprintModel, Step, relative_path
from dreamkeeper.consolidation.journal_steps import decay_step, decay_values, stamp_step, write_journal
from dreamkeeper.consolidation.plan import DecayAction, Plan
from dreamkeeper.consolidation.settings import DecaySettings
from dreamkeeper.memory import HighValueFloor, MemoryStore
from tests.consolidation.test_decay import NOW, old
from tests.parity import rockbot_files


def _shapes(root: Path) -> None:
    """Entry files as agents write them: RockBot's own, a 7-digit fraction, no updatedAt, a null one, an integer
    importance, a key spelled in another case, an unknown key."""
    base = old("plain", "Milo likes tea.", 0.6)
    rockbot_files.write(root, base)
    fraction = old("fraction", "Ana flies on 12 May.", 0.7)
    fraction["updatedAt"] = rockbot_files.o_format(NOW - timedelta(days=90, microseconds=123457))
    rockbot_files.write(root, fraction)
    absent = old("absent", "The VPN id is 4471.", 0.8)
    del absent["updatedAt"]
    rockbot_files.write(root, absent)
    null = old("null", "Berlin office opens at 9.", 0.65)
    null["updatedAt"] = None
    rockbot_files.write(root, null)
    whole = old("whole", "Kai owns the Q3 budget.", 0.9)
    whole["importanceScore"] = 1
    rockbot_files.write(root, whole)
    cased = old("cased", "Ops rota is on the wiki.", 0.75)
    cased["ImportanceScore"] = cased.pop("importanceScore")
    cased["unknownKey"] = {"kept": [1, 2]}
    rockbot_files.write(root, cased)


def validated_decay_step(store: MemoryStore, action: DecayAction, group: int) -> Step:
    return Step(
        op="decay",
        id=action.target.id,
        path=relative_path(store, action.target.path),
        group=group,
        expected=FingerprintModel.of(action.target.fingerprint),
        before=decay_values(action.target.entry),
        after=decay_values(action.updated),
    )


def test_a_decay_step_records_the_values_the_entry_writes_whatever_the_file_shape(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    _shapes(root)
    store = MemoryStore(root)
    plan = plan_decay(store.scan().live, DecaySettings(), HighValueFloor(), NOW)
    assert {a.target.id for a in plan.actions} == {"plain", "fraction", "absent", "null", "whole", "cased"}
    for group, action in enumerate(plan.actions, start=1):
        built, checked = decay_step(store, action, group), validated_decay_step(store, action, group)
        assert built.model_dump_json() == checked.model_dump_json(), action.target.id
        assert Step.model_validate_json(built.model_dump_json()) == checked
        # The recorded values are the ones the decayed entry's own JSON holds (what the write puts on disk).
        written = action.updated.to_json_obj()
        spelled = {key.lower(): key for key in written}
        assert built.after == {name: written[spelled[name.lower()]] for name in ("importanceScore", "updatedAt")}


def test_a_decay_that_is_not_plan_decays_own_takes_the_long_way(tmp_path: Path) -> None:
    """A decay whose updatedAt did not move (not one plan_decay makes) is journaled from the entry's JSON: the
    value the file holds, as the file spells it."""
    root = tmp_path / "memory"
    rockbot_files.write(root, old("same", "Milo likes tea.", 0.6))
    store = MemoryStore(root)
    (stored,) = store.scan().live
    action = DecayAction(stored, stored.entry.evolve(importance_score=0.25))
    built = decay_step(store, action, 1)
    assert built.after == decay_values(action.updated)
    assert built.after is not None and built.after["updatedAt"] == json.loads(stored.path.read_bytes())["updatedAt"]


@pytest.mark.parametrize(
    "metadata",
    [
        {"dreamkeeper.reviewedHash": "abc", "dreamkeeper.reviewedAt": "2026-09-14T06:00:00.0000000+00:00"},
        {"dreamkeeper.reviewedHash": None},
        {},
    ],
)
def test_a_constructed_stamp_step_is_the_validated_one(tmp_path: Path, metadata: dict[str, str | None]) -> None:
    root = tmp_path / "memory"
    _shapes(root)
    store = MemoryStore(root)
    for group, stored in enumerate(store.scan().live, start=1):
        built = stamp_step(store, stored, metadata, group)
        checked = Step(
            op="stamp",
            id=stored.id,
            path=relative_path(store, stored.path),
            group=group,
            expected=FingerprintModel.of(stored.fingerprint),
            metadata=metadata,
            previous={key: stored.entry.meta(key) for key in metadata},
        )
        assert built.model_dump_json() == checked.model_dump_json()
        assert Step.model_validate_json(built.model_dump_json()) == checked
        assert built.metadata is not metadata  # never the caller's dict


def _decay_all(agent: Path, cycle_id: str, decayed: bool) -> dict[str, bytes]:
    store = MemoryStore(agent / "memory")
    live = store.scan().live
    plan = Plan(decays=list(plan_decay(live, DecaySettings(), HighValueFloor(), NOW).actions))
    journal = write_journal(agent, cycle_id, plan, store, NOW)
    snapshot = {str(d.target.path): d.target for d in plan.decays}
    planned: dict[str, Any] = {str(d.target.path): d.updated for d in plan.decays} if decayed else {}
    tally = Executor(store, journal, NOW, snapshot, planned).run()
    assert tally.decayed == len(plan.decays) == 6 and not tally.failed
    return {p.name: p.read_bytes() for p in sorted((agent / "memory").rglob("*.json"))}


def test_a_decay_written_from_the_plans_entry_writes_the_bytes_its_journal_values_give(tmp_path: Path) -> None:
    """The executor writes the decay plan's entry while the file is the snapshot's; rebuilt from the journal's
    values (a resumed journal, or no plan at hand), the same bytes."""
    for name in ("planned", "rebuilt"):
        _shapes(tmp_path / name / "memory")
    planned = _decay_all(tmp_path / "planned", "c1", decayed=True)
    rebuilt = _decay_all(tmp_path / "rebuilt", "c1", decayed=False)
    assert planned == rebuilt
    assert json.loads(planned["whole.json"])["importanceScore"] < 1


def test_a_constructed_model_is_what_model_construct_makes() -> None:
    """``_constructed`` (journal_steps.py) in place of pydantic's ``model_construct``: the same ``__dict__`` in the
    same order, fields-set, extra and private state, so the same JSON and equality; a model it would not build so
    (an alias, a default other than None, extras kept, a private attribute) is refused when the module loads."""
    from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

    from dreamkeeper.consolidation.journal_steps import _constructed, _plain_fields

    given = {"op": "decay", "id": "x", "path": "a/x.json", "group": 3, "before": {"a": 1}, "after": {"a": 2}}
    fp = {"sha256": "a" * 64, "size": 1, "mtime_ns": 2}
    fields_set = {*given, "expected"}
    expected = FingerprintModel.model_construct({*fp}, **fp)
    built = {**_plain_fields(Step), **given, "expected": _constructed(FingerprintModel, fp, {*fp})}
    ours = _constructed(Step, built, fields_set)
    theirs = Step.model_construct(fields_set, **given, expected=expected)
    assert list(ours.__dict__.items()) == list(theirs.__dict__.items())
    assert ours.__pydantic_fields_set__ == theirs.__pydantic_fields_set__ == fields_set
    assert ours == theirs and ours.model_dump_json() == theirs.model_dump_json()
    assert (ours.__pydantic_extra__, ours.__pydantic_private__) == (theirs.__pydantic_extra__, None)

    class Aliased(BaseModel):
        a: int = Field(alias="A")

    class Defaulted(BaseModel):
        a: int = 0

    class Extra(BaseModel):
        model_config = ConfigDict(extra="allow")

    class Private(BaseModel):
        _p: int = PrivateAttr(default=1)

    for model in (Aliased, Defaulted, Extra, Private):
        with pytest.raises(TypeError):
            _plain_fields(model)
