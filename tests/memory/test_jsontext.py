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
from dreamkeeper.memory.jsontext import dumps_indented

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
