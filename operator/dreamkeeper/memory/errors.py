"""Typed errors of the memory store. Each says what was wrong and what was kept."""

from __future__ import annotations

from pathlib import Path


class MemoryStoreError(Exception):
    """Base class for store failures."""


class InvalidIdError(MemoryStoreError, ValueError):
    def __init__(self, entry_id: str, why: str) -> None:
        super().__init__(f"invalid entry id {entry_id!r}: {why}; nothing was written")
        self.entry_id = entry_id


class InvalidCategoryError(MemoryStoreError, ValueError):
    def __init__(self, category: str, why: str) -> None:
        super().__init__(f"invalid category {category!r}: {why}; nothing was written")
        self.category = category


class PathEscapeError(MemoryStoreError, ValueError):
    def __init__(self, path: Path, root: Path) -> None:
        super().__init__(f"refusing {path}: it resolves outside the memory root {root}; nothing was written")
        self.path = path


class EntryNotFoundError(MemoryStoreError, KeyError):
    def __init__(self, entry_id: str) -> None:
        super().__init__(f"no memory entry with id {entry_id!r}")
        self.entry_id = entry_id

    def __str__(self) -> str:  # KeyError's repr-quoting hides the message otherwise
        return str(self.args[0])


class ConflictError(MemoryStoreError):
    """The file changed between the caller's read and its write (the agent wrote concurrently)."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"conflict on {path}: {why}; the file on disk was left untouched")
        self.path = path


class DuplicateIdError(MemoryStoreError):
    def __init__(self, entry_id: str, paths: list[Path]) -> None:
        joined = ", ".join(str(p) for p in paths)
        super().__init__(f"entry id {entry_id!r} exists in several files ({joined}); all were kept")
        self.entry_id = entry_id


class LockHeldError(MemoryStoreError):
    def __init__(self, path: Path, holder: str) -> None:
        super().__init__(f"another dreamkeeper cycle holds {path} ({holder}); nothing was changed")
        self.path = path
        self.holder = holder


class StoreWriteError(MemoryStoreError, OSError):
    """A write failed (full disk, permissions); the previous file is intact."""

    def __init__(self, path: Path, cause: OSError) -> None:
        super().__init__(f"could not write {path}: {cause.strerror or cause}; the previous version (if any) is intact")
        self.path = path
        self.errno = cause.errno


class StateDirError(MemoryStoreError, OSError):
    """dreamkeeper's state directory (AGENT_DIR/.dreamkeeper) is not usable: missing agent directory, a symlink,
    read-only. Nothing was changed."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path}: {why}; nothing was changed")
        self.path = path
