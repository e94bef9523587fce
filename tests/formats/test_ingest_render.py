"""Ingest and render: unit records kept in step with the agent's files, and nothing of the agent's ever lost."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from dreamkeeper.formats import records as rec
from dreamkeeper.formats.check import consistency
from dreamkeeper.formats.entries import HERMES_SEPARATOR
from dreamkeeper.formats.ingest import ingest
from dreamkeeper.formats.layout import check_outside_indexed
from dreamkeeper.formats.profile import HERMES, OPENCLAW, AgentLock, Profile, ProfileOverrides
from dreamkeeper.formats.render import _Render, render
from dreamkeeper.memory import ARCHIVED_BY_CYCLE, StateDirError
from dreamkeeper.memory.atomic import write_seam
from tests.formats.helpers import (
    DAY_1,
    DAY_2,
    NOW,
    hermes_agent,
    merge,
    openclaw_agent,
    prune,
    record_with,
    unit_store,
)


def workspace(agent: Path) -> Path:
    return agent / "workspace"


def test_every_unit_gets_a_record_outside_the_agents_indexed_paths(tmp_path: Path) -> None:
    agent = openclaw_agent(tmp_path)
    store = unit_store(agent)
    report = ingest(agent, OPENCLAW, store, NOW)
    assert (report.files, report.units, report.created) == (3, 7, 7)
    records = store.scan().entries
    assert {s.entry.meta(rec.FILE) for s in records} == {"MEMORY.md", "memory/2026-11-29.md", "memory/2026-11-30.md"}
    assert all(not str(s.path).startswith(str(workspace(agent))) for s in records)
    day = record_with(store, "Priya's birthday")
    assert day.entry.category == "daily" and day.entry.created_at.date().isoformat() == "2026-11-30"
    assert record_with(store, "Priya prefers tea").entry.importance_score > day.entry.importance_score
    # A second ingest of unchanged files writes nothing.
    again = ingest(agent, OPENCLAW, store, NOW)
    assert (again.created, again.updated, again.agent_removed) == (0, 0, [])


def test_a_merge_is_written_under_its_first_sources_heading_and_the_sources_leave_verbatim(tmp_path: Path) -> None:
    agent = openclaw_agent(tmp_path)
    store = unit_store(agent)
    ingest(agent, OPENCLAW, store, NOW)
    sources = [record_with(store, "his phone"), record_with(store, "prefers Slack")]
    merge(store, sources, "Franklin Oduya is the on-call lead; phone +1 386-299-4605; prefers Slack.")
    report = render(agent, OPENCLAW, store, NOW)
    assert sorted(report.removed) == sorted(s.id for s in sources) and report.placed == ["5ucc0000aaaa"]
    text = (workspace(agent) / "MEMORY.md").read_text()
    assert text == (
        "# Memory\n\n## People\n\n- Priya prefers tea.\n"
        "- Franklin Oduya is the on-call lead; phone +1 386-299-4605; prefers Slack.\n\n"
        "## Projects\n\nThe Hydra migration ships 2026-12-15.\n"
    )
    for source in sources:
        archived = store.require(source.id).entry
        assert archived.content == source.entry.content  # verbatim, list marker and all
        assert (archived.meta(rec.FILE), archived.meta(rec.HEADING)) == ("MEMORY.md", "Memory > People")
        assert archived.meta(rec.HASH) == source.entry.meta(rec.HASH)
        assert archived.meta(ARCHIVED_BY_CYCLE) == "c1" and rec.placement_of(archived) == rec.REMOVED
    assert (workspace(agent) / "memory" / "2026-11-29.md").read_text() == DAY_1
    again = ingest(agent, OPENCLAW, store, NOW)
    assert (again.created, again.updated, again.agent_removed) == (0, 0, [])


def test_daily_notes_are_append_only_a_merge_of_them_is_promoted_into_memory_md(tmp_path: Path) -> None:
    agent = openclaw_agent(tmp_path)
    store = unit_store(agent)
    ingest(agent, OPENCLAW, store, NOW)
    sources = [record_with(store, "(ticket INC-4411)"), record_with(store, ", ticket INC-4411")]
    merge(store, sources, "Met Franklin about the VPN outage (ticket INC-4411).", category="daily")
    report = render(agent, OPENCLAW, store, NOW)
    assert report.removed == [] and report.kept_in_log == 2
    assert (workspace(agent) / "memory" / "2026-11-29.md").read_text() == DAY_1
    assert (workspace(agent) / "memory" / "2026-11-30.md").read_text() == DAY_2
    memory = (workspace(agent) / "MEMORY.md").read_text()
    assert memory.endswith(
        "## Consolidated from daily notes\n\n- Met Franklin about the VPN outage (ticket INC-4411).\n"
    )
    # The sources stay archived (consolidated) and are not taken for new units by the next ingest.
    again = ingest(agent, OPENCLAW, store, NOW)
    assert (again.created, again.restored, again.stale_copies) == (0, [], [])
    assert not store.require(sources[0].id).entry.is_live


def test_a_profile_that_allows_rewriting_past_days_takes_a_merged_daily_line_out_of_its_note(tmp_path: Path) -> None:
    """`appendOnlyLogs: false`: the one case where a past day is rewritten. The merged lines leave their notes (their
    text kept in the records), the successor is promoted into MEMORY.md, every other line of the notes stays."""
    rewriting = ProfileOverrides.model_validate({"appendOnlyLogs": False}).apply(OPENCLAW)
    agent = openclaw_agent(tmp_path)
    store = unit_store(agent)
    ingest(agent, rewriting, store, NOW)
    sources = [record_with(store, "(ticket INC-4411)"), record_with(store, ", ticket INC-4411")]
    merge(store, sources, "Met Franklin about the VPN outage (ticket INC-4411).", category="daily")
    report = render(agent, rewriting, store, NOW)
    assert len(report.removed) == 2 and report.kept_in_log == 0
    day_1 = (workspace(agent) / "memory" / "2026-11-29.md").read_text()
    day_2 = (workspace(agent) / "memory" / "2026-11-30.md").read_text()
    assert "INC-4411" not in day_1 + day_2
    assert day_1.startswith("# 2026-11-29") and "- Priya's birthday is 2026-03-02." in day_2
    memory = (workspace(agent) / "MEMORY.md").read_text()
    assert "- Met Franklin about the VPN outage (ticket INC-4411).\n" in memory
    for source in sources:  # the lines that left are kept verbatim, with their file
        kept = store.require(source.id).entry
        assert (
            not kept.is_live
            and kept.content == source.entry.content
            and kept.meta(rec.FILE) == source.entry.meta(rec.FILE)
        )
    assert consistency(agent, rewriting, store).problems == []


def test_a_unit_the_agent_removes_is_kept_and_restore_writes_it_back_where_it_was(tmp_path: Path) -> None:
    agent = openclaw_agent(tmp_path)
    store = unit_store(agent)
    ingest(agent, OPENCLAW, store, NOW)
    path = workspace(agent) / "MEMORY.md"
    path.write_text(path.read_text().replace("- Priya prefers tea.\n", ""))
    report = ingest(agent, OPENCLAW, store, NOW)
    kept = store.require(report.agent_removed[0])
    assert kept.entry.is_archived and kept.entry.content == "- Priya prefers tea."
    assert kept.entry.archive_reason == rec.REASON_AGENT_REMOVED + "MEMORY.md"
    store.restore(kept)
    render(agent, OPENCLAW, store, NOW)
    assert path.read_text().count("- Priya prefers tea.\n") == 1
    assert "## People\n\n- Franklin Oduya is" in path.read_text()
    assert store.require(kept.id).entry.is_live
    assert ingest(agent, OPENCLAW, store, NOW).agent_removed == []


def test_a_whole_daily_note_deleted_by_the_agent_is_kept_and_restorable(tmp_path: Path) -> None:
    """openclaw#84882: 46 daily files lost. Every unit they held is still in the archive, and comes back."""
    agent = openclaw_agent(tmp_path)
    store = unit_store(agent)
    ingest(agent, OPENCLAW, store, NOW)
    (workspace(agent) / "memory" / "2026-11-30.md").unlink()
    report = ingest(agent, OPENCLAW, store, NOW)
    assert len(report.agent_removed) == 2
    for record_id in report.agent_removed:
        store.restore(store.require(record_id))
    render(agent, OPENCLAW, store, NOW)
    restored = (workspace(agent) / "memory" / "2026-11-30.md").read_text()
    assert "Met Franklin about the VPN outage, ticket INC-4411." in restored and "2026-03-02" in restored


