"""``json.dumps(obj, indent=2, ensure_ascii=False)``, byte for byte, at C speed for what entry files hold.

With ``indent`` set, the standard library encodes in pure Python, one generator per nesting level and one small
string per token: on a cold start that writes every decayed entry of a 10k corpus, that encoder cost about a
fifth of the decay stage (issue 27). Here each scalar is encoded by the same C routines the standard encoder uses
(``encode_basestring``, ``float.__repr__``, ``int.__repr__``) and the layout is joined once per container. Any
value of another type (a subclass, a non-string key, a cycle) goes to ``json.dumps`` itself, so the output is
always exactly the standard one; tests/memory/test_jsontext.py checks it against ``json.dumps``.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring  # the C one when available (what ensure_ascii=False uses)
from typing import Any, Final

_INDENT: Final = "  "
_NESTING_LIMIT: Final = 64  # deeper than any entry we write: the standard encoder takes over (and its checks)


class _Fallback(Exception):
    """A value this encoder does not take: ``json.dumps`` encodes the whole object instead."""


def dumps_indented(obj: Any) -> str:
    """``json.dumps(obj, indent=2, ensure_ascii=False)``."""
    try:
        return _encode(obj, 0)
    except _Fallback:
        return json.dumps(obj, indent=2, ensure_ascii=False)


def _float(value: float) -> str:
    if value != value:
        return "NaN"
    if value == float("inf"):
        return "Infinity"
    if value == -float("inf"):
        return "-Infinity"
    return float.__repr__(value)


def _encode(value: Any, depth: int) -> str:
    kind = type(value)
    if kind is str:
        return str(encode_basestring(value))
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if kind is int:
        return int.__repr__(value)
    if kind is float:
        return _float(value)
    if depth >= _NESTING_LIMIT:
        raise _Fallback
    if kind is dict:
        if not value:
            return "{}"
        inner = "\n" + _INDENT * (depth + 1)
        parts = []
        for key, item in value.items():
            if type(key) is not str:
                raise _Fallback  # the standard encoder converts (or refuses) such keys
            parts.append(encode_basestring(key) + ": " + _encode(item, depth + 1))
        return "{" + inner + ("," + inner).join(parts) + "\n" + _INDENT * depth + "}"
    if kind is list:
        if not value:
            return "[]"
        inner = "\n" + _INDENT * (depth + 1)
        return (
            "[" + inner + ("," + inner).join(_encode(item, depth + 1) for item in value) + "\n" + _INDENT * depth + "]"
        )
    raise _Fallback  # a tuple, a subclass, anything else: exactly as the standard encoder does it


__all__ = ["dumps_indented"]
