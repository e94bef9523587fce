"""No file can wedge the agent (issue 16 findings 4 and 7): a misfiled entry is quarantined at scan time and never
reaches apply; a failure inside apply is recorded and skipped, so the journal completes and every later `dream`
and `recover` succeeds; a pathological entry file (100k-deep JSON) is only malformed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer

from dreamkeeper.consolidation.journal import incomplete_journals
from dreamkeeper.memory import MemoryStore
from tests.robustness.conftest import invoke, make_agent, run_dream, tree

LOOKALIKE = "а1b2c3d4e5f6"  # the first letter is Cyrillic


def _entry(entry_id: str, category: str | None, content: str) -> dict[str, Any]:
    return {
        "id": entry_id,
        "content": content,
        "category": category,
        "tags": [],
        "createdAt": "2026-08-01T00:00:00.0000000+00:00",
        "importanceScore": 0.3,
    }


def _misfile(memory: Path) -> dict[str, Path]:
    """One file of each misfiling kind, each a near-duplicate of a real entry (so a plan would want it)."""
    donor = json.loads(next(iter(sorted(memory.rglob("*.json")))).read_text())["content"]
    cases: dict[str, tuple[Path, dict[str, Any]]] = {
        "case-only": (memory / "notes" / "ABCDEF000001.json", _entry("abcdef000001", "notes", donor + " (a)")),
        "category-not-its-folder": (
            memory / "notes" / "abcdef000002.json",
            _entry("abcdef000002", "people/family", donor + " (b)"),
        ),
        "null-category-in-a-subfolder": (memory / "notes" / "abcdef000003.json", _entry("abcdef000003", None, donor)),
        "id-with-a-space": (memory / "notes" / "abc def.json", _entry("abc def", "notes", donor + " (c)")),
        "id-with-dotdot": (memory / "notes" / "a..b.json", _entry("a..b", "notes", donor + " (d)")),
        "lookalike-letters": (memory / "notes" / f"{LOOKALIKE}.json", _entry(LOOKALIKE, "notes", donor + " (e)")),
        "folder-named-x.json": (
            memory / "x.json" / "abcdef000004.json",
            _entry("abcdef000004", "x.json", donor + " (f)"),
        ),
        "category-with-traversal": (
            memory / "notes" / "abcdef000005.json",
            _entry("abcdef000005", "../../outside", donor + " (g)"),
        ),
    }
    for path, obj in cases.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(obj, indent=2), encoding="utf-8")
    return {kind: path for kind, (path, _) in cases.items()}


def test_misfiled_entries_are_quarantined_untouched_and_the_agent_goes_on(cli_app: typer.Typer, tmp_path: Path) -> None:
    agent = make_agent(tmp_path / "agent", size=120)
    misfiled = _misfile(agent / "memory")
    before = {kind: path.read_bytes() for kind, path in misfiled.items()}
    scan = MemoryStore(agent / "memory").scan()
    assert sorted(m.path for m in scan.malformed if m.kind == "misfiled") == sorted(misfiled.values())
    outcome = run_dream(agent)
    report = outcome.report  # type: ignore[attr-defined]
    assert report.result == "completed" and report.saved > 0  # the cycle did real work around them
    assert report.quarantined == len(misfiled) and report.write_failures == 0
    assert {kind: path.read_bytes() for kind, path in misfiled.items()} == before
    assert list(incomplete_journals(agent)) == []
    for args in (
        ["dream", agent, "--force"],
        ["recover", agent],
        ["memory", "stats", agent],
        ["memory", "list", agent],
    ):
        result = invoke(cli_app, *args)
        assert result.exit_code == 0, (args, result.output)
    assert {kind: path.read_bytes() for kind, path in misfiled.items()} == before


def test_a_failure_inside_apply_is_skipped_and_never_wedges(
    cli_app: typer.Typer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever goes wrong in one step (here a bug: an unexpected exception in the middle of the plan) is recorded
    with its error and the run goes on: the journal completes, the report names the step, and the next cycle works.
    (A step the filesystem refuses fails the cycle: tests/robustness/test_read_only_and_full.py.)"""
    agent = make_agent(tmp_path / "agent", size=120)
    original = MemoryStore.archive
    calls = [0]

    def flaky(self: MemoryStore, stored: Any, *args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] == 5:
            raise RuntimeError("a bug in the middle of the plan")
        return original(self, stored, *args, **kwargs)

    monkeypatch.setattr(MemoryStore, "archive", flaky)
    report = run_dream(agent).report  # type: ignore[attr-defined]
    monkeypatch.undo()
    assert report.result == "completed" and report.write_failures == 0
    assert any("a bug in the middle of the plan" in note for note in report.notes)
    assert report.archived > 5  # the steps after it ran
    assert list(incomplete_journals(agent)) == []
    result = invoke(cli_app, "dream", agent, "--force")
    assert result.exit_code == 0, result.output
    assert invoke(cli_app, "recover", agent).exit_code == 0