def test_a_stale_writer_overwriting_a_successor_gets_its_sources_back_in_the_file(tmp_path: Path) -> None:
    """hermes#26045: a writer that cached the file writes its old list back over the consolidated one. The successor
    is gone from the file; the sources it wrote back are then the file's only copy of the fact, so they are live
    again (not taken out as stale copies: the fact would have left the agent's files for the archive)."""
    agent = hermes_agent(tmp_path)
    store = unit_store(agent)
    ingest(agent, HERMES, store, NOW)
    memory = agent / "memories" / "MEMORY.md"
    stale = memory.read_text()
    sources = [record_with(store, "at 10.0.10.223."), record_with(store, "runs ZFS")]
    merge(store, sources, "The NAS nas-02 has IP 10.0.10.223 and runs ZFS (the user's server).")
    render(agent, HERMES, store, NOW)
    memory.write_text(stale + HERMES_SEPARATOR + "A new fact the stale writer added.")
    report = ingest(agent, HERMES, store, NOW)
    assert report.stale_copies == [] and sorted(report.restored) == sorted(s.id for s in sources)
    assert report.agent_removed == ["5ucc0000aaaa"] and report.created == 1
    render(agent, HERMES, store, NOW)
    text = memory.read_text()
    assert "10.0.10.223" in text and "runs ZFS" in text and "A new fact the stale writer added." in text
    assert consistency(agent, HERMES, store).problems == []


