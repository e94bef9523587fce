"""`dreamkeeper dream` end to end through the installed command: report, dry-run diff, termination message."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.consolidation.corpus import Seed, write_corpus

DREAM = [sys.executable, "-m", "dreamkeeper", "-q", "dream"]


def test_dry_run_prints_an_escaped_diff_and_writes_nothing(tmp_path: Path) -> None:
    write_corpus(
        tmp_path,
        [
            Seed("a1", "Rocky has a Sheltie named Milo [bold]really[/bold].", "people/family"),
            Seed("a2", "Rocky has a Sheltie named Milo [bold]really[/bold].", "people/family"),
        ],
    )
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    out = subprocess.run([*DREAM, str(tmp_path), "--dry-run"], capture_output=True, text=True, check=True).stdout
    assert "nothing was written" in out
    assert "fold 1 exact duplicate(s) into a1" in out
    assert "[bold]really[/bold]" in out  # entry text is data, never markup
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_json_report_and_termination_message(tmp_path: Path) -> None:
    write_corpus(tmp_path, [Seed("a1", "Trish Roberts runs PWOP Productions."), Seed("a2", "Lunch was fine.")])
    message = tmp_path / "termination-log"
    result = subprocess.run(
        [*DREAM, str(tmp_path), "--json", "--termination-message-path", str(message)],
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(result.stdout)
    summary = json.loads(message.read_text())
    assert report["result"] == summary["result"] == "completed"
    assert summary["cycleId"] == report["cycleId"] and summary["hardDeletes"] == 0
    assert len(message.read_bytes()) < 4096
    assert (tmp_path / ".dreamkeeper" / "cycles" / f"{report['cycleId']}.json").exists()


def test_missing_memory_dir_fails_cleanly(tmp_path: Path) -> None:
    result = subprocess.run([*DREAM, str(tmp_path / "nope")], capture_output=True, text=True)
    assert result.returncode == 1
    assert "no memory directory" in result.stderr and "Traceback" not in result.stderr


def test_invalid_settings_are_a_usage_error(tmp_path: Path) -> None:
    write_corpus(tmp_path, [Seed("a1", "Alpha.")])
    result = subprocess.run(
        [*DREAM, str(tmp_path), "--settings-json", '{"similarity_threshold": 7}'], capture_output=True, text=True
    )
    assert result.returncode == 2
    assert "similarity_threshold" in result.stderr
