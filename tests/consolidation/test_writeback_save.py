"""The write-back index saved in pieces (records.py ``_serialised``, statefiles.py ``replace_state_streamed``): what
loads back is what was saved, whatever the piece boundaries; only the journals and templates a record uses are
written; a full volume fails the save cleanly (the previous index intact, no temp left) on a real tmpfs."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from dreamkeeper.consolidation.baseline import Counters
from dreamkeeper.consolidation.recovery import sweep_leftovers
from dreamkeeper.consolidation.writeback import records as records_module
from dreamkeeper.consolidation.writeback.records import Archived, Layer, WriteBackIndex, index_path
from dreamkeeper.memory import REVIEWED_AT, REVIEWED_HASH, StoreWriteError, replace_state_streamed

REPO = Path(__file__).resolve().parents[2]
JOURNAL, OTHER, UNUSED = "20261201T000000Z-aaaaaa", "20261202T000000Z-bbbbbb", "20261101T000000Z-cccccc"
AT = {JOURNAL: "2026-12-01T00:00:00+00:00", OTHER: "2026-12-02T00:00:00+00:00", UNUSED: "2026-11-01T00:00:00+00:00"}


def _index(stamped: int, archived: int) -> WriteBackIndex:
    """``stamped`` records left in their stored form (a cold start's stamps), ``archived`` decoded ones (archives),
    one decoded record left empty (never written) and a journal and a template no record uses."""
    index = WriteBackIndex()
    index.journals = dict(AT)
    index._ref(UNUSED)
    index._template({"unusedMarker": "x"})
    for n in range(stamped):
        h = f"{n:016X}"
        marker = {REVIEWED_HASH: h, REVIEWED_AT: AT[JOURNAL]}
        index.add_layer(f"Id{n:010d}", h, Layer(JOURNAL, marker), 32)
        if n % 3 == 0:  # a second layer, with changes
            index.add_layer(f"Id{n:010d}", h, Layer(OTHER, {"foldedFrom": f"f{n % 7}"}, rc=2, seen="2026-01-01"), 32)
    for n in range(archived):
        record = index.edit(f"Arch{n:08d}")
        record.h = f"A{n:015X}"
        record.archived = Archived(OTHER, "merged into x", "x", "merged", Counters(n, "2026-01-02", 0.5, ("t",)))
    index.edit("EmptyRecord0")  # decoded, holds nothing: not saved
    return index


@pytest.mark.parametrize(("stamped", "archived", "chunk"), [(0, 0, 3), (9, 0, 3), (10, 4, 3), (25, 7, 4096)])
def test_what_loads_back_is_what_was_saved_across_piece_boundaries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stamped: int, archived: int, chunk: int
) -> None:
    monkeypatch.setattr(records_module, "CHUNK_RECORDS", chunk)
    index = _index(stamped, archived)
    expected = {key: index.get(key) for key in list(index.keys()) if key != "emptyrecord0"}
    index.save(tmp_path)
    data = json.loads(index_path(tmp_path).read_text(encoding="utf-8"))  # one JSON document, whatever the pieces
    assert data["version"] == 2 and len(data["records"]) == stamped + archived
    assert not index.changed
    loaded = WriteBackIndex.load(tmp_path)
    assert sorted(loaded.keys()) == sorted(expected)
    for key, record in expected.items():
        assert loaded.get(key) == record, key
    assert loaded.journals == AT and loaded.reversals_offset == 0
    # Only what a record names: the unused journal and template are left out.
    assert UNUSED not in data["refs"].values()
    assert {"unusedMarker": "x"} not in data["templates"].values()
    if stamped:
        assert set(data["refs"].values()) == {JOURNAL, OTHER}


def test_a_large_index_is_written_in_pieces_never_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(records_module, "CHUNK_RECORDS", 100)
    index = _index(2000, 50)
    pieces = list(index._serialised())
    whole = b"".join(pieces)
    json.loads(whole)
    assert len(pieces) >= 20
    assert max(len(p) for p in pieces) < len(whole) / 10


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Iterator[Path]:
    mountpoint = tmp_path / "tiny"
    mountpoint.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mountpoint)], check=True)
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", str(mountpoint)], check=True)


def test_a_full_volume_fails_the_save_and_keeps_the_previous_index(tiny_tmpfs: Path) -> None:
    agent = tiny_tmpfs / "agent"
    agent.mkdir()
    small = _index(5, 1)
    small.save(agent)
    before = index_path(agent).read_bytes()
    large = _index(20_000, 0)  # ~1 MB of text: more than the volume holds
    with pytest.raises(StoreWriteError, match=r"previous version \(if any\) is intact") as failed:
        large.save(agent)
    assert failed.value.errno == errno.ENOSPC
    assert index_path(agent).read_bytes() == before
    assert sorted(os.listdir(index_path(agent).parent)) == ["writeback-index.json"]  # no temp left behind
    assert large.changed  # not saved: the next save tries again
    assert WriteBackIndex.load(agent).get("Id0000000004") == small.get("Id0000000004")


def test_a_streamed_state_file_keeps_the_mode_of_the_one_it_replaces(tmp_path: Path) -> None:
    path = tmp_path / "state" / "file.json"
    replace_state_streamed(path, iter([b"{", b"}"]))
    os.chmod(path, 0o600)
    replace_state_streamed(path, iter([b'{"a":', b"1}"]))
    assert path.read_bytes() == b'{"a":1}'
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_failing_piece_leaves_no_temp_and_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "file.json"
    path.write_bytes(b"old")

    def pieces() -> Iterator[bytes]:
        yield b"new part"
        raise OSError(errno.EIO, os.strerror(errno.EIO), str(path))

    with pytest.raises(StoreWriteError):
        replace_state_streamed(path, pieces())
    assert path.read_bytes() == b"old" and os.listdir(tmp_path) == ["file.json"]
    marker = uuid.uuid4().hex

    def broken() -> Iterator[bytes]:
        yield b"new"
        raise ValueError(marker)

    with pytest.raises(ValueError, match=marker):  # not an I/O error: not dressed up as a write failure
        replace_state_streamed(path, broken())
    assert path.read_bytes() == b"old" and os.listdir(tmp_path) == ["file.json"]


def test_records_sharing_a_stored_layer_stay_independent(tmp_path: Path) -> None:
    """A cold start's stamps store one layer object for every entry (records.py ``_items``): changing one record's
    layers never reaches another's, in memory or once saved and loaded."""
    index = WriteBackIndex()
    index.journals = dict(AT)
    for name in ("Aa", "bb", "cc"):
        index.add_layer(name, "H", Layer(JOURNAL, {REVIEWED_HASH: "H", REVIEWED_AT: AT[JOURNAL]}), 32)
    assert index._raw["aa"][1][0] is index._raw["bb"][1][0]  # shared, and keyed by the lower-cased id
    index.add_layer("bb", "H", Layer(OTHER, {"foldedFrom": "x"}, rc=1), 32)
    index.add_layer("cc", "H", Layer(OTHER, {"foldedFrom": "y"}), 32)
    assert [len(index._raw[key][1]) for key in ("aa", "bb", "cc")] == [1, 2, 2]
    assert index._raw["aa"][1][0] == (0, 0) and index._raw["bb"][1][1][2] == {"rc": 1}
    index.forget_journals({OTHER})  # decodes every record, drops OTHER's layers
    index.add_layer("AA", "H", Layer(OTHER, {"foldedFrom": "z"}), 32)
    counts = {key: len(index.get(key).layers) for key in ("aa", "bb", "cc")}  # type: ignore[union-attr]
    assert counts == {"aa": 2, "bb": 1, "cc": 1}
    index.save(tmp_path)
    loaded = WriteBackIndex.load(tmp_path)
    assert {key: loaded.get(key) for key in ("aa", "bb", "cc")} == {key: index.get(key) for key in ("aa", "bb", "cc")}
    assert [layer.marker for layer in loaded.get("aa").layers] == [  # type: ignore[union-attr]
        {REVIEWED_HASH: "H", REVIEWED_AT: AT[JOURNAL]},
        {"foldedFrom": "z"},
    ]


def test_a_save_killed_midway_leaves_the_old_index_and_a_temp_the_next_sweep_removes(tmp_path: Path) -> None:
    """SIGKILL between two pieces (a real process, killed for real): the index on disk is the previous one, whole;
    the torn temp is one of our own ``.dk-new`` leftovers, removed by the next cycle's sweep."""
    agent = tmp_path / "agent"
    (agent / "memory").mkdir(parents=True)
    _index(5, 1).save(agent)
    before = index_path(agent).read_bytes()
    killed = textwrap.dedent(
        """
        import os, signal, sys
        from pathlib import Path
        from dreamkeeper.memory import replace_state_streamed

        def pieces():
            yield b'{"version":2,"records":{' + b'"x":["h",[]],' * 1000
            os.kill(os.getpid(), signal.SIGKILL)
            yield b"}}"

        replace_state_streamed(Path(sys.argv[1]), pieces())
        """
    )
    done = subprocess.run([sys.executable, "-c", killed, str(index_path(agent))], cwd=REPO, env=_env(), check=False)
    assert done.returncode == -signal.SIGKILL
    assert index_path(agent).read_bytes() == before
    (temp,) = [p for p in index_path(agent).parent.iterdir() if p.name != "writeback-index.json"]
    assert temp.name.startswith(".writeback-index.json.") and temp.name.endswith(".dk-new")
    swept = sweep_leftovers(agent, agent / "memory")
    assert temp in swept.removed and not temp.exists()
    assert WriteBackIndex.load(agent).get("Id0000000001") == _index(5, 1).get("Id0000000001")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "operator"), str(REPO)])}
