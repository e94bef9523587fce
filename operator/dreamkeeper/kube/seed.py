"""``dreamkeeper seed-vocabulary``: copy the rendered vocabulary into the agent's volume only if it is absent.

The file on the volume is the agent operator's: once it exists it is never replaced, renamed over or truncated,
whatever the CR says (RockBot's init container lost edits with a missing-or-empty rule; this one has no such
case). The outcome and the file's sha256 go to the termination message so the operator can show whether the
volume matches the CR (condition ``VocabularyInSync``) without ever writing to it.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import uuid
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from dreamkeeper.memory import fsync_directory

SeedResult = Literal["created", "already-present", "failed"]
# Filesystems without hard links (some SMB/CSI drivers) refuse link(); O_EXCL still never clobbers.
_NO_HARDLINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS}


class SeedReport(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    result: SeedResult
    path: str
    sha256: str | None = None  # of the file now in the volume
    source_sha256: str | None = None  # of the rendered file the operator supplied
    message: str | None = None

    def to_message(self) -> str:
        text = self.model_dump_json(by_alias=True, exclude_none=True)
        if len(text.encode()) >= 4096:  # a kubelet truncates termination messages at 4 KiB
            text = self.model_copy(update={"message": (self.message or "")[:1000]}).model_dump_json(
                by_alias=True, exclude_none=True
            )
        return text


def sha256_hex(data: bytes) -> str:
    """A vocabulary file's identity: the operator's rendering and the file the init container found compare by it."""
    return hashlib.sha256(data).hexdigest()


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 16), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.fsync(fd)


def create_no_clobber(path: Path, data: bytes) -> bool:
    """Create ``path`` with ``data`` unless a file (or anything) already has that name. Never replaces.

    The content is written to a hidden temp file and hard-linked into place, so the name appears complete or
    not at all; link() fails when the name exists, so a concurrent writer or an existing file is never touched.
    """
    temp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)
    try:
        os.link(temp, path)
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in _NO_HARDLINKS:
            raise
        return _create_exclusive_in_place(path, data)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)
    fsync_directory(path.parent)
    return True


def _create_exclusive_in_place(path: Path, data: bytes) -> bool:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)
    fsync_directory(path.parent)
    return True


def seed_vocabulary(source: Path, destination: Path) -> SeedReport:
    """Seed ``destination`` from ``source`` if it does not exist; report what is there afterwards."""
    try:
        data = source.read_bytes()
    except OSError as exc:
        return SeedReport(result="failed", path=str(destination), message=f"cannot read {source}: {exc.strerror}")
    source_sha = sha256_hex(data)
    if not destination.parent.is_dir():
        return SeedReport(
            result="failed",
            path=str(destination),
            source_sha256=source_sha,
            message=f"agent directory {destination.parent} does not exist (check spec.agentPath); nothing written",
        )
    try:
        created = create_no_clobber(destination, data)
    except OSError as exc:
        return SeedReport(
            result="failed",
            path=str(destination),
            source_sha256=source_sha,
            message=f"cannot create {destination}: {exc.strerror or exc}; nothing was overwritten",
        )
    try:
        current: str | None = _sha256_of(destination)
        note = None
    except OSError as exc:
        current, note = None, f"present but unreadable: {exc.strerror or exc}"
    return SeedReport(
        result="created" if created else "already-present",
        path=str(destination),
        sha256=current,
        source_sha256=source_sha,
        message=note,
    )
