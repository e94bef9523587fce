"""How a scan builds its objects for the entries it takes from the corpus index (corpus_index.py): a steady scan makes
one ``StoredEntry`` per file (its ``Path`` made only when asked for: stored.py), and the index's load one
``Fingerprint`` per record, 100k of each at 100,000 entries, so each is made the cheapest way that gives the very
object its constructor would."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path, PurePath
from typing import Any, Final


def slot_setters(cls: type, names: tuple[str, ...]) -> tuple[Callable[[Any, Any], None], ...]:
    """The ``__set__`` of each slot in ``names``, as ``cls``'s class chain defines it. Through them an object is
    built in half the time its ``__init__`` takes (which looks each name up on the class again), or without the
    checks a frozen class's ``__setattr__`` makes. So every object built this way must be given every field: for a
    dataclass, ``names`` must be exactly its fields in order; for any other class, they must include the slots it
    declares itself (a field added to the class is refused here until it is set too; pydantic's own slots, which
    the entry's rebuild sets beside the ``__dict__`` it is given, are inherited: entry_state.py)."""
    if dataclasses.is_dataclass(cls):
        fields = tuple(field.name for field in dataclasses.fields(cls))
        if fields != names:
            raise AssertionError(f"{cls.__name__}'s fields are {fields}, not {names}: the scan sets them one by one")
    else:
        missing = [name for name in cls.__dict__.get("__slots__", ()) if name not in names]
        if missing:
            raise AssertionError(f"{cls.__name__}'s slots {missing} are not set: every slot must be")
    setters = []
    for name in names:
        owner = next((c for c in cls.__mro__ if name in c.__dict__), None)
        if owner is None:
            raise AttributeError(f"{cls.__name__} has no slot {name!r}")
        setters.append(owner.__dict__[name].__set__)
    return tuple(setters)


def child_path(parents: dict[str, tuple[Callable[[str], Path], bool]], name: str) -> Path:
    """``Path(name)``, built from its directory's Path: parsing every path again cost as much as its stat."""
    directory, _, base = name.rpartition(os.sep)
    known = parents.get(directory)
    if known is None:
        parent = Path(directory)
        # CPython's own, as iterdir() uses it, bound once per directory; else the slow way
        make = getattr(parent, "_make_child_relpath", None) or parent.joinpath
        # ``name`` is the directory string, os.sep, and a name from scandir (never "", ".", ".." or holding a
        # separator): it is exactly the string the child's parts format to when a probe child formats so (not for a
        # directory of "." or ending in a separator, which pathlib drops: ``tests/memory/test_stored.py``).
        normal = str(make("x")) == f"{directory}{os.sep}x"
        known = parents[directory] = (make, normal)
    make, normal = known
    path: Path = make(base)
    if normal and _CACHES_STR:
        # Set, not formatted again from the parts by the first str(): every later stage names each entry's file
        # (the end-of-run listing alone formats all 10,000 of a 10k corpus, ~15 ms).
        path._str = name  # type: ignore[attr-defined]
    return path


# pathlib keeps a path's string in the ``_str`` slot, formatted on the first str() (CPython 3.8-3.12).
_CACHES_STR: Final = "_str" in getattr(PurePath, "__slots__", ())


__all__ = ["child_path", "slot_setters"]
