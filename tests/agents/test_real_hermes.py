"""Hermes Agent's own memory tool (PyPI hermes-agent, see real.py) on a home dreamkeeper consolidated.

Its tool must read the consolidated ``MEMORY.md``/``USER.md`` as the units dreamkeeper recorded, add, replace and
remove entries in them with no drift-guard refusal, and stay within its caps; a session that started before a cycle
must not be locked out by its drift guard after it; the real tool writing during cycles, and a stale writer that
writes its cached list back (hermes#26045), must lose nothing.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from dreamkeeper.demo.markdown_sample import generate_markdown_sample
from dreamkeeper.formats import PROFILES, units_root
from dreamkeeper.formats import records as rec
from dreamkeeper.formats.check import consistency
from dreamkeeper.formats.entries import HERMES_SEPARATOR, joined_length, parse_entries
from dreamkeeper.memory import MemoryStore
from tests.agents.format_cycle import dream
from tests.agents.real import Hermes, ask

pytestmark = pytest.mark.realagent
CAPS = {"memory": 2200, "user": 1375}
FILES = {"memory": "MEMORY.md", "user": "USER.md"}


@pytest.fixture
def hermes(tmp_path: Path) -> Hermes:
    home = tmp_path / "hermes-home"
    generate_markdown_sample("hermes", home)
    return Hermes(home)


def entries(home: Path, target: str) -> list[str]:
    raw = (home / "memories" / FILES[target]).read_text(encoding="utf-8")
    return [u.text for u in parse_entries(raw, FILES[target], "core").units]


def within_caps(home: Path) -> None:
    for target, cap in CAPS.items():
        raw = (home / "memories" / FILES[target]).read_text(encoding="utf-8")
        parsed = parse_entries(raw, FILES[target], "core")
        assert parsed.round_trips, f"{FILES[target]} would trip Hermes' drift guard"
        assert joined_length([u.text for u in parsed.units]) <= cap
        assert all(len(u.text) <= cap for u in parsed.units)


def records(home: Path) -> list:  # type: ignore[type-arg]
    return MemoryStore(units_root(home)).scan().entries


def test_hermes_reads_adds_replaces_and_removes_entries_in_a_file_dreamkeeper_consolidated(hermes: Hermes) -> None:
    home = hermes.home
    outcome = dream(home, "hermes")
    assert outcome.report.archived_with_replacement > 0, "the sample's near-duplicates were merged"
    within_caps(home)
    live = {s.entry.content for s in records(home) if s.entry.is_live}
    loaded = hermes.call({"op": "entries", "target": "memory"}, {"op": "entries", "target": "user"})
    assert set(loaded[0]["entries"]) | set(loaded[1]["entries"]) == live  # the agent reads what dreamkeeper recorded
    successor = next(s.entry for s in records(home) if s.entry.is_live and s.entry.meta("dreamkeeperCreatedByCycle"))
    target = "user" if successor.meta(rec.FILE) == "USER.md" else "memory"
    needle = successor.content[:40]
    results = hermes.call(
        {"op": "snapshot", "target": target},
        {"op": "replace", "target": target, "old_text": needle, "content": successor.content + " (checked)"},
        {"op": "add", "target": "memory", "content": "Backups run nightly at 02:00 to nas-02."},
        {"op": "remove", "target": "memory", "old_text": "Backups run nightly"},
    )
    assert needle in results[0]["snapshot"]
    for result in results[1:]:
        assert result["success"], result
        assert "drift_backup" not in result
    assert successor.content + " (checked)" in entries(home, target)
    assert not list((home / "memories").glob("*.bak.*")), "Hermes' drift guard took a backup: it saw drift"
    within_caps(home)
    again = dream(home, "hermes")  # the agent's edits are ingested: the replaced text is kept, its new one is live
    assert again.report.hard_deletes == 0
    kept = [s.entry for s in records(home) if s.entry.content == successor.content]
    assert kept and all(e.is_archived for e in kept)
    assert consistency(home, PROFILES["hermes"], MemoryStore(units_root(home))).problems == []


def test_a_live_hermes_session_is_not_locked_out_by_its_drift_guard_after_a_cycle(hermes: Hermes) -> None:
    home = hermes.home
    session = hermes.session()
    try:
        frozen = ask(session, {"op": "snapshot", "target": "memory"})["snapshot"]
        dream(home, "hermes")  # rewrites MEMORY.md under the session's feet
        assert entries(home, "memory") != parse_entries(frozen.split("\n", 3)[-1], "MEMORY.md", "core").units, (
            "the cycle changed the file"
        )
        for op in (
            {"op": "add", "target": "memory", "content": "Session fact added after the cycle."},
            {"op": "replace", "target": "memory", "old_text": "Session fact added", "content": "Session fact, edited."},
            {"op": "remove", "target": "memory", "old_text": "Session fact, edited."},
        ):
            result = ask(session, op)
            assert result["success"], result
            assert "drift_backup" not in result
        # The session's system prompt stays as frozen at its start (Hermes' prefix-cache rule): only files change.
        assert ask(session, {"op": "snapshot", "target": "memory"})["snapshot"] == frozen
    finally:
        session.terminate()
        session.wait(timeout=30)
    within_caps(home)


def _writer(hermes: Hermes, ledger: Path, seconds: float, seed: int, stale: bool) -> subprocess.Popen[str]:
    args = ["writer", str(ledger), str(seconds), str(seed), *(["--stale"] if stale else [])]
    return subprocess.Popen(
        hermes.command(*args), env=hermes.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _ledger(path: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.parametrize("stale", [False, True], ids=["hermes-tool", "stale-writer"])
def test_hermes_writing_during_cycles_loses_nothing_and_stays_within_caps(
    hermes: Hermes, tmp_path: Path, stale: bool
) -> None:
    home = hermes.home
    # Room to write: the sample's MEMORY.md is nearly full, as Hermes' own files are after a while.
    dream(home, "hermes")
    ledger = tmp_path / "writer.jsonl"
    writer = _writer(hermes, ledger, seconds=20.0, seed=3, stale=stale)
    cycles = 0
    try:
        while writer.poll() is None or cycles < 3:
            dream(home, "hermes")
            cycles += 1
            time.sleep(0.2)
    finally:
        if writer.poll() is None:
            writer.kill()
        _, err = writer.communicate(timeout=60)
    assert writer.returncode == 0, err[-2000:]
    before = {t: len("\n§\n".join(entries(home, t))) for t in FILES}
    dream(home, "hermes")
    written = _ledger(ledger)
    landed = [w for w in written if w["result"].get("success")]
    assert landed, "the writer wrote"
    drift = [w for w in written if "drift_backup" in w["result"] or "round-trip" in str(w["result"].get("error"))]
    assert drift == [], f"Hermes' drift guard refused {len(drift)} write(s): {drift[:2]}"
    said = {s.entry.content for s in records(home)}
    replaced = {w["fact"] for w in landed if w["n"] % 5 == 0 and w["n"] > 5}
    for write in landed:
        # Every fact the agent wrote is in a file or in the archive; a replaced one is the agent's own doing.
        assert write["fact"] in said or write["fact"] in replaced or _replaced_by_later(write, landed), write
    # Nothing the writer wrote left the agent's files either (each fact's number is in a live entry: as written,
    # or kept by a merge), unless the writer itself replaced it; the archive is a safety net, not where facts go.
    # Hermes' replace matches an entry by substring: the writer's replace of fact n also replaces the merged entry
    # that holds n beside other facts. That entry is then the agent's own removal, kept (restorable) in the archive.
    in_files = "\n".join(entries(home, "memory") + entries(home, "user"))
    removed_by_agent = "\n".join(
        s.entry.content for s in records(home) if (s.entry.archive_reason or "").startswith(rec.REASON_AGENT_REMOVED)
    )
    for write in landed:
        if write["fact"] in replaced or _replaced_by_later(write, landed):
            continue
        if write["fact"].split(" at ")[1].split(" ")[0] in removed_by_agent:
            continue
        number = write["fact"].split(" at ")[1].split(" ")[0]
        assert number in in_files, f"{write['fact']} is only in the archive"
    if stale:
        # The stale writer ignores Hermes' caps (it is not Hermes' tool); dreamkeeper never made a file larger.
        for target in FILES:
            assert len("\n§\n".join(entries(home, target))) <= max(CAPS[target], before[target])
            assert parse_entries((home / "memories" / FILES[target]).read_text(), FILES[target], "core").round_trips
    else:
        within_caps(home)
    assert consistency(home, PROFILES["hermes"], MemoryStore(units_root(home))).problems == []


def _replaced_by_later(write: dict, landed: list[dict]) -> bool:  # type: ignore[type-arg]
    """The writer's own replace of this fact (n+5 replaces n): Hermes overwrote it in place, as asked."""
    return any(w["n"] == write["n"] + 5 and w["n"] % 5 == 0 for w in landed)


def test_the_separator_and_caps_of_a_file_dreamkeeper_wrote_are_hermes_own(hermes: Hermes) -> None:
    home = hermes.home
    dream(home, "hermes")
    for target, name in FILES.items():
        raw = (home / "memories" / name).read_text(encoding="utf-8")
        assert HERMES_SEPARATOR in raw and not raw.endswith("\n"), "written as Hermes writes: entries joined by \\n§\\n"
        loaded = hermes.call({"op": "entries", "target": target})[0]["entries"]
        assert loaded == entries(home, target)
        # Hermes refuses an add that would go over its cap: dreamkeeper's file leaves it the room it counts itself.
        free = CAPS[target] - joined_length(loaded) - len(HERMES_SEPARATOR)
        if free > 0:
            assert hermes.call({"op": "add", "target": target, "content": "z" * free})[0]["success"]
            assert not hermes.call({"op": "add", "target": target, "content": "one more"})[0]["success"]
