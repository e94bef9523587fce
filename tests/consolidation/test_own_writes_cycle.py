"""A cycle after one that decayed (memory/own_writes.py): its scan takes the entries the last cycle's decay wrote
instead of parsing their files, and decides exactly what it decides without them, in every state the corpus index
and the own-writes file can be in (cold: none; warm: the index vouches for the files, nothing is read; stale: some
files read; corrupt: both discarded), and when the agent rewrote one of those files since."""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path

import pytest

from dreamkeeper.memory import MemoryStore
from dreamkeeper.memory.corpus_index import index_path, open_corpus_index
from tests.consolidation.test_final_state_as_listed import TICK
from tests.consolidation.test_final_state_as_scanned import DECAYING, SEEDS, cycle, settled
from tests.memory.test_own_writes import same_entry

pytestmark = pytest.mark.usefixtures("corpus_index_mode")

_SCAN = re.compile(r"corpus index: (\d+) file\(s\) from the index, (\d+) read \((\d+) of them")


def scans(caplog: pytest.LogCaptureFixture) -> list[tuple[int, int, int]]:
    """(from the index, read, taken from the last cycle's own writes) of each scan the cycle made."""
    found = [_SCAN.search(r.getMessage()) for r in caplog.records if r.name == "dreamkeeper.memory.corpus_index"]
    return [(int(m[1]), int(m[2]), int(m[3])) for m in found if m]


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.json"))}


def test_the_cycle_after_a_decay_takes_its_writes_and_decides_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, corpus_index_mode: str
) -> None:
    store = settled(tmp_path, monkeypatch)
    first = cycle(tmp_path, 3)
    assert first.report.decayed == DECAYING
    own = index_path(tmp_path).with_name("corpus-index.own")
    assert own.is_file()  # the decays of cycle 3, kept
    time.sleep(TICK)
    with caplog.at_level(logging.DEBUG, logger="dreamkeeper.memory.corpus_index"):
        outcome = cycle(tmp_path, 6)
    report = outcome.report
    assert report.result == "completed" and report.decayed == DECAYING
    assert report.live_entries == len(SEEDS) and report.agent_deletes == report.hard_deletes == 0
    first_scan = scans(caplog)[0]
    taken = first_scan[2]
    if corpus_index_mode in ("cold", "corrupt"):
        assert taken == 0  # no own-writes file, or a damaged one: each file read is parsed
    elif corpus_index_mode == "warm":
        assert first_scan[1] == 0 and taken == 0  # the index vouches for every file: none read
    else:
        assert 0 < taken <= DECAYING and first_scan[1] >= taken  # the stale records' files, read: the decays taken
    # The files as a cycle without any cache leaves them: decayed once more, by the same arithmetic.
    fresh = MemoryStore(store.root).scan().entries
    assert {s.id for s in fresh} == {seed.id for seed in SEEDS}
    after = files(store.root)
    assert len(after) == len(SEEDS)
    # And what the next scan would take for them is the parse of those very files (the file read as it is: the
    # index's own load is the mode's, which prepares the file first).
    kept = {s.path: s for s in fresh}
    index = open_corpus_index(tmp_path, store.root)
    index.own.load()
    checked = 0
    for path, stored in kept.items():
        known = index.own.known(str(path))
        if known is not None:
            assert known[0] == stored.fingerprint.sha256 and known[1] == stored.fingerprint.size
            same_entry(known[2], stored.entry)
            checked += 1
    assert checked == DECAYING


def test_a_decayed_file_the_agent_rewrote_is_read_as_the_agent_left_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, corpus_index_mode: str
) -> None:
    store = settled(tmp_path, monkeypatch)
    cycle(tmp_path, 3)
    path = store.require("s1").path
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("Xebia", "Xebiq"), encoding="utf-8")  # same size, in place, moments after
    time.sleep(TICK)
    with caplog.at_level(logging.DEBUG, logger="dreamkeeper.memory.corpus_index"):
        outcome = cycle(tmp_path, 6)
    assert outcome.report.result == "completed" and outcome.report.live_entries == len(SEEDS)
    assert MemoryStore(store.root).require("s1").entry.content == "Allen Conway works at Xebiq."
    assert scans(caplog)[0][2] < DECAYING  # never taken for s1
