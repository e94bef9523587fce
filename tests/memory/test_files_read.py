"""``files.read_fd`` / ``read_regular``: the whole file, whatever the size the caller's ``fstat`` gave, read with one
``read`` into a buffer of the file's size when the size is right (issue 27: every entry read asked for 1 MiB and
read twice; the 55 MB corpus index was read in pieces and joined)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dreamkeeper.memory import UnsafeFileError, read_regular
from dreamkeeper.memory.atomic import read_with_stat
from dreamkeeper.memory.files import MiB, read_fd

SIZES = [0, 1, 517, MiB - 1, MiB, MiB + 1, 3 * MiB + 5]


def _payload(size: int) -> bytes:
    return (bytes(range(251)) * (size // 251 + 1))[:size]


def _read(path: Path, limit: int, size: int | None) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        return read_fd(fd, path, limit, size)
    finally:
        os.close(fd)


@pytest.mark.parametrize("size", SIZES)
def test_every_size_is_read_whole_with_and_without_its_size(tmp_path: Path, size: int) -> None:
    path = tmp_path / "f"
    data = _payload(size)
    assert len(data) == size
    path.write_bytes(data)
    assert _read(path, 8 * MiB, size) == data
    assert _read(path, 8 * MiB, None) == data
    assert read_regular(path, 8 * MiB) == data


@pytest.mark.parametrize("stale", [0, 10, 499])
def test_a_file_larger_than_its_stale_size_is_read_to_its_end(tmp_path: Path, stale: int) -> None:
    # The file grew between the caller's fstat and the read: the first read fills what it asked, so it reads on.
    path = tmp_path / "f"
    data = _payload(3 * MiB + 11)
    path.write_bytes(data)
    assert _read(path, 8 * MiB, stale) == data


@pytest.mark.parametrize("stale", [600, 5 * MiB])
def test_a_file_smaller_than_its_stale_size_is_read_to_its_end(tmp_path: Path, stale: int) -> None:
    path = tmp_path / "f"
    data = _payload(517)
    path.write_bytes(data)
    assert _read(path, 8 * MiB, stale) == data


def test_a_file_that_grew_past_the_limit_is_still_refused(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 1001)
    with pytest.raises(UnsafeFileError, match="grew past"):
        _read(path, 1000, 1000)  # the fstat said 1000 (within the limit); it holds 1001
    with pytest.raises(UnsafeFileError, match="grew past"):
        _read(path, 1000, None)
    assert _read(path, 1001, 1001) == b"x" * 1001


def test_an_entry_sized_file_is_one_read_into_a_buffer_of_its_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "e.json"
    data = b'{"id": "a1", "content": "Jordan renewed the PWOP domain."}'
    path.write_bytes(data)
    asked: list[int] = []
    real_read = os.read

    def counting_read(fd: int, n: int) -> bytes:
        asked.append(n)
        return real_read(fd, n)

    monkeypatch.setattr(os, "read", counting_read)
    got, fingerprint, st = read_with_stat(path)
    assert got == data and fingerprint.size == len(data) == st.st_size
    assert asked == [len(data) + 1]  # not 1 MiB, and no second read to find the end
    asked.clear()
    assert read_regular(path, 8 * MiB) == data
    assert asked == [len(data) + 1]
    asked.clear()
    assert _read(path, 8 * MiB, None) == data
    assert asked == [MiB, MiB]  # without a size: as before
