"""promtool and prometheus from Debian's `prometheus` package (installed by tests/tools/install.d/30-podman.sh)."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.cluster.tools import ToolMissingError


def binary(name: str) -> Path:
    """Path of promtool/prometheus; a missing one raises ToolMissingError (tests fail, never skip)."""
    found = shutil.which(name)
    if found is None:
        raise ToolMissingError(f"{name} is not installed; run `make tools` (Debian package `prometheus`)")
    return Path(found)
