"""One file per memory (Claude Code's auto memory, OpenHarness): files moved into the archive, never deleted, and
an index whose lines keep pointing at files that exist."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

from dreamkeeper.formats import PROFILES, units_root
from dreamkeeper.formats import records as rec
from dreamkeeper.formats.check import consistency
from dreamkeeper.memory import MemoryStore
from tests.agents.format_cycle import dream
from tests.formats.helpers import NOW

TOPICS = {
    "user_role.md": ("user-role", "Jordan's role", "user", "Jordan is a principal consultant at Ellery Labs."),
    "oncall_franklin.md": (
        "oncall-franklin",
        "who is on call",
        "project",
        "Franklin Oduya is the on-call lead; his phone is +1 386-299-4605.",
    ),
    "franklin_contact.md": (
        "franklin-contact",
        "Franklin's contact",
        "reference",
        "Franklin Oduya, on-call lead, phone +1 386-299-4605, prefers Slack.",
    ),
}


def claude_memory(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    memory = project / "memory"
    memory.mkdir(parents=True)
    index = ["# Memory index", ""]
    for name, (title, hook, kind, body) in TOPICS.items():
        (memory / name).write_text(f"---\nname: {title}\ndescription: {hook}\ntype: {kind}\n---\n\n{body}\n")
        index.append(f"- [{title}]({name}) — {hook}")
    (memory / "MEMORY.md").write_text("\n".join(index) + "\n- [gone](missing.md) — a link the agent broke\n")
    (memory / ".consolidate-lock").write_text("4242")
    return project


def links(memory: Path) -> list[str]:
    return re.findall(r"\]\(([^)]+)\)", (memory / "MEMORY.md").read_text())


def test_a_merge_moves_its_source_files_into_the_archive_and_writes_a_new_topic_with_its_index_line(
    tmp_path: Path,
) -> None:
    project = claude_memory(tmp_path)
    memory = project / "memory"
    first = dream(project, "claude", now=NOW)
    assert first.report.units_taken_out == 2 and first.report.units_written == 1 and first.report.hard_deletes == 0
    assert not (memory / "oncall_franklin.md").exists() and not (memory / "franklin_contact.md").exists()
    archive = project / ".dreamkeeper" / "archive"
    moved = sorted(p.name for p in archive.rglob("*.md"))
    assert moved == ["franklin_contact.md", "oncall_franklin.md"]  # moved verbatim, never deleted
    for path in archive.rglob("*.md"):
        assert path.read_text().startswith("---\nname: ")
    # Every index line dreamkeeper manages points at a file that exists; the agent's own broken link is untouched.
    for target in links(memory):
        assert (memory / target).exists() or target == "missing.md"
    successor = [t for t in links(memory) if t not in TOPICS and t != "missing.md"]
    assert len(successor) == 1 and "+1 386-299-4605" in (memory / successor[0]).read_text()
    assert (memory / successor[0]).read_text().startswith("---\nname: ")
    assert (memory / ".consolidate-lock").read_text() == "4242"
    assert consistency(project, PROFILES["claude"], MemoryStore(units_root(project))).problems == []
    second = dream(project, "claude", now=NOW + timedelta(hours=12))
    assert (second.report.units_ingested, second.report.units_kept_for_agent) == (0, 0)


def test_undo_moves_the_files_back_and_restores_their_index_lines(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from dreamkeeper.cli import _register, app

    project = claude_memory(tmp_path)
    memory = project / "memory"
    before = {p.name: p.read_text() for p in memory.glob("*.md") if p.name != "MEMORY.md"}
    cycle = dream(project, "claude", now=NOW).report.cycle_id
    _register()
    result = CliRunner().invoke(app, ["undo", str(project), cycle, "--format", "claude"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    after = {p.name: p.read_text() for p in memory.glob("*.md") if p.name != "MEMORY.md"}
    assert after == before
    assert sorted(links(memory)) == sorted([*TOPICS, "missing.md"])
    store = MemoryStore(units_root(project))
    assert all(s.entry.is_live == (rec.placement_of(s.entry) == rec.IN_FILE) for s in store.scan().entries)


def test_a_topic_the_agent_deletes_is_kept_and_restorable(tmp_path: Path) -> None:
    project = claude_memory(tmp_path)
    memory = project / "memory"
    dream(project, "claude", now=NOW)
    (memory / "user_role.md").unlink()  # anthropics/claude-code#47959: files deleted by the agent's own dream
    report = dream(project, "claude", now=NOW + timedelta(hours=12)).report
    assert report.units_kept_for_agent == 1
    kept = next(s for s in MemoryStore(units_root(project)).scan().entries if "principal consultant" in s.entry.content)
    assert kept.entry.is_archived
    store = MemoryStore(units_root(project))
    store.restore(store.require(kept.id))
    dream(project, "claude", now=NOW + timedelta(hours=24))
    assert "principal consultant" in (memory / "user_role.md").read_text()
    assert "user_role.md" in links(memory)


def test_distinct_topic_files_are_not_recurrences_of_one_another(tmp_path: Path) -> None:
    """Found by the Claude-style year simulation: a whole-file unit's identity hash is the file, so counting
    recurrences by that hash took every topic for a copy of every other. With 78+ topics each one was "reinforced"
    78 times at importance 0.8: above the high-value floor, so none was ever purged (0 purged in a year) and none
    could be pruned. Recurrence counts the same *text* written in several places, for file units too."""
    project = claude_memory(tmp_path)
    memory = project / "memory"
    (memory / "copy_of_role.md").write_text((memory / "user_role.md").read_text())  # one real recurrence
    dream(project, "claude", now=NOW, settings={"similarity_threshold": 0.99})
    records = {s.entry.meta(rec.FILE): s.entry for s in MemoryStore(units_root(project)).scan().entries}
    assert records["oncall_franklin.md"].reinforcement_count == 1
    assert records["franklin_contact.md"].reinforcement_count == 1
    assert records["oncall_franklin.md"].importance_score == PROFILES["claude"].importance.file
    assert records["user_role.md"].reinforcement_count >= 2  # the same text in two files does recur (then folds)
