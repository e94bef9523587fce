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
    """The ``__set__`` of each of a slotted dataclass's fields, which must be exactly ``names`` in order (a field
    added to the class must be set here too: refused until it is). Through them, a frozen dataclass is built in half
    the time its ``__init__`` takes (which looks each name up on the class again)."""
    fields = tuple(field.name for field in dataclasses.fields(cls))
    if fields != names:
        raise AssertionError(f"{cls.__name__}'s fields are {fields}, not {names}: the scan sets them one by one")
    return tuple(cls.__dict__[name].__set__ for name in names)


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
