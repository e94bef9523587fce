"""Embeddings are read when present and well-formed, and never required."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from dreamkeeper.memory import InvalidIdError, MemoryStore
from dreamkeeper.memory.stats import compute_stats
from tests.memory.conftest import rockbot_entry, write_raw


@pytest.fixture
def embedded(memory_root: Path) -> MemoryStore:
    for entry_id in ("present00001", "absent000001", "ragged000001", "empty0000001", "nan000000001"):
        write_raw(memory_root, rockbot_entry(entry_id))
    directory = memory_root / ".embeddings"
    directory.mkdir()
    (directory / "present00001.bin").write_bytes(struct.pack("<4f", 0.5, -0.25, 1.0, 0.0))
    (directory / "ragged000001.bin").write_bytes(struct.pack("<3f", 1, 2, 3) + b"\x01\x02")
    (directory / "empty0000001.bin").write_bytes(b"")
    (directory / "nan000000001.bin").write_bytes(struct.pack("<2f", float("nan"), 1.0))
    return MemoryStore(memory_root)


def test_present_vector_is_read_as_float32(embedded: MemoryStore) -> None:
    vector = embedded.load_embedding("present00001")
    assert vector is not None and vector.dtype == np.float32
    assert vector.tolist() == [0.5, -0.25, 1.0, 0.0]


@pytest.mark.parametrize("entry_id", ["absent000001", "ragged000001", "empty0000001", "nan000000001"])
def test_absent_or_broken_vectors_are_ignored(embedded: MemoryStore, entry_id: str) -> None:
    assert embedded.load_embedding(entry_id) is None
    assert embedded.require(entry_id).entry.id == entry_id  # the entry itself is unaffected


def test_embedding_ids_are_validated(embedded: MemoryStore) -> None:
    with pytest.raises(InvalidIdError):
        embedded.load_embedding("../../etc/passwd")


def test_embeddings_dir_is_not_scanned_as_entries(embedded: MemoryStore) -> None:
    (embedded.root / ".embeddings" / "looks-like.json").write_text("{}")
    assert len(embedded.scan().entries) == 5
    stats = compute_stats(embedded)
    assert stats.embeddings == 1 and stats.embedding_dimensions == [4]


def test_embedding_files_lists_every_vector_file_casefolded(embedded: MemoryStore, tmp_path: Path) -> None:
    names = embedded.embedding_files()
    assert names == {"present00001.bin", "ragged000001.bin", "empty0000001.bin", "nan000000001.bin"}
    assert "absent000001.bin" not in names
    assert MemoryStore(tmp_path / "no-such-memory").embedding_files() == frozenset()


def test_cycle_loads_listed_embeddings_only(embedded: MemoryStore, memory_root: Path) -> None:
    from dreamkeeper.consolidation.cycle import Cycle, CycleOptions
    from dreamkeeper.proposers import OfflineProposer

    load = Cycle(
        CycleOptions(agent_dir=memory_root.parent, memory_dir=memory_root), OfflineProposer()
    )._embedding_loader()
    present = load("present00001")
    assert present is not None and present.tolist() == [0.5, -0.25, 1.0, 0.0]
    assert load("absent000001") is None and load("ragged000001") is None
