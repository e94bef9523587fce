"""`dreamkeeper coverage`: exit 0 covered, 1 missing, 2 usage error; JSON output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from dreamkeeper.coverage.cli import register


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:  # a callback keeps `coverage` a sub-command, as under the real root app
        pass

    register(app)
    return app


runner = CliRunner()


def test_covered_exits_0(app: typer.Typer) -> None:
    result = runner.invoke(
        app,
        ["coverage", "--source", "Rocky's Blazor class", "--merged", "Rocky runs the Blazor class"],
    )
    assert result.exit_code == 0, result.output
    assert "all 2 specific(s) kept" in result.output


def test_missing_exits_1_and_names_what_is_missing(app: typer.Typer) -> None:
    result = runner.invoke(
        app,
        [
            "coverage",
            "-s",
            "Allen Conway works at Xebia",
            "-s",
            "Trish Roberts works at Xebia, trish@xebia.com",
            "-m",
            "Allen Conway works at Xebia",
        ],
    )
    assert result.exit_code == 1
    assert "missing 3 of 6 specific(s): Roberts, Trish, trish@xebia.com" in result.output


def test_json_output(app: typer.Typer) -> None:
    result = runner.invoke(
        app,
        ["coverage", "-s", "Call 612-555-1234 about S3", "-m", "Call (612) 555-1234", "--json"],
    )
    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert payload == {
        "missing": ["S3"],
        "specifics": [
            {"text": "612-555-1234", "kind": "phone", "key": "6125551234", "covered": True},
            {"text": "S3", "kind": "identifier", "key": "s3", "covered": False},
        ],
    }


def test_category_applies_numeric_exemption(app: typer.Typer) -> None:
    args = ["coverage", "-s", "Sessions average 8.33 calls.", "-m", "Sessions average many calls.", "--json"]
    assert runner.invoke(app, args).exit_code == 1
    exempt = runner.invoke(app, [*args, "--category", "anti-patterns/routing"])
    assert exempt.exit_code == 0
    assert json.loads(exempt.stdout)["missing"] == []


def test_vocabulary_file_is_applied(app: typer.Typer, tmp_path: Path) -> None:
    vocabulary = tmp_path / "merge-coverage-vocabulary.json"
    vocabulary.write_text('{ "alwaysSpecificWords": ["May"], // a character\n }')
    args = ["coverage", "-s", "May left at dawn.", "-m", "She left at dawn.", "--json"]
    assert runner.invoke(app, args).exit_code == 0
    result = runner.invoke(app, [*args, "--vocabulary", str(vocabulary)])
    assert result.exit_code == 1
    assert json.loads(result.stdout)["missing"] == ["May"]


@pytest.mark.parametrize(
    ("content", "expected"),
    [(None, "does not exist"), ("{ not json", "is malformed")],
)
def test_bad_vocabulary_file_is_a_usage_error(
    app: typer.Typer, tmp_path: Path, content: str | None, expected: str
) -> None:
    vocabulary = tmp_path / "merge-coverage-vocabulary.json"
    if content is not None:
        vocabulary.write_text(content)
    result = runner.invoke(app, ["coverage", "-s", "x", "-m", "y", "--vocabulary", str(vocabulary)])
    assert result.exit_code == 2
    assert expected in result.output


@pytest.mark.parametrize("args", [["-s", "Rocky"], ["-m", "Rocky"], ["-s", "a", "-m", "b", "--bogus"]])
def test_usage_errors_exit_2(app: typer.Typer, args: list[str]) -> None:
    assert runner.invoke(app, ["coverage", *args]).exit_code == 2


def test_installed_command_end_to_end() -> None:
    """The real root app picks the command up (`register` discovered by dreamkeeper.cli)."""

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "dreamkeeper", "coverage", *args], capture_output=True, text=True, timeout=120
        )

    covered = run("-s", "Rockford filed in 2026", "-m", "Rockford Duane Lhotka filed on 2026-04-15", "--json")
    assert covered.returncode == 0, covered.stderr
    assert json.loads(covered.stdout)["missing"] == []
    missing = run("-s", "Rockford Duane filed", "-m", "Rockford filed")
    assert missing.returncode == 1 and "Duane" in missing.stdout
    assert run("--merged", "x").returncode == 2