def test_a_source_written_back_beside_its_successor_is_taken_out_again(tmp_path: Path) -> None:
    agent = hermes_agent(tmp_path)
    store = unit_store(agent)
    ingest(agent, HERMES, store, NOW)
    memory = agent / "memories" / "MEMORY.md"
    sources = [record_with(store, "at 10.0.10.223."), record_with(store, "runs ZFS")]
    merge(store, sources, "The NAS nas-02 has IP 10.0.10.223 and runs ZFS (the user's server).")
    render(agent, HERMES, store, NOW)
    memory.write_text(memory.read_text() + HERMES_SEPARATOR + sources[0].entry.content)  # an old copy, appended
    report = ingest(agent, HERMES, store, NOW)
    assert report.stale_copies == [sources[0].id] and report.restored == []
    render(agent, HERMES, store, NOW)
    assert sources[0].entry.content not in memory.read_text() and "(the user's server)" in memory.read_text()
    assert consistency(agent, HERMES, store).problems == []


def test_a_unit_the_agent_writes_again_after_it_was_archived_is_restored_not_duplicated(tmp_path: Path) -> None:
    agent = hermes_agent(tmp_path)
    store = unit_store(agent)
    ingest(agent, HERMES, store, NOW)
    gone = record_with(store, "GitHub Actions")
    prune(store, gone)
    render(agent, HERMES, store, NOW)
    memory = agent / "memories" / "MEMORY.md"
    assert "GitHub Actions" not in memory.read_text()
    memory.write_text(memory.read_text() + HERMES_SEPARATOR + "Deploys go through GitHub Actions.")
    report = ingest(agent, HERMES, store, NOW)
    assert report.restored == [gone.id] and report.created == 0
    assert store.require(gone.id).entry.is_live


