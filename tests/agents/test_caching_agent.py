"""The caching agent behaves like RockBot's store (loads once, writes its cached copies back), and the ledger
checks catch what such an agent does to a corpus."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dreamkeeper.demo.sample import copy_bundled
from dreamkeeper.memory import MemoryStore
from tests.agents import ledger
from tests.agents.caching_agent import dotnet_time, record_of, serialize

REPO = Path(__file__).resolve().parents[2]


def agent(agent_dir: Path, log: Path, *args: str) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "tests.agents.caching_agent", str(agent_dir), "--ledger", str(log), "--seed", "7"]
    return subprocess.Popen([*argv, *args], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def started(log: Path, timeout: float = 30) -> dict[str, object]:
    """The agent's start record: its index is loaded."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists():
            for record in ledger.read(log):
                if record["op"] == "start":
                    return record
        time.sleep(0.05)
    raise AssertionError("the agent did not start")


def finish(proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    _, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err.decode()


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    directory = tmp_path / "agent"
    copy_bundled(directory)
    return directory


def _files(memory: Path) -> dict[str, Path]:
    return {s.id: s.path for s in MemoryStore(memory).scan().entries}


def test_serialization_is_system_text_json_with_the_default_encoder() -> None:
    entry = record_of(
        {
            "ID": "a1",  # read case-insensitively
            "content": 'Kraków <b> "q" 1+1 & it\'s 😀',
            "createdAt": "2026-01-19T08:12:37.1240000Z",
            "extra": "dropped",
            "importanceScore": 1.0,
        }
    )
    text = serialize(entry)
    assert not text.endswith("\n") and "extra" not in text
    assert list(json.loads(text)) == [
        "id", "content", "category", "tags", "createdAt", "updatedAt", "metadata", "importanceScore",
        "lastSeenAt", "reinforcementCount", "verify", "supersededBy", "archivedAt", "archiveReason",
    ]  # fmt: skip
    assert r"Krak\u00F3w \u003Cb\u003E \u0022q\u0022 1\u002B1 \u0026 it\u0027s \uD83D\uDE00" in text
    assert '"createdAt": "2026-01-19T08:12:37.124+00:00"' in text  # 7 digits at most, zeros trimmed, +00:00
    assert '"lastSeenAt": "2026-01-19T08:12:37.124+00:00"' in text  # defaults to createdAt
    assert '"reinforcementCount": 1' in text and '"importanceScore": 1,' in text and '"tags": [],' in text
    assert json.loads(text)["content"] == 'Kraków <b> "q" 1+1 & it\'s 😀'
    assert dotnet_time("2026-01-19T08:12:37.12345678+02:00") == "2026-01-19T08:12:37.1234567+02:00"


def test_it_loads_once_reinforces_from_its_cache_and_writes_stale_copies_back(sample: Path, tmp_path: Path) -> None:
    memory, log = sample / "memory", tmp_path / "ledger.jsonl"
    files = _files(memory)
    before = {i: record_of(json.loads(p.read_text())) for i, p in files.items()}
    proc = agent(sample, log, "--interval", "0.01", "--create-every", "0", "--max-writes", "300")
    start = started(log)
    # After the start: another writer archives live entries and adds one. The agent never re-reads.
    victims = [i for i, entry in before.items() if not entry["archivedAt"]][:40]
    for entry_id in victims:
        files[entry_id].write_text(serialize(dict(before[entry_id], archivedAt="2026-03-01T00:00:00+00:00")))
    archived_by_us = datetime.now(UTC)  # an agent write to a victim before this may be under our archive
    newcomer = memory / "late" / "newcomer.json"
    newcomer.parent.mkdir()
    newcomer.write_text(serialize(dict(before[victims[0]], id="newcomer")))
    finish(proc)

    records = ledger.read(log)
    assert records[-1]["op"] == "exit"
    assert set(start["loaded"]) == set(files)  # type: ignore[call-overload]
    written = ledger.writes(records)
    assert len(written) == 300 and "newcomer" not in {w["id"] for w in written}
    assert all(w["op"] == "reinforce" and w["delta"] == 1 for w in written)
    last = {w["id"]: w for w in written}
    for entry_id, w in last.items():  # the cached copy reinforced: +1 per write, lastSeenAt now, updatedAt kept
        if entry_id in victims and ledger.when(w["t"]) <= archived_by_us:  # type: ignore[operator]
            continue  # its last write raced our archive (the machine was slow to start us): ours may be on top
        on_disk = record_of(json.loads(files[entry_id].read_text()))
        assert on_disk["reinforcementCount"] == w["rc"] and on_disk["lastSeenAt"] == w["lastSeenAt"]
        assert on_disk["updatedAt"] == before[entry_id]["updatedAt"]
        count = sum(1 for x in written if x["id"] == entry_id)
        assert w["rc"] == before[entry_id]["reinforcementCount"] + count
    resurrected = [i for i in victims if i in last and not json.loads(files[i].read_text())["archivedAt"]]
    assert resurrected, "the agent should have written stale live copies over archived files"
    stale = [w for w in written if w["stale"]]
    assert stale and {w["id"] for w in stale} <= set(victims)
    assert not list(memory.rglob("*.tmp"))


def _held_open(memory: Path) -> dict[str, int]:
    """A read-only descriptor on every entry file: a file renamed over drops to 0 links but keeps its inode (so no
    new file can reuse the number, as comparing inode numbers after the fact allowed), one written in place keeps 1."""
    return {i: os.open(p, os.O_RDONLY) for i, p in _files(memory).items()}


def _links(held: dict[str, int], ids: set[str]) -> set[int]:
    return {os.fstat(held[i]).st_nlink for i in ids if i in held}


def test_atomic_mode_renames_and_inplace_mode_truncates(sample: Path, tmp_path: Path) -> None:
    memory = sample / "memory"
    held = _held_open(memory)
    try:
        finish(
            agent(sample, tmp_path / "a.jsonl", "--interval", "0.001", "--max-writes", "150", "--archive-every", "10")
        )
        records = ledger.writes(ledger.read(tmp_path / "a.jsonl"))
        saves = {w["id"] for w in records if w["op"] == "reinforce"}
        archives = {w["id"] for w in records if w["op"] == "archive"} - saves
        assert saves and _links(held, saves) == {0}  # temp + rename: the file read before is gone
        assert archives and _links(held, archives) == {1}  # ArchiveAsync: in place
        assert any(w["op"] == "create" for w in records)
    finally:
        for fd in held.values():
            os.close(fd)

    held = _held_open(memory)
    try:
        finish(agent(sample, tmp_path / "b.jsonl", "--mode", "inplace", "--interval", "0.001", "--max-writes", "100"))
        written = {w["id"] for w in ledger.writes(ledger.read(tmp_path / "b.jsonl")) if w["id"] in held}
        assert written and _links(held, written) == {1}
    finally:
        for fd in held.values():
            os.close(fd)


def test_sigterm_finishes_the_write_and_exits_and_linger_keeps_writing(sample: Path, tmp_path: Path) -> None:
    log = tmp_path / "l.jsonl"
    proc = agent(sample, log, "--interval", "0.01")
    started(log)
    time.sleep(0.3)
    os.kill(proc.pid, signal.SIGTERM)
    finish(proc, timeout=10)
    ops = [r["op"] for r in ledger.read(log)]
    # The handler logs "sigterm" at once; a write in flight when the signal came is finished and logged after it
    # (a fresh make test under load saw ["sigterm", "reinforce", "exit"]), and then no other write starts.
    assert ops[-1] == "exit"
    assert len(ops[ops.index("sigterm") + 1 : -1]) <= 1
    assert not list((sample / "memory").rglob("*.tmp"))

    log2 = tmp_path / "l2.jsonl"
    proc = agent(sample, log2, "--interval", "0.01", "--linger", "1.0")
    started(log2)
    os.kill(proc.pid, signal.SIGTERM)
    finish(proc, timeout=10)
    records = ledger.read(log2)
    term = next(i for i, r in enumerate(records) if r["op"] == "sigterm")
    assert len(ledger.writes(records[term:])) > 5  # still writing after SIGTERM
    (life,) = ledger.lifetimes(records)
    assert life.exited


def test_hostile_writes_archived_entries_back_on_purpose(sample: Path, tmp_path: Path) -> None:
    memory, log = sample / "memory", tmp_path / "h.jsonl"
    proc = agent(sample, log, "--hostile", "--interval", "0.05", "--create-every", "0")
    started(log)
    for path in list(_files(memory).values())[:60]:
        raw = json.loads(path.read_text())
        if not raw.get("archivedAt"):
            path.write_text(json.dumps(dict(raw, archivedAt="2026-03-01T00:00:00+00:00", archiveReason="x")))
    time.sleep(1.5)
    os.kill(proc.pid, signal.SIGTERM)
    finish(proc)
    assert any(w["op"] == "resurrect" and w["stale"] for w in ledger.writes(ledger.read(log)))


# ---- the ledger checks ------------------------------------------------------------------------------------------


def test_the_corpus_check_passes_when_every_write_landed(sample: Path, tmp_path: Path) -> None:
    before = ledger.Snapshot.of(sample / "memory")
    finish(agent(sample, tmp_path / "l.jsonl", "--interval", "0.001", "--max-writes", "120"))
    check = ledger.check_corpus(sample, before, ledger.read(tmp_path / "l.jsonl"))
    assert check.ok, check.summary()
    assert check.agent_increments > 0 and check.checked_writes > 0


def test_the_corpus_check_finds_a_resurrection_a_lost_write_and_inflated_reinforcement(
    sample: Path, tmp_path: Path
) -> None:
    memory, log = sample / "memory", tmp_path / "l.jsonl"
    before = ledger.Snapshot.of(memory)
    finish(agent(sample, log, "--interval", "0.001", "--max-writes", "60", "--create-every", "0"))
    records = ledger.read(log)
    files = _files(memory)
    touched = list(dict.fromkeys(w["id"] for w in ledger.writes(records)))
    lost, merged, survivor = touched[0], touched[1], touched[2]
    # A write undone: the file goes back to an older reinforcementCount.
    raw = json.loads(files[lost].read_text())
    files[lost].write_text(json.dumps(dict(raw, reinforcementCount=0)))
    # A cycle "merged" `merged` into `survivor` (journal + archive), but `merged` is live again and `survivor`
    # never got its count: resurrected, and the survivor's reinforcement is off.
    journal = sample / ".dreamkeeper" / "journal" / "c1.jsonl"
    journal.parent.mkdir(parents=True, exist_ok=True)
    step = {"op": "archive", "id": merged, "path": "x", "group": 1, "reason": f"merged into {survivor}"}
    header = {"cycle_id": "c1", "created_at": "t", "memory_root": str(memory), "steps": [step]}
    journal.write_text(json.dumps(header) + "\n" + json.dumps({"step": 0, "outcome": "done"}) + "\n")
    check = ledger.check_corpus(sample, before, records)
    assert [r.split(" ")[0] for r in check.resurrected] == [merged]
    assert any(lost in x for x in check.lost)
    assert any(x.startswith(f"{survivor}:") for x in check.reinforcement)
    assert any(x.startswith(f"{lost}:") for x in check.reinforcement)


def test_overlaps_are_found_between_agent_writes_and_cycle_windows(sample: Path, tmp_path: Path) -> None:
    log = tmp_path / "l.jsonl"
    finish(agent(sample, log, "--interval", "0.01", "--max-writes", "20"))
    records = ledger.read(log)
    (life,) = ledger.lifetimes(records)
    inside = ledger.CycleWindow("c", life.start, life.end, "completed")
    assert ledger.overlaps(records, [inside])
    later = life.end + timedelta(seconds=1)
    after = ledger.CycleWindow("c", later, later + timedelta(seconds=5), "completed")
    assert ledger.overlaps(records, [after]) == []
