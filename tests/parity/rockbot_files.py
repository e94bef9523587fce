"""Entry files byte for byte as RockBot writes them (``FileMemoryStore`` + ``MemoryEntry``, MarimerLLC/rockbot
@8a7e360e / @029f5eea; rockbot-source.md §11): System.Text.Json with camelCase names, ``WriteIndented`` (2 spaces),
nulls written, no trailing newline, properties in declaration order, DateTimeOffsets in the round-trip "O" form
(7 fraction digits), importance as a float32 in its shortest form, and the default ``JavaScriptEncoder``, which
escapes every non-ASCII UTF-16 unit and ``"&'+<>`` `` ` `` as ``\\uXXXX``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from tests.agents.caching_agent import FIELDS  # RockBot's MemoryEntry properties, in declaration order

_SHORT_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}
_ESCAPED_ASCII = set("\"&'+<>`")


class Float32(float):
    """A number RockBot holds as a C# ``float``: written with the fewest digits that read back as that float32."""


def o_format(value: datetime) -> str:
    """.NET's ``DateTimeOffset.ToString("O")``: 7 fraction digits and an offset."""
    value = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    offset = value.utcoffset()
    assert offset is not None
    minutes = int(offset.total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    zone = f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
    return value.strftime("%Y-%m-%dT%H:%M:%S") + f".{value.microsecond * 10:07d}" + zone


def _string(text: str) -> str:
    out = ['"']
    for unit in _utf16_units(text):
        char = chr(unit)
        if char in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[char])
        elif unit < 0x20 or unit > 0x7E or char in _ESCAPED_ASCII:
            out.append(f"\\u{unit:04X}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _utf16_units(text: str) -> list[int]:
    data = text.encode("utf-16-le", "surrogatepass")
    return [int.from_bytes(data[i : i + 2], "little") for i in range(0, len(data), 2)]


def _number(value: float | int) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    text = str(np.float32(value)) if isinstance(value, Float32) else repr(float(value))
    return text[:-2] if text.endswith(".0") else text.replace("e", "E")


def dumps(value: Any, indent: int = 0) -> str:
    """System.Text.Json's indented output of ``value``."""
    pad, inner = "  " * indent, "  " * (indent + 1)
    if value is None:
        return "null"
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, datetime):
        return _string(o_format(value))
    if isinstance(value, bool | int | float):
        return _number(value)
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        items = [f"{inner}{_string(str(k))}: {dumps(v, indent + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, Sequence):
        if not value:
            return "[]"
        return "[\n" + ",\n".join(inner + dumps(v, indent + 1) for v in value) + "\n" + pad + "]"
    raise TypeError(f"cannot serialise {type(value).__name__}")


def entry(entry_id: str, content: str, **fields: Any) -> dict[str, Any]:
    """A MemoryEntry as RockBot builds it: every property present, defaults as its record declares them."""
    created = fields.pop("createdAt", datetime(2026, 9, 1, 12, 0, tzinfo=UTC))
    obj: dict[str, Any] = {
        "id": entry_id,
        "content": content,
        "category": None,
        "tags": [],
        "createdAt": created,
        "updatedAt": None,
        "metadata": None,
        "importanceScore": Float32(0.5),
        "lastSeenAt": created,
        "reinforcementCount": 1,
        "verify": None,
        "supersededBy": None,
        "archivedAt": None,
        "archiveReason": None,
    }
    for key, value in fields.items():
        assert key in obj, key
        obj[key] = Float32(value) if key == "importanceScore" and isinstance(value, float) else value
    return obj


def write(memory_root: Path, obj: Mapping[str, Any]) -> Path:
    """Write one entry file where RockBot puts it (``{category}/{id}.json``) and as it writes it."""
    category = obj.get("category")
    directory = memory_root.joinpath(*str(category).split("/")) if category else memory_root
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{obj['id']}.json"
    ordered = {key: obj[key] for key in FIELDS if key in obj} | {k: v for k, v in obj.items() if k not in FIELDS}
    path.write_bytes(dumps(ordered).encode("utf-8"))
    return path