def test_a_successor_over_the_cap_undoes_its_merge_and_the_file_is_left_as_it_was(tmp_path: Path) -> None:
    agent = hermes_agent(tmp_path, user=["Name: Priya Raman.", "Prefers terse answers.", "u" * 1300])
    store = unit_store(agent)
    ingest(agent, HERMES, store, NOW)
    user = agent / "memories" / "USER.md"
    before = user.read_text()
    sources = [record_with(store, "Name: Priya"), record_with(store, "terse answers")]
    merge(store, sources, "Priya Raman prefers terse answers " + "and long merged text " * 5, category="user")
    report = render(agent, HERMES, store, NOW)
    assert user.read_text() == before
    assert report.placed == [] and report.reverted and "over its cap of 1,375" in report.reverted[0]
    for source in sources:
        assert store.require(source.id).entry.is_live
    assert store.require("5ucc0000aaaa").entry.is_archived
    assert ingest(agent, HERMES, store, NOW).agent_removed == []


def test_the_agents_concurrent_write_is_kept_and_the_rewrite_is_applied_to_it(tmp_path: Path) -> None:
    agent = openclaw_agent(tmp_path)
    store = unit_store(agent)
    ingest(agent, OPENCLAW, store, NOW)
    path = workspace(agent) / "MEMORY.md"
    sources = [record_with(store, "his phone"), record_with(store, "prefers Slack")]
    merge(store, sources, "Franklin Oduya is the on-call lead; phone +1 386-299-4605; prefers Slack.")
    wrote = []

    def agent_writes(stage: str, target: Path) -> None:
        if stage == "checked" and target == path and not wrote:
            wrote.append(1)
            tmp = path.with_name(".agent.tmp")
            tmp.write_text(path.read_text() + "\n## Places\n\n- Lisbon office opened.\n")
            os.replace(tmp, path)

    with write_seam(agent_writes):
        report = render(agent, OPENCLAW, store, NOW)
    assert report.conflicts == 1 and len(report.removed) == 2
    text = path.read_text()
    assert "- Lisbon office opened." in text and "prefers Slack.\n" in text and "his phone" not in text


