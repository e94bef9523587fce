"""OpenClaw's own code (npm openclaw, see real.py) on a workspace dreamkeeper consolidated.

Its memory indexer (``openclaw memory index``, the SQLite store its ``memory_search`` tool reads) must find every live
unit where the unit records say it is, and nothing of the archive; its own dreaming promotion must wait while
dreamkeeper holds the promotion lock; and its promotion running during cycles must lose nothing.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from dreamkeeper.demo.markdown_sample import generate_markdown_sample
from dreamkeeper.formats import PROFILES, MarkdownFormat, get_format, units_root
from dreamkeeper.formats import records as rec
from dreamkeeper.formats.agentlock import agent_lock
from dreamkeeper.formats.check import consistency
from dreamkeeper.formats.units import normalise_text
from dreamkeeper.memory import MemoryStore
from tests.agents.format_cycle import dream
from tests.agents.real import OpenClaw

pytestmark = pytest.mark.realagent


def _records(agent: Path) -> list:  # type: ignore[type-arg]
    return MemoryStore(units_root(agent)).scan().entries


_COMMENTS = re.compile(r"<!--.*?-->", re.S)


def _squash(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def openclaw(tmp_path: Path) -> OpenClaw:
    claw = OpenClaw(tmp_path / "home")
    claw.workspace.rmdir()
    generate_markdown_sample("openclaw", claw.state_dir)
    return claw


def test_openclaws_own_index_finds_every_live_unit_and_none_of_the_archive(openclaw: OpenClaw) -> None:
    agent = openclaw.state_dir
    first = dream(agent, "openclaw")
    second = dream(agent, "openclaw")
    assert first.report.archived_with_replacement > 0, "the sample's near-duplicates were merged"
    records = _records(agent)
    live = [s.entry for s in records if s.entry.is_live]
    gone = [s.entry for s in records if s.entry.is_archived and rec.placement_of(s.entry) == rec.REMOVED]
    assert live and gone, (len(live), len(gone))
    assert all(rec.placement_of(e) == rec.IN_FILE for e in live), "every live unit is in a file"
    assert consistency(agent, PROFILES["openclaw"], MemoryStore(units_root(agent))).problems == []
    openclaw.index()
    chunks = openclaw.chunks()
    by_file: dict[str, str] = {}
    for path, _, _, text in sorted(chunks):
        by_file[path] = by_file.get(path, "") + "\n" + text
    # Nothing outside the agent's own Markdown is indexed: the unit records and the archive are not.
    assert set(by_file) <= {"MEMORY.md", "USER.md", "DREAMS.md"} | {p for p in by_file if p.startswith("memory/2")}
    assert not any(".dreamkeeper" in p or p.endswith(".json") for p in by_file)
    for entry in live:
        file = entry.meta(rec.FILE)
        assert file in by_file, f"{file} not indexed"
        said = _squash(_COMMENTS.sub("", entry.content))  # its indexer keeps comments out of the chunk text
        assert said in _squash(_COMMENTS.sub("", by_file[file])), f"live unit {entry.id} not in OpenClaw's index"
    indexed = _squash(_COMMENTS.sub("", "\n".join(by_file.values())))
    live_texts = _squash(_COMMENTS.sub("", "\n".join(e.content for e in live)))
    for entry in gone:
        text = _squash(_COMMENTS.sub("", normalise_text(entry.content)))
        if text not in live_texts:  # a text still said by a live unit is found, rightly, as that unit
            assert text not in indexed, f"archived unit {entry.id} still in OpenClaw's index: {entry.content}"
    # Its search tool answers from the consolidated files: a merged fact is found in MEMORY.md, once.
    successor = next(e for e in live if e.meta("createdByCycle") or e.meta("dreamkeeperCreatedByCycle"))
    word = max(normalise_text(successor.content).split(), key=len)
    hits = openclaw.search(word)
    assert any(h["path"] == successor.meta(rec.FILE) for h in hits), (word, hits)
    assert not any(".dreamkeeper" in h["path"] for h in hits)
    assert second.report.hard_deletes == 0 and first.report.hard_deletes == 0


def _dreaming_on(openclaw: OpenClaw) -> None:
    """The sample turns OpenClaw's own dreaming off (as docs/formats.md asks); these tests need its promotion."""
    (openclaw.state_dir / "openclaw.json").unlink()


def test_openclaws_own_promotion_waits_while_dreamkeeper_holds_its_lock(openclaw: OpenClaw) -> None:
    _dreaming_on(openclaw)
    workspace = openclaw.workspace
    (workspace / "memory" / "2026-12-01.md").write_text(
        "# 2026-12-01\n\n- Zanzibar office lease renewed until 2028-06-30 (contract LEASE-778).\n", encoding="utf-8"
    )
    openclaw.index()
    openclaw.search("Zanzibar lease")  # a recall: what its promotion ranks
    fmt = get_format("openclaw")
    assert isinstance(fmt, MarkdownFormat)
    memory = workspace / "MEMORY.md"
    before = memory.read_text()
    lock = fmt.profile.lock.model_copy(update={"wait_seconds": 0})
    with agent_lock(lock, openclaw.state_dir, workspace, memory):
        held = openclaw.promote()
    assert held.returncode != 0 and "lock timeout" in held.stderr + held.stdout
    assert memory.read_text() == before
    done = openclaw.promote()
    assert done.returncode == 0, done.stderr[-2000:]
    assert "LEASE-778" in memory.read_text()