def test_a_100k_deep_entry_is_malformed_and_breaks_nothing(cli_app: typer.Typer, tmp_path: Path) -> None:
    agent = make_agent(tmp_path / "agent")
    deep = agent / "memory" / "notes" / "deep00000001.json"
    deep.parent.mkdir(exist_ok=True)
    deep.write_text('{"id": "deep00000001", "content": "x", "extra": ' + "[" * 100_000 + "]" * 100_000 + "}")
    shallow_enough = agent / "memory" / "notes" / "deep00000002.json"  # under the parser's limit, over ours
    shallow_enough.write_text('{"id": "deep00000002", "content": "x", "extra": ' + "[" * 500 + "]" * 500 + "}")
    dupes = agent / "memory" / "notes" / "dupe00000001.json"
    dupes.write_text('{"id": "dupe00000001", "content": "kept?", "content": "or this?"}')
    before = tree(agent / "memory" / "notes")
    scan = MemoryStore(agent / "memory").scan()
    errors = {m.path.name: m.error for m in scan.malformed}
    assert "nested too deeply" in errors["deep00000001.json"] and "nested too deeply" in errors["deep00000002.json"]
    assert "appears more than once" in errors["dupe00000001.json"]  # finding 8: cannot be rewritten faithfully
    report = run_dream(agent).report  # type: ignore[attr-defined]
    assert report.result == "completed" and report.malformed == 3
    for args in (["memory", "stats", agent], ["memory", "list", agent]):
        result = invoke(cli_app, *args)
        assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    after = tree(agent / "memory" / "notes")
    assert {k: after[k] for k in ("deep00000001.json", "deep00000002.json", "dupe00000001.json")} == {
        k: before[k] for k in ("deep00000001.json", "deep00000002.json", "dupe00000001.json")
    }


def test_a_100k_deep_vocabulary_falls_back(tmp_path: Path) -> None:
    """The vocabulary loader "never raises": a RecursionError escaped it."""
    agent = make_agent(tmp_path / "agent")
    (agent / "merge-coverage-vocabulary.json").write_text('{"extraCommonWords": ' + "[" * 100_000 + "]" * 100_000 + "}")
    report = run_dream(agent).report  # type: ignore[attr-defined]
    assert report.result == "completed" and report.vocabulary_fallback == 1
    assert any("nested too deeply" in note for note in report.notes)


def test_hostile_review_stamps_never_overflow_the_gate() -> None:
    """Stamps are read from files anyone may edit: a decline counted a million times, or dated at the end of
    time, only postpones the cluster's next offer (it used to raise OverflowError in the middle of a cycle)."""
    from datetime import datetime

    from dreamkeeper.consolidation import CycleSettings
    from dreamkeeper.consolidation.gating import reopen_time
    from dreamkeeper.memory import (
        DECLINED_AT,
        DECLINED_CLUSTER,
        DECLINED_COUNT,
        Entry,
        Fingerprint,
        StoredEntry,
        cluster_hash,
    )

    ids = ["aaaa00000001", "aaaa00000002"]
    for declined_at, count in (("9999-12-31T23:59:59+00:00", "1"), ("2026-01-01T00:00:00+00:00", "1000000")):
        members = [
            StoredEntry(
                Entry(
                    id=i,
                    content="x",
                    metadata={DECLINED_CLUSTER: cluster_hash(ids), DECLINED_AT: declined_at, DECLINED_COUNT: count},
                ),
                Path(f"{i}.json"),
                Fingerprint("0", 0, 0),
            )
            for i in ids
        ]
        when = reopen_time(members, CycleSettings())
        assert when is not None and when.year >= 2026 and isinstance(when, datetime)