def test_a_killed_render_is_finished_once_by_the_next_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed after the file was written and before the records said so: the next run adopts what it wrote."""
    agent = hermes_agent(tmp_path)
    store = unit_store(agent)
    ingest(agent, HERMES, store, NOW)
    sources = [record_with(store, "at 10.0.10.223."), record_with(store, "runs ZFS")]
    merge(store, sources, "The NAS nas-02 has IP 10.0.10.223 and runs ZFS (the user's server).")

    def killed(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(_Render, "_settle", killed)
    with pytest.raises(KeyboardInterrupt):
        render(agent, HERMES, store, NOW)
    monkeypatch.undo()
    memory = agent / "memories" / "MEMORY.md"
    assert memory.read_text().count("runs ZFS (the user's server)") == 1
    report = ingest(agent, HERMES, store, NOW)  # the next cycle's ingest: nothing mistaken for the agent's doing
    assert (report.created, report.agent_removed, report.restored) == (0, [], [])
    render(agent, HERMES, store, NOW)
    assert memory.read_text().count("runs ZFS (the user's server)") == 1
    assert rec.placement_of(store.require("5ucc0000aaaa").entry) == rec.IN_FILE


def test_the_agents_lock_is_taken_and_a_held_lock_leaves_the_work_pending(tmp_path: Path) -> None:
    agent = hermes_agent(tmp_path)
    profile = HERMES.model_copy(update={"lock": AgentLock(kind="flock-sidecar", wait_seconds=0.2)})
    store = unit_store(agent)
    ingest(agent, profile, store, NOW)
    prune(store, record_with(store, "GitHub Actions"))
    lock = agent / "memories" / "MEMORY.md.lock"
    with open(lock, "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        report = render(agent, profile, store, NOW)
        assert report.refused and "lock" in report.refused[0]
    assert "GitHub Actions" in (agent / "memories" / "MEMORY.md").read_text()
    render(agent, profile, store, NOW)
    assert "GitHub Actions" not in (agent / "memories" / "MEMORY.md").read_text()


def test_a_file_that_is_not_utf8_is_left_alone_and_nothing_is_concluded_about_its_units(tmp_path: Path) -> None:
    agent = openclaw_agent(tmp_path)
    store = unit_store(agent)
    ingest(agent, OPENCLAW, store, NOW)
    path = workspace(agent) / "MEMORY.md"
    path.write_bytes(b"# Memory\n\n- \xff broken\n")
    report = ingest(agent, OPENCLAW, store, NOW)
    assert report.agent_removed == [] and report.unreadable and "not UTF-8" in report.unreadable[0]
    assert path.read_bytes() == b"# Memory\n\n- \xff broken\n"


def test_state_inside_an_indexed_folder_is_refused(tmp_path: Path) -> None:
    agent = openclaw_agent(tmp_path)
    check_outside_indexed(agent, OPENCLAW)
    inside = ProfileOverrides.model_validate({"memoryDir": "."}).apply(
        Profile.model_validate({**OPENCLAW.model_dump(), "indexed": ("**",)})
    )
    with pytest.raises(StateDirError, match="reads or indexes"):
        check_outside_indexed(agent, inside)


def test_a_successor_saying_exactly_what_one_source_says_replaces_both_and_nothing_is_lost(tmp_path: Path) -> None:
    """Found by the real OpenClaw test: the successor's text equals a source's (list marker aside); the render took
    that source's line for the successor (adopted it), removed it as a source, and the fact left MEMORY.md."""
    agent = openclaw_agent(tmp_path)
    store = unit_store(agent)
    ingest(agent, OPENCLAW, store, NOW)
    sources = [record_with(store, "his phone"), record_with(store, "prefers Slack")]
    same = sources[0].entry.content.removeprefix("- ")
    merge(store, sources, same)
    report = render(agent, OPENCLAW, store, NOW)
    assert report.placed == ["5ucc0000aaaa"] and report.reverted == [] and len(report.removed) == 2
    text = (workspace(agent) / "MEMORY.md").read_text()
    assert text.count(same) == 1 and "prefers Slack" not in text
    assert consistency(agent, OPENCLAW, store).problems == []
    assert ingest(agent, OPENCLAW, store, NOW).agent_removed == []


def test_a_merge_of_an_earlier_successor_is_written_where_that_successor_is(tmp_path: Path) -> None:
    """Found by the year simulation at Hermes' large caps: a successor merged again (merge of a merge) had a source
    with no kind of its own (successors are written by a render, not ingested), and no file took it, every cycle."""
    agent = hermes_agent(tmp_path)
    store = unit_store(agent)
    ingest(agent, HERMES, store, NOW)
    sources = [record_with(store, "at 10.0.10.223."), record_with(store, "runs ZFS")]
    merge(store, sources, "The NAS nas-02 has IP 10.0.10.223 and runs ZFS.", successor_id="5ucc0000aaaa")
    render(agent, HERMES, store, NOW)
    again = merge(
        store,
        [store.require("5ucc0000aaaa")],
        "NAS nas-02: IP 10.0.10.223, ZFS.",
        cycle="c2",
        successor_id="5ucc0000bbbb",
    )
    report = render(agent, HERMES, store, NOW)
    assert report.refused == [] and report.placed == [again.id]
    assert "NAS nas-02: IP 10.0.10.223, ZFS." in (agent / "memories" / "MEMORY.md").read_text()
    assert consistency(agent, HERMES, store).problems == []