def test_openclaw_promoting_while_cycles_run_loses_nothing(openclaw: OpenClaw) -> None:
    _dreaming_on(openclaw)
    agent, workspace = openclaw.state_dir, openclaw.workspace
    day = workspace / "memory" / "2026-12-01.md"
    lines = [f"- Courier {n} delivered parcel PKG-{7000 + n} to dock {n % 4} on 2026-12-01." for n in range(6)]
    day.write_text("# 2026-12-01\n\n" + "\n".join(lines) + "\n", encoding="utf-8")
    openclaw.index()
    for n in range(3):
        openclaw.search(f"parcel PKG-{7000 + n}")
    promoted: list[str] = []

    def promote() -> None:
        result = openclaw.promote()
        promoted.append(result.stdout + result.stderr)

    worker = threading.Thread(target=promote)
    worker.start()
    cycles = 0
    while worker.is_alive() or cycles < 2:  # cycles while its promotion reads, ranks and appends to MEMORY.md
        dream(agent, "openclaw")
        cycles += 1
    worker.join()
    dream(agent, "openclaw")
    assert "appended=" in promoted[0] or "lock timeout" in promoted[0], promoted[0][-2000:]
    records = _records(agent)
    said = _squash("\n".join(s.entry.content for s in records))
    for line in lines:
        assert _squash(line.removeprefix("- ")) in said
    memory = (workspace / "MEMORY.md").read_text()
    for record in records:
        entry = record.entry
        if entry.is_live and entry.meta(rec.FILE) == "MEMORY.md":
            assert _squash(entry.content) in _squash(memory)
    # Whatever OpenClaw appended is a unit of its own now: live in MEMORY.md, or merged and kept in the archive.
    if "appended=" in promoted[0]:
        assert any("PKG-70" in s.entry.content and s.entry.meta(rec.FILE) == "MEMORY.md" for s in records)
    for line in memory.splitlines():
        if "PKG-70" in line:
            assert any(_squash(line) == _squash(s.entry.content) for s in records if s.entry.is_live)
    assert consistency(agent, PROFILES["openclaw"], MemoryStore(units_root(agent))).problems == []


def _writer(workspace: Path, ledger: Path, seconds: float, seed: int, *flags: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.agents.openclaw_writer",
            str(workspace),
            str(ledger),
            str(seconds),
            str(seed),
            *flags,
        ],
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("flags", [(), ("--caching",), ("--hostile",)], ids=["session", "caching", "hostile"])
def test_an_openclaw_session_writing_during_cycles_loses_nothing(
    openclaw: OpenClaw, tmp_path: Path, flags: tuple[str, ...]
) -> None:
    agent, workspace = openclaw.state_dir, openclaw.workspace
    ledger = tmp_path / "writes.jsonl"
    writer = _writer(workspace, ledger, 15.0, 5, *flags)
    conflicts = stale = kept = cycles = 0
    try:
        while writer.poll() is None or cycles < 3:
            done = dream(agent, "openclaw")
            cycles += 1
            conflicts += done.report.conflicts
            stale += done.report.stale_units
            kept += done.report.units_kept_for_agent
    finally:
        if writer.poll() is None:
            writer.kill()
        _, err = writer.communicate(timeout=60)
    assert writer.returncode == 0, err[-2000:]
    dream(agent, "openclaw")
    records = _records(agent)
    said = [_squash(s.entry.content) for s in records]
    lines = [json.loads(x) for x in ledger.read_text(encoding="utf-8").splitlines() if x.strip()]
    assert lines
    for line in lines:  # every line the session wrote is a unit: in its file, or kept in the archive
        assert any(_squash(line["line"]) in text for text in said), line
    files = "\n".join(p.read_text(encoding="utf-8") for p in workspace.rglob("*.md"))
    for line in lines:  # ...and its invoice or account number is still in the agent's files, not only the archive
        number = re.search(r"(INV|ACC)-\d+", line["line"])
        assert number is not None and number.group(0) in files, line
    for record in records:
        if record.entry.meta("dreamkeeperCreatedByCycle"):  # every successor dreamkeeper wrote is live or archived
            assert record.entry.content
    assert consistency(agent, PROFILES["openclaw"], MemoryStore(units_root(agent))).problems == []
    if flags:  # a caching session wrote its old MEMORY.md back over the cycles' merges, and nothing was lost to it
        assert stale + kept > 0, (stale, kept, conflicts)
    openclaw.index()
    indexed = _squash(_COMMENTS.sub("", "\n".join(t for _, _, _, t in openclaw.chunks())))
    for record in records:
        if record.entry.is_live:
            assert _squash(_COMMENTS.sub("", record.entry.content)) in indexed
