"""A write that cannot complete (full disk, file-size limit) fails with StoreWriteError; the old file is intact."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from dreamkeeper.memory import Entry, MemoryStore, StoreWriteError
from tests.memory.conftest import rockbot_entry, tree_bytes, write_raw

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Iterator[Path]:
    mountpoint = tmp_path / "tiny"
    mountpoint.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mountpoint)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.decode().strip()}); RLIMIT_FSIZE test covers this")
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", str(mountpoint)], check=True)


def _fill(directory: Path) -> None:
    fd = os.open(directory / f"filler-{uuid.uuid4().hex}", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 1024)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)


def test_full_tmpfs_update_fails_cleanly(tiny_tmpfs: Path) -> None:
    root = tiny_tmpfs / "memory"
    path = write_raw(root, rockbot_entry())
    store = MemoryStore(root)
    stored = store.require("a1b2c3d4e5f6")
    _fill(tiny_tmpfs)
    before = tree_bytes(root)
    with pytest.raises(StoreWriteError, match=r"previous version \(if any\) is intact") as failed:
        store.update(stored, stored.entry.evolve(content="Rose " * 20_000))
    assert failed.value.errno == 28  # ENOSPC
    assert tree_bytes(root) == before  # old bytes, and no temp file left
    assert json.loads(path.read_text())["content"].startswith("Rose is Jordan's sister")
    with pytest.raises(StoreWriteError):
        store.create(Entry(id="0123456789ab", content="x" * 50_000, category="people/family"))
    assert tree_bytes(root) == before


RLIMITED = """
import resource, signal, sys
from pathlib import Path
from dreamkeeper.memory import MemoryStore, StoreWriteError
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # else the kernel kills us instead of failing the write
resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))
store = MemoryStore(Path(sys.argv[1]))
stored = store.require("a1b2c3d4e5f6")
try:
    store.archive(stored.__class__(stored.entry.evolve(content="x" * 100_000), stored.path, stored.fingerprint), "r")
except StoreWriteError as exc:
    print("StoreWriteError", exc.errno, exc)
    sys.exit(0)
sys.exit("the oversized write succeeded")
"""


def test_file_size_limit_write_fails_cleanly(memory_root: Path) -> None:
    path = write_raw(memory_root, rockbot_entry())
    before = tree_bytes(memory_root)
    child = subprocess.run(
        [sys.executable, "-c", RLIMITED, str(memory_root)], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert child.returncode == 0, child.stderr + child.stdout
    assert child.stdout.startswith("StoreWriteError 27 ")  # EFBIG
    assert "intact" in child.stdout
    assert tree_bytes(memory_root) == before
    assert MemoryStore(memory_root).require("a1b2c3d4e5f6").entry.is_live
    assert path.exists()
