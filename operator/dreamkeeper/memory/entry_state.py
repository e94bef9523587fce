"""How an entry is pickled (``Entry.__reduce__``): its field values, flat, and the three things pydantic keeps beside
them, restored by one function that checks what it is given. The corpus index (corpus_index.py) loads 100k entries
from such pickles at the start of every cycle, with an unpickler that may call only this among entry functions."""

from __future__ import annotations

from typing import Any

from dreamkeeper.memory.entry import _FIELD_NAMES, Entry, _Origin, _set
from dreamkeeper.memory.scan_objects import slot_setters


def state(entry: Entry) -> tuple[Any, ...]:
    """The field values in the model's order, pydantic's extra and fields-set, and how the entry was read."""
    fields = entry.__dict__
    values = tuple([fields[name] for name in _FIELD_NAMES])
    return (values, entry.__pydantic_extra__, entry.__pydantic_fields_set__, getattr(entry, "_origin", None))


def restored(
    values: tuple[Any, ...], extra: dict[str, Any] | None, fields_set: set[str], origin: _Origin | None
) -> Entry:
    """The entry ``state`` describes, built as the parser's fast path builds one (pydantic's own ``model_construct``
    way: its ``__dict__``, extra, fields-set and private slots set directly, no validation: the values are the ones
    a parse produced). Containers of the wrong kind (a planted index) are refused."""
    if (
        type(values) is not tuple
        or len(values) != len(_FIELD_NAMES)
        or type(fields_set) is not set
        or not (extra is None or type(extra) is dict)
        or not (origin is None or type(origin) is _Origin)
    ):
        raise ValueError("not an entry's pickled state")
    entry = Entry.__new__(Entry)
    _set(entry, "__dict__", dict(zip(_FIELD_NAMES, values, strict=True)))
    _set(entry, "__pydantic_extra__", extra)
    # Shared with the other entries of its shape, as parsed ones share theirs: ``Entry.__setattr__`` copies it first.
    _set(entry, "__pydantic_fields_set__", fields_set)
    _set(entry, "__pydantic_private__", None)
    _set(entry, "_origin", origin)
    return entry


def restored_fields(
    fields: dict[str, Any], extra: dict[str, Any] | None, fields_set: set[str], origin: _Origin | None
) -> Entry:
    """``restored``, given the entry's ``__dict__`` itself (the corpus index pickles it: the unpickler builds it in
    C from the shared key strings, where ``dict(zip(...))`` over the values cost a fifth of a 100k-entry load). It
    must name exactly the model's fields, in the model's order (a planted index's other keys are refused)."""
    if (
        type(fields) is not dict
        or tuple(fields) != _FIELD_NAMES
        or type(fields_set) is not set
        or not (extra is None or type(extra) is dict)
        or not (origin is None or type(origin) is _Origin)
    ):
        raise ValueError("not an entry's pickled state")
    # The slots set through their own descriptors: ``object.__setattr__`` looks each name up on the class first (a
    # third of this function's cost, which runs once per record of a 100k-entry index).
    entry = _new(Entry)
    _set(entry, "__dict__", fields)
    _set_extra(entry, extra)
    _set_fields_set(entry, fields_set)  # shared, as in ``restored``
    _set_private(entry, None)
    _set_origin(entry, origin)
    return entry


_new = object.__new__
_set_extra, _set_fields_set, _set_private, _set_origin = slot_setters(
    Entry, ("__pydantic_extra__", "__pydantic_fields_set__", "__pydantic_private__", "_origin")
)


__all__ = ["restored", "restored_fields", "state"]
