"""``Entry.to_json_obj(only=...)``: just those keys of the object the entry writes, computed as it is. A decay step
asks for importance and updatedAt alone, once or twice per decayed entry of a cold start; their values are taken as
their own JSON form when they are plain (a finite float, a str, None) instead of through pydantic's dump (issue 27),
and must come out exactly as the whole object has them, whatever the file and whatever changed."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dreamkeeper.consolidation.journal_steps import decay_values
from dreamkeeper.memory.entry import Entry
from tests.memory.test_entry_parse import files

ONLY = [
    frozenset({"importancescore", "updatedat"}),  # a decay step's
    frozenset({"importancescore"}),
    frozenset({"importancescore", "metadata"}),
    frozenset({"content", "category", "id"}),
    frozenset({"tags", "reinforcementcount", "archivereason", "supersededby"}),
    frozenset({"verify", "score", "archived_at"}),  # unknown keys the generated files may hold
]


def _restricted(entry: Entry, only: frozenset[str]) -> list[tuple[str, Any]]:
    return [(key, value) for key, value in entry.to_json_obj().items() if key.lower() in only]


def _typed(pairs: list[tuple[str, Any]]) -> list[tuple[str, Any, type]]:
    return [(key, value, type(value)) for key, value in pairs]  # 1 and 1.0 are equal; the file tells them apart


@settings(max_examples=400, deadline=None)
@given(
    files(),
    st.sampled_from(["as read", "decayed", "decayed to an int", "decayed to zero", "content", "built"]),
    st.floats(0, 1),
)
def test_only_some_keys_are_those_keys_of_the_whole_object(obj: dict[str, Any], change: str, score: float) -> None:
    try:
        entry = Entry.from_json_obj(obj)
    except ValueError:
        return
    now = datetime(2026, 12, 7, 6, 0, tzinfo=UTC)
    if change == "decayed":
        entry = entry.evolve(importance_score=score, updated_at=now)
    elif change == "decayed to an int":
        entry = entry.model_copy(update={"importance_score": 1})  # a float field holding an int: dumped as 1.0
    elif change == "decayed to zero":
        entry = entry.evolve(importance_score=0.0, updated_at=None)
    elif change == "content":
        entry = entry.evolve(content="changed")
    elif change == "built":
        entry = Entry(id="a1b2c3d4e5f6", content="built in code", importance_score=score)
    for only in ONLY:
        assert _typed(list(entry.to_json_obj(only=only).items())) == _typed(_restricted(entry, only)), only
    values = decay_values(entry)
    spelled = {key.lower(): value for key, value in _restricted(entry, ONLY[0])}
    assert values == {"importanceScore": spelled.get("importancescore"), "updatedAt": spelled.get("updatedat")}


def test_each_file_spelling_keeps_its_positions_once_and_the_memo_stays_bounded() -> None:
    """``to_json_obj(only=...)`` looks its keys' positions up once per file spelling and key set (``entry._at``):
    the same answer for every file of that spelling, and never more spellings kept than ``_SHAPES`` holds."""
    from dreamkeeper.memory import entry as entry_module

    one = Entry.from_json_obj({"Id": "a1", "Content": "x", "ImportanceScore": 0.5, "UpdatedAt": None, "extra": 1})
    two = Entry.from_json_obj({"Id": "b2", "Content": "y", "ImportanceScore": 0.25, "UpdatedAt": None, "extra": 2})
    assert one._origin.shape is two._origin.shape  # type: ignore[attr-defined]  # one spelling, one shape
    assert one.to_json_obj(only=ONLY[0]) == {"ImportanceScore": 0.5, "UpdatedAt": None}
    assert two.to_json_obj(only=ONLY[0]) == {"ImportanceScore": 0.25, "UpdatedAt": None}
    assert decay_values(two) == {"importanceScore": 0.25, "updatedAt": None}  # spelled otherwise: found all the same
    for n in range(entry_module._SHAPES_MAX + 10):  # as many spellings as an adversarial corpus could hold
        odd = Entry.from_json_obj({"id": f"e{n}", "content": "z", "importanceScore": 0.5, f"k{n}": n})
        assert decay_values(odd) == {"importanceScore": 0.5, "updatedAt": None}
    assert 0 < len(entry_module._AT) <= entry_module._SHAPES_MAX
