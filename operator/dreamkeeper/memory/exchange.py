"""The atomic swap of two directory entries (Linux ``renameat2(RENAME_EXCHANGE)``) that a guarded write uses to put its
temp file in place while keeping whatever it displaced (``atomic.py`` says why); split from ``atomic.py``.

A filesystem that refuses the exchange once is not asked again in this process: the caller's check-then-rename
fallback is used there. ``exchange_enabled = False`` forces that fallback (tests; filesystems known to lack it).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Final

log = logging.getLogger(__name__)

_AT_FDCWD: Final = -100
_RENAME_EXCHANGE: Final = 2
_NO_EXCHANGE = {errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP}


def _load_renameat2() -> Callable[[int, bytes, int, bytes, int], int] | None:
    """glibc's renameat2 (2.28+; Python's os module does not expose it). None elsewhere: the fallback is used."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        function = libc.renameat2
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


_renameat2 = _load_renameat2()
_no_exchange_devices: set[int] = set()
"""Filesystems (st_dev) that refused RENAME_EXCHANGE once: not asked again in this process."""

exchange_enabled = True
"""False forces the check-then-rename fallback (tests; filesystems known to lack the exchange)."""


def can_exchange(device: int) -> bool:
    """Whether a swap will be tried on this filesystem (it may still refuse, once)."""
    return _renameat2 is not None and exchange_enabled and device not in _no_exchange_devices


def exchange(a: Path | str, b: Path | str, device: int) -> bool:
    """Atomically swap the directory entries ``a`` and ``b``; False when the filesystem cannot (nothing changed).

    Raises FileNotFoundError when either is missing, as rename does."""
    renameat2 = _renameat2
    if renameat2 is None or not can_exchange(device):
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in _NO_EXCHANGE:
        _no_exchange_devices.add(device)
        log.warning("the filesystem of %s cannot swap files atomically; using check-then-rename there", b)
        return False
    raise OSError(code, os.strerror(code), str(b))
