"""Validation of ids and category paths: nothing a proposer or a file names may escape the memory root."""

from __future__ import annotations

import re
from pathlib import Path

from dreamkeeper.memory.errors import InvalidCategoryError, InvalidIdError, PathEscapeError

_SEGMENT = re.compile(r"[A-Za-z0-9_-]+")
ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")  # and no "..": see validate_id
# RockBot's layout of an agent directory: entries under memory/, their vectors in memory/.embeddings/<id>.bin.
MEMORY_DIR = "memory"
EMBEDDINGS_DIR = ".embeddings"
EMBEDDING_SUFFIX = ".bin"


def memory_root(agent_dir: Path, memory_dir: Path | None = None) -> Path:
    """The agent's memory directory: ``memory_dir`` when given (``--memory-dir``), else AGENT_DIR/memory."""
    return memory_dir if memory_dir is not None else agent_dir / MEMORY_DIR


def embedding_file_name(entry_id: str) -> str:
    return entry_id + EMBEDDING_SUFFIX


def id_key(entry_id: str) -> str:
    """An id as ids are compared (RockBot's are case-insensitive): lower case, and the id's own string when it
    already is (``str.lower`` makes a new one even then). A scan keys every entry by it for the whole cycle: one
    string fewer per entry, ~6 MB at 100,000 entries (issue 27, bench/results/micro-s35.md)."""
    lowered = entry_id.lower()
    return entry_id if lowered == entry_id else lowered


def validate_id(entry_id: str) -> str:
    if not isinstance(entry_id, str) or not entry_id:
        raise InvalidIdError(str(entry_id), "blank")
    if not ID_PATTERN.fullmatch(entry_id) or ".." in entry_id:
        raise InvalidIdError(entry_id, "ids are 1-128 of [A-Za-z0-9_.-], starting alphanumeric, without '..'")
    return entry_id


def validate_category(category: str | None) -> str | None:
    """RockBot's rule: '/'-joined segments of [A-Za-z0-9_-]+, not rooted, no '..', not blank."""
    if category is None:
        return None
    if not category.strip():
        raise InvalidCategoryError(category, "blank")
    if category.startswith("/") or category.startswith("\\") or re.match(r"^[A-Za-z]:", category):
        raise InvalidCategoryError(category, "absolute paths are not categories")
    segments = category.split("/")
    for segment in segments:
        if segment in ("", ".", ".."):
            raise InvalidCategoryError(category, f"empty or relative segment {segment!r}")
        if not _SEGMENT.fullmatch(segment):
            raise InvalidCategoryError(category, f"segment {segment!r} is not [A-Za-z0-9_-]+")
    return category


def entry_path(root: Path, entry_id: str, category: str | None) -> Path:
    """Where an entry lives: root/{category}/{id}.json, or root/{id}.json when uncategorised."""
    path = entry_location(root, entry_id, category)
    ensure_inside(root, path)
    return path


def entry_location(root: Path, entry_id: str, category: str | None) -> Path:
    """``entry_path`` with id and category validated but without the (symlink-resolving) containment check: for
    callers that check containment themselves, e.g. once per directory."""
    validate_id(entry_id)
    validate_category(category)
    directory = root if category is None else root.joinpath(*category.split("/"))
    return directory / f"{entry_id}.json"


def ensure_inside(root: Path, path: Path) -> None:
    resolved_root = root.resolve()
    resolved = path.resolve()
    if resolved != resolved_root and resolved_root not in resolved.parents:
        raise PathEscapeError(path, root)


def category_of_path(root: Path, path: Path) -> str | None:
    relative = path.relative_to(root).parent
    return None if str(relative) in ("", ".") else relative.as_posix()
