"""`dreamkeeper seed-vocabulary`: create only if absent, never touch an existing file."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
from pathlib import Path

from typer.testing import CliRunner

from dreamkeeper.cli import _register, app
from dreamkeeper.kube.seed import create_no_clobber, seed_vocabulary

RENDERED = b'{\n  "extraCommonWords": ["briefing"],\n  "alwaysSpecificWords": ["May"]\n}\n'


def setup(tmp_path: Path) -> tuple[Path, Path]:
    source = tmp_path / "cm" / "merge-coverage-vocabulary.json"
    source.parent.mkdir()
    source.write_bytes(RENDERED)
    agent = tmp_path / "data" / "agent"
    agent.mkdir(parents=True)
    return source, agent / "merge-coverage-vocabulary.json"


def test_absent_file_is_created_with_the_rendered_bytes(tmp_path: Path) -> None:
    source, dest = setup(tmp_path)
    report = seed_vocabulary(source, dest)
    assert report.result == "created"
    assert dest.read_bytes() == RENDERED
    assert report.sha256 == report.source_sha256 == hashlib.sha256(RENDERED).hexdigest()
    assert [p.name for p in dest.parent.iterdir()] == [dest.name]  # no temp file left behind


def test_existing_file_stays_byte_identical(tmp_path: Path) -> None:
    source, dest = setup(tmp_path)
    edited = b'// the operator\'s own edit\n{ "alwaysSpecificWords": ["Rose"], }\n'
    dest.write_bytes(edited)
    os.chmod(dest, 0o600)
    before = os.stat(dest)
    report = seed_vocabulary(source, dest)
    after = os.stat(dest)
    assert report.result == "already-present"
    assert dest.read_bytes() == edited
    assert (after.st_ino, after.st_mtime_ns, after.st_mode) == (before.st_ino, before.st_mtime_ns, before.st_mode)
    assert report.sha256 == hashlib.sha256(edited).hexdigest() != report.source_sha256


def test_an_empty_existing_file_is_not_replaced(tmp_path: Path) -> None:
    source, dest = setup(tmp_path)
    dest.write_bytes(b"")
    assert seed_vocabulary(source, dest).result == "already-present"
    assert dest.read_bytes() == b""


def test_a_dangling_symlink_is_never_followed_or_replaced(tmp_path: Path) -> None:
    source, dest = setup(tmp_path)
    dest.symlink_to(tmp_path / "nowhere.json")
    report = seed_vocabulary(source, dest)
    assert report.result == "already-present"
    assert dest.is_symlink() and not (tmp_path / "nowhere.json").exists()
    assert report.sha256 is None and report.message and "unreadable" in report.message


def test_a_missing_agent_directory_fails_without_creating_it(tmp_path: Path) -> None:
    source, _ = setup(tmp_path)
    dest = tmp_path / "data" / "wrong-path" / "merge-coverage-vocabulary.json"
    report = seed_vocabulary(source, dest)
    assert report.result == "failed" and "spec.agentPath" in (report.message or "")
    assert not dest.parent.exists()


def _race(args: tuple[str, bytes]) -> bool:
    path, data = args
    return create_no_clobber(Path(path), data)


def test_concurrent_writers_exactly_one_wins(tmp_path: Path) -> None:
    dest = tmp_path / "v.json"
    payloads = [f'{{"writer": {i}}}'.encode() * 200 for i in range(8)]
    with multiprocessing.get_context("fork").Pool(4) as pool:
        wins = pool.map(_race, [(str(dest), p) for p in payloads])
    assert sum(wins) == 1
    assert dest.read_bytes() == payloads[wins.index(True)]


def test_cli_reports_in_the_termination_message_and_exit_codes(tmp_path: Path) -> None:
    _register()
    source, dest = setup(tmp_path)
    message = tmp_path / "termination-log"
    runner = CliRunner()
    args = ["seed-vocabulary", "--source", str(source), "--destination", str(dest)]
    first = runner.invoke(app, [*args, "--termination-message-path", str(message)])
    assert first.exit_code == 0, first.output
    assert json.loads(message.read_text())["result"] == "created"
    second = runner.invoke(app, [*args, "--termination-message-path", str(message)])
    assert second.exit_code == 0 and json.loads(message.read_text())["result"] == "already-present"
    failed = runner.invoke(app, ["seed-vocabulary", "--source", str(tmp_path / "none"), "--destination", str(dest)])
    assert failed.exit_code == 1
