"""The agent's directives and feedback signals reach the model as RockBot sends them (issue 15 item 3):
``memory-rules.md`` + ``---`` + ``dream.md``, and "Recent feedback signals (last 7 days)" from the agent's feedback
logs ``feedback/{sessionId}.jsonl`` (numeric ``signalType``, the oldest 50 of the window)."""

from __future__ import annotations

import asyncio
import json
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

from dreamkeeper.consolidation.cycle import CycleOptions, run_cycle
from dreamkeeper.consolidation.directives import FEEDBACK_MAX, load_directives, load_feedback, parse_signal
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.proposers import ScriptedProposer
from dreamkeeper.proposers.prompts import FEEDBACK_HEADING, default_directive, system_prompt, user_message
from tests.consolidation.corpus import ROCKBOT_SHAPE
from tests.parity import rockbot_files

NOW = rockbot_files.datetime(2026, 9, 14, 6, 0, tzinfo=rockbot_files.UTC)


def signal_line(session: str, kind: Any, summary: str, when: Any, detail: str | None = None) -> str:
    """One line as FileFeedbackStore appends it (FFS @1fb7f521): camelCase, compact, the enum as a number."""
    return json.dumps(
        {
            "id": f"{session}-{summary[:8]}",
            "sessionId": session,
            "signalType": kind,
            "summary": summary,
            "detail": detail,
            "timestamp": rockbot_files.o_format(when),
        },
        separators=(",", ":"),
    )


def write_log(agent: Path, session: str, lines: list[str]) -> Path:
    path = agent / "feedback" / f"{session}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + os.linesep for line in lines), encoding="utf-8")
    return path


def test_memory_rules_go_before_dream_md_as_rockbot_composes_them(tmp_path: Path) -> None:
    (tmp_path / "memory-rules.md").write_text("Never merge entries about different people.")
    (tmp_path / "dream.md").write_text('Merge duplicates. Reply {"toDelete": [], "toSave": []}.')
    directives = load_directives(tmp_path)
    assert system_prompt(directives.dream, directives.memory_rules) == (
        'Never merge entries about different people.\n\n---\n\nMerge duplicates. Reply {"toDelete": [], "toSave": []}.'
    )


def test_memory_rules_go_before_the_built_in_directive_too(tmp_path: Path) -> None:
    (tmp_path / "memory-rules.md").write_text("   \n")  # RockBot: IsNullOrEmpty, so whitespace still counts
    directives = load_directives(tmp_path)
    assert directives.dream is None
    assert system_prompt(directives.dream, directives.memory_rules) == "   \n\n\n---\n\n" + default_directive().strip()
    (tmp_path / "memory-rules.md").write_text("")
    assert system_prompt(None, load_directives(tmp_path).memory_rules) == default_directive().strip()


def test_signals_are_parsed_as_rockbot_writes_them() -> None:
    line = signal_line("s1", 0, "Used the wrong calendar", NOW, detail="It was the Xebia one")
    signal = parse_signal(line)
    assert signal is not None and signal.line() == (
        '- [Correction] session s1: Used the wrong calendar ("It was the Xebia one")'
    )
    assert parse_signal(signal_line("s1", "UserThumbsDown", "Too long", NOW)).line() == (  # type: ignore[union-attr]
        "- [UserThumbsDown] session s1: Too long"
    )
    assert parse_signal(signal_line("s1", 9, "x", NOW)).signal_type == "9"  # type: ignore[union-attr]
    for bad in ("{not json", "[]", '{"sessionId":"s","signalType":0}', signal_line("s", True, "x", NOW)):
        assert parse_signal(bad) is None


def test_the_oldest_fifty_of_the_last_seven_days(tmp_path: Path) -> None:
    lines = [signal_line("old", 1, f"old {i}", NOW - timedelta(days=8, minutes=i)) for i in range(5)]
    lines += [signal_line("s/a", 1, f"recent {i:03d}", NOW - timedelta(hours=i)) for i in range(80)]
    write_log(tmp_path, "s1", [*lines[:40], "garbage", ""])
    write_log(tmp_path, "nested/s2", lines[40:])  # a session id with "/" makes a subdirectory
    signals = load_feedback(tmp_path, NOW)
    assert len(signals) == FEEDBACK_MAX == 50
    assert [s.summary for s in signals] == [f"recent {i:03d}" for i in range(79, 29, -1)]  # ascending: oldest first


def test_files_not_written_inside_the_window_are_not_read(tmp_path: Path) -> None:
    path = write_log(tmp_path, "s1", [signal_line("s1", 0, "recent", NOW - timedelta(days=1))])
    stale = (NOW - timedelta(days=30)).timestamp()
    os.utime(path, (stale, stale))
    assert load_feedback(tmp_path, NOW) == ()


def test_no_feedback_directory_no_block(tmp_path: Path) -> None:
    assert load_feedback(tmp_path, NOW) == ()


def test_an_unreadable_log_is_skipped(tmp_path: Path) -> None:
    write_log(tmp_path, "s1", [signal_line("s1", 0, "recent", NOW)])
    (tmp_path / "feedback" / "gone.jsonl").symlink_to(tmp_path / "nowhere.jsonl")  # removed between list and read
    assert [s.summary for s in load_feedback(tmp_path, NOW)] == ["recent"]


def test_the_block_sits_after_the_header_in_every_request(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    for entry_id, content in (
        ("a", "Rocky has a dog named Milo the Sheltie"),
        ("b", "Rocky has a Sheltie dog named Milo"),
    ):
        rockbot_files.write(root, rockbot_files.entry(entry_id, content, createdAt=NOW))
    write_log(tmp_path, "s1", [signal_line("s1", 0, "Merged two people into one", NOW - timedelta(hours=2))])
    (tmp_path / "memory-rules.md").write_text("Keep every name.")
    prompts: list[str] = []

    def record(batch: Any, request: Any) -> dict[str, Any]:
        prompts.append(user_message(batch, request) or "")
        assert system_prompt(request.directive, request.memory_rules).startswith("Keep every name.\n\n---\n\n")
        return {"toDelete": [], "toSave": []}

    options = CycleOptions(agent_dir=tmp_path, settings=CycleSettings(min_interval_hours=0, **ROCKBOT_SHAPE), now=NOW)
    asyncio.run(run_cycle(options, ScriptedProposer(record)))
    (prompt,) = prompts
    header, rest = prompt.split("\n", 1)
    assert header.startswith("There are 2 memory entries.")
    assert rest.startswith(f"\n{FEEDBACK_HEADING}\n- [Correction] session s1: Merged two people into one\n\n")
    assert rest.index(FEEDBACK_HEADING) < rest.index("[ID:a]")
