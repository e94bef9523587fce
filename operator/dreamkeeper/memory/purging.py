"""Deleting one archived entry file for good: the only deletion of an entry dreamkeeper makes (``MemoryStore.purge``).

The agent restores and archives in place (.NET's ``File.WriteAllText``: it opens the file, takes its lock, *then*
truncates and writes). So a purge that checks the file and then deletes it can delete an entry the agent has
just restored (issue 22: purge parked the file, checked it, and deleted it, while the agent's restore was landing in
it through a descriptor it opened before). The purge therefore:

1. opens the entry and checks it is still the version the scan read (else nothing is moved);
2. moves it out of the agent's namespace (``.{name}.{hex}.purging``) and checks that the name it moved is the very
   file it opened (inode) and still that version (a write landing in between is put back under its name);
3. deletes the parked name, then reads the file once more **through the descriptor it kept**: a write the agent
   made through a descriptor of its own, even after the name was gone, is seen there, and put back under the
   entry's name (or kept beside it as a conflict copy if the agent wrote the entry again meanwhile).

A write that starts before step 2 and lands after step 3 (microseconds of the agent's write against our rename,
read and fsync) cannot be seen by anyone: that window is what remains, and it is the width of one write.
"""

from __future__ import annotations

import contextlib
import logging
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

from dreamkeeper.memory.atomic import (
    MUST_NOT_EXIST,
    Fingerprint,
    Held,
    conflict_path,
    fsync_directory,
    replace_file,
    unlink_durably,
)
from dreamkeeper.memory.errors import ConflictError

log = logging.getLogger(__name__)

PURGING_SUFFIX: Final = ".purging"  # an entry file parked by purge while it verifies it

PurgeSeam = Callable[[str, Path], None]
_seam: PurgeSeam | None = None


@contextlib.contextmanager
def purge_seam(hook: PurgeSeam) -> Iterator[None]:
    """Tests only: ``hook(stage, path)`` at ``"opened"`` (checked, before the park), ``"parked"`` (before the
    check of what was parked) and ``"unlinked"`` (the name is gone, the descriptor not yet read again): where the
    agent's in-place write is injected."""
    global _seam
    previous, _seam = _seam, hook
    try:
        yield
    finally:
        _seam = previous


def _at(stage: str, path: Path) -> None:
    if _seam is not None:
        _seam(stage, path)


def purge_file(path: Path, expected: Fingerprint) -> None:
    """Delete the entry file at ``path`` if it is still ``expected``; ConflictError (the file kept, or the agent's
    late write put back) otherwise."""
    held = Held.open(path)
    if held is None:
        raise ConflictError(path, "removed (or no longer a regular file) since it was read")
    try:
        if held.fingerprint != expected:
            raise ConflictError(path, "changed since it was read")
        _at("opened", path)
        parked = path.with_name(f".{path.name}.{uuid.uuid4().hex}{PURGING_SUFFIX}")
        try:
            os.rename(path, parked)
        except FileNotFoundError as exc:
            raise ConflictError(path, "removed since it was read") from exc
        _at("parked", path)
        same_file = _inode(parked) == os.fstat(held.fd).st_ino
        if not same_file or held.changed() is not None:
            # The agent saved (temp + rename) or wrote in place after our check: its version goes back.
            unpark(parked, path)
            raise ConflictError(path, "changed since it was read")
        unlink_durably(parked)
        _at("unlinked", path)
        late = held.changed()
        if late is not None:
            kept = _put_back_late(path, late)
            raise ConflictError(
                path, f"the agent wrote it in place while it was purged; its version was put back{kept}"
            )
    finally:
        held.close()


def _inode(path: Path) -> int | None:
    try:
        return os.lstat(path).st_ino
    except OSError:
        return None


def _put_back_late(path: Path, data: bytes) -> str:
    """The agent's write landed in the purged file after its name was gone: recreate the entry with it (never over
    a file the agent wrote again meanwhile: that one is newer, and this version is kept beside it)."""
    log.warning("purge: the agent wrote %s in place while it was being purged; its version is put back", path)
    try:
        replace_file(path, data, MUST_NOT_EXIST)
        return ""
    except ConflictError:
        copy = conflict_path(path)
        replace_file(copy, data, MUST_NOT_EXIST)
        return f"; the entry was written again meanwhile, so this version is kept at {copy}"


def unpark(parked: Path, original: Path) -> bool:
    """Put a parked entry back under its name; False (and the parked copy kept) when the name is taken."""
    try:
        os.link(parked, original)
    except FileExistsError:
        # The agent wrote yet again; its newest file is in place. Keep the parked one too, and say where.
        log.warning("purge: %s was written again meanwhile; the earlier copy is kept at %s", original, parked)
        return False
    unlink_durably(parked)  # only the extra name: the data is back under its own name
    with contextlib.suppress(OSError):
        fsync_directory(original.parent)
    return True


__all__ = ["PURGING_SUFFIX", "purge_file", "purge_seam", "unpark"]
