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
from collections.abc import Sequence
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


_SCALARS: Final = (str, int, float, bool, type(None))


def with_values(text: bytes, changes: Sequence[tuple[str, Any, Any]]) -> bytes | None:
    """``text``, the UTF-8 of ``dumps_indented(obj) + "\n"`` for a JSON object ``obj``, as it would be with each
    ``(key, old, new)`` of ``changes`` applied: ``obj[key]`` (a top-level key, ``old`` its value there) set to ``new``.
    ``old`` and ``new`` are scalars (a string, a number, true, false or null: one token each); None when ``text``
    does not hold each key once with that very value (then the caller encodes ``obj`` itself).

    A decay changes two values of an entry file this process wrote: re-encoding the whole entry for them cost more
    than the rest of its write (issue 27). Why replacing the tokens gives the very bytes ``dumps_indented`` would:
    the layout of an object depends on its keys and each value's own text only; a top-level key is written as a
    line break, two spaces, the key's JSON string and ": ", and no other text can hold that (a string's line break
    is escaped as ``\\n``; a nested object's keys are indented by four spaces or more); a scalar's text holds no line
    break and ends where the line's "," or the closing line break begins."""
    for key, old, new in changes:
        if type(old) not in _SCALARS or type(new) not in _SCALARS or type(key) is not str:
            return None
        head = _head(key)
        at = text.find(head)
        if at < 0 or text.find(head, at + 1) >= 0:
            return None
        start = at + len(head)
        before = _encode(old, 1).encode("utf-8")
        end = start + len(before)
        if text[start:end] != before or text[end : end + 1] not in (b",", b"\n"):
            return None
        text = text[:start] + _encode(new, 1).encode("utf-8") + text[end:]
    return text


def values_at(text: bytes, keys: Sequence[str]) -> dict[str, Any] | None:
    """The scalar values of ``keys`` (top-level keys) in ``text``, the UTF-8 of ``dumps_indented(obj) + "\n"``:
    ``{key: obj[key]}`` in ``keys``' order, each read from its own line (``with_values`` says why a top-level key's
    line is found by its text alone); None when a key is not there once or holds no scalar."""
    out: dict[str, Any] = {}
    for key in keys:
        head = _head(key)
        at = text.find(head)
        if at < 0 or text.find(head, at + 1) >= 0:
            return None
        start = at + len(head)
        end = text.find(b"\n", start)
        if end < 0:
            return None
        if text[end - 1 : end] == b",":
            end -= 1
        if start == end or text[start] in b"{[":
            return None  # a container's first line: not a scalar
        try:
            out[key] = _scalar(text[start:end])
        except ValueError:  # not a scalar's text after all (bytes of another layout): nothing is guessed
            return None
    return out


def _head(key: str) -> bytes:
    """A top-level key's line up to its value: a line break, the indent, the key's JSON string and ": "."""
    head = _HEADS.get(key)
    if head is None:
        head = ("\n" + _INDENT + str(encode_basestring(key)) + ": ").encode("utf-8")
        if len(_HEADS) < 64:  # the few keys callers ask for (a decay's two)
            _HEADS[key] = head
    return head


_HEADS: dict[str, bytes] = {}


def _scalar(token: bytes) -> Any:
    """``json.loads(token)`` for a scalar's text as ``_encode`` writes it, the common forms without the decoder
    (whose own overhead was most of the cost of reading two values)."""
    first = token[:1]
    if first == b'"':
        if b"\\" not in token and len(token) >= 2 and token.endswith(b'"'):
            return token[1:-1].decode("utf-8")  # no escape: the string's own characters
    elif token == b"null":
        return None
    elif token == b"true":
        return True
    elif token == b"false":
        return False
    elif token.lstrip(b"-").isdigit():
        return int(token)
    elif first in _NUMBER_STARTS:
        return float(token)  # a float's repr, NaN, the infinities: what the decoder gives for them (float())
    return json.loads(token)  # a string with escapes (or anything unforeseen: the decoder's own answer)


_NUMBER_STARTS: Final = frozenset(bytes([c]) for c in b"-0123456789NI")


__all__ = ["dumps_indented", "values_at", "with_values"]
