"""A cache file of the state directory, whole or not at all: a magic line naming its format, the sha256 of the
payload, the payload. Written by ``atomic.py``'s durable replace (temp, fsync, rename, directory fsync) and never
over anything but a regular file; read back only when the magic and the checksum hold. The cluster cache
(consolidation/cluster_cache.py) and the quiet memo (consolidation/quiet.py) are such files: losing one costs work,
never a decision, so every failure here is a log line and a False / a ValueError, nothing more."""

from __future__ import annotations

import hashlib
import logging
import os
import stat
from pathlib import Path

from dreamkeeper.memory.atomic import UNCHECKED, replace_file

log = logging.getLogger(__name__)


def write_checked(path: Path, magic: bytes, payload: bytes, what: str, then: str) -> bool:
    """``magic``, the payload's sha256 and ``payload``, durably in ``path``; False (logged as ``what`` not saved,
    and ``then``: what that costs) when ``path`` is not a regular file or the write fails (a full disk, say)."""
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode):
            log.warning("%s not saved: %s is not a regular file (left as it is)", what, path)
            return False
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("%s not saved (%s)", what, exc)
        return False
    try:
        path.parent.mkdir(exist_ok=True)
        replace_file(path, magic + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload, UNCHECKED)
    except OSError as exc:
        log.warning("%s not saved (%s); %s", what, exc, then)
        return False
    return True


def checked_payload(data: bytes, magic: bytes, what: str) -> bytes:
    """The payload of a file ``write_checked`` wrote; ValueError when it is another format or version, truncated or
    damaged (the checksum does not match)."""
    if not data.startswith(magic):
        raise ValueError(f"not a {what} of this version")
    digest, sep, payload = data[len(magic) :].partition(b"\n")
    if not sep or hashlib.sha256(payload).hexdigest().encode() != digest:
        raise ValueError("its checksum does not match (truncated or damaged)")
    return payload


__all__ = ["checked_payload", "write_checked"]
