"""``dumps_indented`` is ``json.dumps(obj, indent=2, ensure_ascii=False)`` byte for byte (issue 27: entry files are
written with it; RockBot's files must keep their exact layout)."""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dreamkeeper.memory import Entry
from dreamkeeper.memory.jsontext import dumps_indented, values_at, with_values

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(),  # every code point, controls, surrogates and quotes included
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=25,
)


def _standard(obj: Any) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False)


@settings(max_examples=400, deadline=None)
@given(VALUES)
def test_same_text_as_json_dumps_for_any_json_value(value: Any) -> None:
    assert dumps_indented(value) == _standard(value)


def test_values_it_does_not_take_are_encoded_by_json_dumps_itself() -> None:
    class Text(str):
        pass

    odd: list[Any] = [
        {"t": (1, 2)},  # a tuple: a list to json
        {1: "int key", None: "none key", 2.5: "float key", False: "bool key"},
        {"s": Text("sub")},
        OrderedDict(a=1),
        {"deep": _nested(80)},  # past the nesting limit
        [math.nan, -math.inf, 1e-05, 1e16, -0.0],
    ]
    for value in odd:
        assert dumps_indented(value) == _standard(value)


def test_a_cycle_is_refused_as_json_dumps_refuses_it() -> None:
    loop: list[Any] = []
    loop.append(loop)
    try:
        dumps_indented(loop)
    except ValueError as exc:
        assert "Circular reference" in str(exc)
    else:
        raise AssertionError("a circular structure was encoded")


def test_entry_bytes_are_the_standard_layout() -> None:
    raw = {
        "id": "a1",
        "content": 'Ünïcode "quoted" \\ back\nline\u2028',
        "category": "people/family",
        "tags": [],
        "createdAt": "2026-01-02T03:04:05.1234567+00:00",
        "importanceScore": 1,
        "metadata": {"k": "v", "blank": ""},
        "unknownField": [1, 2.5, None, True, {"x": []}],
    }
    entry = Entry.from_json_obj(raw)
    assert entry.to_json_bytes() == (_standard(entry.to_json_obj()) + "\n").encode("utf-8")


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"d": [value]}
    return value


# ---- with_values: a top-level value's token replaced, the same bytes as encoding the changed object ----------------

KEYS = st.text(max_size=8)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(KEYS, VALUES, min_size=1, max_size=6), st.data())
def test_with_values_gives_the_bytes_of_the_changed_object(obj: dict[str, Any], data: st.DataObject) -> None:
    """For any object and any of its top-level keys holding a scalar: the same bytes as encoding the object with the
    new values; any key not holding a scalar (or not there at all) is refused, and nothing is guessed."""
    text = (_standard(obj) + "\n").encode()
    keys = data.draw(st.lists(st.sampled_from(sorted(obj)), unique=True, min_size=1, max_size=2))
    news = [data.draw(SCALARS) for _ in keys]
    changed = dict(obj)
    for key, new in zip(keys, news, strict=True):
        changed[key] = new
    got = with_values(text, [(key, obj[key], new) for key, new in zip(keys, news, strict=True)])
    if all(isinstance(obj[key], (str, int, float, bool, type(None))) for key in keys):
        assert got == (_standard(changed) + "\n").encode()
    else:
        assert got is None


def test_with_values_refuses_what_it_cannot_vouch_for() -> None:
    obj = {
        "id": "a",
        "content": 'the text "importanceScore": 0.6,\n  "importanceScore": 0.6',  # escaped: never a key's line
        "metadata": {"importanceScore": 0.6, "updatedAt": "x"},  # nested: four spaces in
        "importanceScore": 0.6,
        "updatedAt": "2030-01-01T00:00:00.0000000Z",
    }
    text = (_standard(obj) + "\n").encode()
    changes = [("importanceScore", 0.6, 0.5), ("updatedAt", obj["updatedAt"], "2030-01-02T00:00:00Z")]
    after = dict(obj, importanceScore=0.5, updatedAt="2030-01-02T00:00:00Z")
    assert with_values(text, changes) == (_standard(after) + "\n").encode()
    assert with_values(text, [("importanceScore", 0.7, 0.5)]) is None  # not the value the text holds
    assert with_values(text, [("ImportanceScore", 0.6, 0.5)]) is None  # spelled otherwise: not there
    assert with_values(text, [("missing", None, 1)]) is None
    assert with_values(text, [("metadata", obj["metadata"], 1)]) is None  # not a scalar
    assert with_values(text, [("importanceScore", 0.6, [0.5])]) is None
    assert with_values(text, [("importanceScore", 0.6, 0.5), ("missing", 1, 2)]) is None  # all or nothing
    twice = text.replace(b'  "updatedAt"', b'  "importanceScore": 0.6,\n  "updatedAt"')  # a key twice: refused
    assert with_values(twice, [("importanceScore", 0.6, 0.5)]) is None
    assert with_values(text.replace(b'0.6,\n  "updatedAt', b'0.61,\n  "updatedAt'), changes[:1]) is None


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(KEYS, VALUES, min_size=1, max_size=6), st.data())
def test_values_at_reads_the_scalars_an_object_holds(obj: dict[str, Any], data: st.DataObject) -> None:
    text = (_standard(obj) + "\n").encode()
    keys = data.draw(st.lists(st.sampled_from(sorted(obj)), unique=True, min_size=1, max_size=3))
    got = values_at(text, keys)
    if all(isinstance(obj[key], (str, int, float, bool, type(None))) for key in keys):
        assert got is not None and list(got) == keys
        assert json.dumps(got) == json.dumps({key: obj[key] for key in keys})  # NaN too, and each type
    else:
        assert got is None
    assert values_at(text, [*keys, "\0never a key"]) is None
