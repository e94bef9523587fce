"""Tolerant reading of whatever a model sends back, then strict validation.

Servers without structured output wrap JSON in reasoning blocks, code fences and prose. We strip ``<think>`` blocks,
look inside fences first, and scan for balanced JSON objects with a real brace matcher that respects strings (not
RockBot's first ``{`` to last ``}``). Raw control characters inside strings are accepted (``strict=False``):
llama.cpp's JSON grammar lets a model write a literal newline in a string, and strict parsing threw such replies
away. The first object that carries the expected keys is validated with pydantic; anything else is an unusable
reply, which changes nothing, and the error says what the reply was.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pydantic import ValidationError

from dreamkeeper.consolidation import Proposal
from dreamkeeper.memory import loads_json

_THINK_BLOCK = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.S | re.I)
_THINK_CLOSE = re.compile(r"</(?:think|thinking|reasoning)>", re.I)
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*[ \t]*\n?(.*?)```", re.S)
MAX_CANDIDATES = 200  # brace scanning is quadratic on hostile input; a real reply has a handful of objects
PREVIEW_CHARS = 300

_TOP_KEYS = {"todelete": "toDelete", "tosave": "toSave"}
_ITEM_KEYS = {
    "content": "content",
    "category": "category",
    "tags": "tags",
    "sourceids": "sourceIds",
    "importance": "importance",
}


class ReplyError(ValueError):
    """The reply cannot be used. The message says why, with a truncated preview of what was sent."""


def preview(text: str | None, limit: int = PREVIEW_CHARS) -> str:
    if text is None:
        return "<none>"
    flat = text.replace("\n", "\\n")
    return flat if len(flat) <= limit else flat[:limit] + f"… ({len(text)} chars)"


def strip_reasoning(text: str) -> str:
    """Drop ``<think>…</think>`` blocks; a lone closing tag means the template ate the opener: drop what precedes."""
    text = _THINK_BLOCK.sub("", text)
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        text = text[closes[-1].end() :]
    return text.strip()


def _match_brace(text: str, start: int) -> int | None:
    """Index of the ``}`` closing the ``{`` at ``start``, skipping braces inside JSON strings; None if unbalanced."""
    depth = 0
    in_string = escaped = False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index
    return None


def iter_json_objects(text: str) -> Iterator[dict[str, Any]]:
    """Every balanced ``{…}`` that parses as a JSON object, outermost first, in order of their opening brace."""
    tried = 0
    position = text.find("{")
    while position >= 0 and tried < MAX_CANDIDATES:
        end = _match_brace(text, position)
        if end is not None:
            tried += 1
            try:
                value = loads_json(text[position : end + 1], strict=False)
            except ValueError:
                value = None
            if isinstance(value, dict):
                yield value
        # Keep scanning inside as well: a wrapper such as {"result": {...}} holds the object we want.
        position = text.find("{", position + 1)


def candidates(text: str) -> Iterator[dict[str, Any]]:
    cleaned = strip_reasoning(text)
    for fence in _FENCE.finditer(cleaned):
        yield from iter_json_objects(fence.group(1))
    yield from iter_json_objects(cleaned)


def canon(key: object) -> str:
    return str(key).replace("_", "").replace("-", "").lower()


def _id_list(value: Any) -> Any:
    # RockBot ids are 12 hex chars and may be all digits; a model may emit them as JSON numbers.
    if isinstance(value, list):
        return [str(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in value]
    return value


def _normalise_proposal(obj: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in obj.items():
        canonical = _TOP_KEYS.get(canon(key))
        if canonical is not None:
            out[canonical] = value
    if "toDelete" in out:
        out["toDelete"] = _id_list(out["toDelete"])
    saves = out.get("toSave")
    if isinstance(saves, list):
        items: list[Any] = []
        for item in saves:
            if isinstance(item, dict):
                fixed = {_ITEM_KEYS[canon(k)]: v for k, v in item.items() if canon(k) in _ITEM_KEYS}
                if "sourceIds" in fixed:
                    fixed["sourceIds"] = _id_list(fixed["sourceIds"])
                items.append(fixed)
            else:
                items.append(item)
        out["toSave"] = items
    return out


def _diagnose(text: str, wanted: str) -> str:
    """What a reply without a usable object was instead: prose, the wrong object, cut-off or malformed JSON."""
    cleaned = strip_reasoning(text)
    objects = list(candidates(text))
    if objects:
        keys = sorted({str(k) for obj in objects[:10] for k in obj})
        shown = ", ".join(keys[:8]) + (", …" if len(keys) > 8 else "") if keys else "none"
        return f"the reply is JSON without {wanted} (its keys: {shown})"
    start = cleaned.find("{")
    if start < 0:
        return f"the reply has no JSON object (prose only; {wanted} expected)"
    end = _match_brace(cleaned, start)
    if end is None:
        return "the reply's JSON is cut off (an object is never closed)"
    try:
        loads_json(cleaned[start : end + 1], strict=False)
    except ValueError as exc:
        return f"the reply's JSON does not parse ({exc})"
    return f"the reply has no JSON object with {wanted}"


def parse_proposal(text: str | None) -> Proposal:
    """The first JSON object with ``toDelete`` or ``toSave`` (any casing), validated; else :class:`ReplyError`."""
    if text is None or not text.strip():
        raise ReplyError("empty reply")
    for obj in candidates(text):
        if not any(canon(k) in _TOP_KEYS for k in obj):
            continue
        try:
            return Proposal.model_validate(_normalise_proposal(obj))
        except ValidationError as exc:
            detail = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
            raise ReplyError(f"reply does not fit the proposal schema ({detail}): {preview(text)}") from None
    raise ReplyError(f"{_diagnose(text, 'toDelete/toSave')}: {preview(text)}")


def parse_repair(text: str | None) -> str:
    """The revised text of a repair reply (``{"content": "..."}``); else :class:`ReplyError`."""
    if text is None or not text.strip():
        raise ReplyError("empty reply")
    for obj in candidates(text):
        for key, value in obj.items():
            if canon(key) == "content":
                if isinstance(value, str) and value.strip():
                    return value
                raise ReplyError(f"repair reply has no usable content: {preview(text)}")
    raise ReplyError(f"{_diagnose(text, 'content')}: {preview(text)}")
