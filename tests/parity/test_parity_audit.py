"""Parity with RockBot's memory audit and archive purge (issue 24, findings 1 and 2), through the port in
``rockbot_audit.py`` (MemoryAuditAnalyzer.cs @26053e10, MemoryAuditInvariants.cs @092f8885, MemoryAuditService.cs
@0969bf1f, DreamService.cs @05346ff0, FileMemoryStore.cs @8a7e360e; RockBot's own vectors from
MemoryAuditAnalyzerTests.cs @092f8885), and dreamkeeper's purge and ledger judged by it."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from dreamkeeper.consolidation.cycle import CycleOptions, run_cycle
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.memory import MemoryStore
from dreamkeeper.proposers import ScriptedProposer
from tests.parity import rockbot_audit as audit
from tests.parity import rockbot_files
from tests.parity.citizen import cite
from tests.parity.vectors import NOW

AUDIT_NOW = datetime(2026, 9, 4, 4, 0, tzinfo=UTC)  # MemoryAuditAnalyzerTests.Now
NOTHING = {"toDelete": [], "toSave": []}
_SPAN = re.compile(r"^now(?:-(?P<n>[\d.]+)(?P<unit>d|h|min))?$")


def when(spec: str, now: datetime = AUDIT_NOW) -> datetime:
    match = _SPAN.match(spec)
    assert match, spec
    if match["n"] is None:
        return now
    unit = {"d": "days", "h": "hours", "min": "minutes"}[match["unit"]]
    return now - timedelta(**{unit: float(match["n"])})


def row(entry_id: str, archived: bool = False, archived_at: datetime | None = None) -> audit.Row:
    return audit.Row(entry_id, archived, archived_at, 1, 0, None)


def live(entry_id: str) -> audit.AuditEntry:
    return audit.AuditEntry(entry_id, None, None, 1, audit.np.float32(0.5), None, {})


def archived(entry_id: str, reason: str, at: datetime, reinforcement: int = 1) -> audit.AuditEntry:
    return audit.AuditEntry(entry_id, at, reason, reinforcement, audit.np.float32(0.5), None, {})


def state(rows: list[audit.Row], taken_at: datetime | None = None) -> audit.AuditState:
    return audit.AuditState(taken_at or AUDIT_NOW - timedelta(days=1), rows)


# ---- RockBot's own vectors through the port ----------------------------------------------------------------------


def test_purge_eligible_ids_are_counted_as_purged_not_as_hard_deletes() -> None:
    vector = cite("audit", "PurgeEligibleIdsAreCountedAsPurged_NotAsHardDeletes")
    rows = [row(i, flag, when(at)) for i, flag, at in vector["inputs"]["rows"]]
    snapshot, _ = audit.analyze([], 0, state(rows), AUDIT_NOW)
    expected = vector["expected"]
    assert (snapshot.hard_deleted, snapshot.purged, snapshot.hard_deleted_outside_purge) == (
        expected["hardDeleted"],
        expected["purged"],
        expected["hardDeletedOutsidePurge"],
    )


def test_the_august_scenario_reports_seventy_four_hard_deletes_and_alerts() -> None:
    vector = cite("audit", "TheAugustScenario_ReportsSeventyFourHardDeletesAndAlerts")
    inputs, expected = vector["inputs"], vector["expected"]
    survivors = [live(f"kept{i}") for i in range(inputs["survivors"])]
    fresh = [live(f"new{i}") for i in range(inputs["fresh"])]
    rows = [row(e.id) for e in survivors] + [row(f"lost{i}") for i in range(inputs["lost"])]
    snapshot, _ = audit.analyze([*survivors, *fresh], 0, state(rows), AUDIT_NOW)
    assert (snapshot.live, snapshot.hard_deleted, snapshot.purged) == (
        expected["live"],
        expected["hardDeleted"],
        expected["purged"],
    )
    assert (snapshot.hard_deleted_outside_purge, snapshot.created) == (
        expected["hardDeletedOutsidePurge"],
        expected["created"],
    )
    assert snapshot.status == expected["status"]
    assert set(expected["invariants"]) <= snapshot.invariants.keys()


def test_a_short_window_still_reports_real_loss() -> None:
    vector = cite("audit", "AShortWindowStillReportsRealLoss")
    rows = [row(i) for i in vector["inputs"]["rows"]]
    snapshot, _ = audit.analyze([live("a")], 0, state(rows, when("now-7min")), AUDIT_NOW)
    assert snapshot.net_growth_per_day is None
    assert snapshot.hard_deleted_outside_purge == vector["expected"]["hardDeletedOutsidePurge"]
    assert snapshot.status == "alert"
    assert audit.pause_reason(snapshot, audit.AuditOptions(pause_on_alert=True)) is not None


def test_the_purge_outlook_separates_what_the_floor_will_keep() -> None:
    vector = cite("audit", "PurgeOutlookSeparatesTheHighValueEntriesTheFloorWillKeep")
    entries = [archived(i, "ephemeral", when(at), rc) for i, at, rc in vector["inputs"]["archived"]]
    snapshot, _ = audit.analyze(entries, 0, None, AUDIT_NOW)
    assert (snapshot.purge_due, snapshot.purge_due_high_value) == (
        vector["expected"]["count"],
        vector["expected"]["highValueCount"],
    )


def test_the_dream_pass_cadence_comes_from_the_ledger() -> None:
    vector = cite("ledger", "DreamPassCadenceComesFromTheLedger")
    ledger = {name: when(at) for name, at in vector["inputs"]["ledger"].items()}
    snapshot, _ = audit.analyze([live("a")], 0, state([row("a")]), AUDIT_NOW, ledger=ledger)
    assert snapshot.dream_passes_run == vector["expected"]["dreamPassesRunSinceLast"]
    assert snapshot.consolidation_last_run == when(vector["expected"]["consolidationLastRunAt"])


def test_a_chain_pointing_at_nothing_is_an_alert() -> None:
    vector = cite("audit", "merge-chain-unbroken is an alert")
    entries = [archived(i, reason, AUDIT_NOW - timedelta(days=1)) for i, reason in vector["inputs"]["entries"]]
    snapshot, _ = audit.analyze(entries, 0, None, AUDIT_NOW)
    assert list(snapshot.invariants) == vector["expected"]["invariants"] and snapshot.status == "alert"


# ---- dreamkeeper beside it -----------------------------------------------------------------------------------------


def agent(tmp_path: Path, retention: str | None) -> Path:
    directory = tmp_path / "agent"
    (directory / "memory").mkdir(parents=True)
    if retention is not None:
        settings = {"Dream": {"MemoryArchiveRetention": retention}}
        (directory / "appsettings.json").write_text(json.dumps(settings), encoding="utf-8")
    return directory


def write(directory: Path, entry_id: str, content: str, **fields: Any) -> None:
    rockbot_files.write(directory / "memory", rockbot_files.entry(entry_id, content, **fields))


def cycle(directory: Path, replies: Any = None, now: datetime = NOW, **settings: Any) -> Any:
    options = CycleOptions(
        agent_dir=directory, settings=CycleSettings(min_interval_hours=0, **settings), now=now, force=True
    )
    proposer = ScriptedProposer(replies if replies is not None else (lambda b, r: NOTHING))
    return asyncio.run(run_cycle(options, proposer))


def audited(directory: Path, before: audit.AuditState, at: datetime, retention: timedelta) -> audit.Snapshot:
    entries, malformed = audit.walk(directory / "memory")
    snapshot, _ = audit.analyze(entries, malformed, before, at, audit.DreamOptions(retention=retention))
    return snapshot


def baseline(directory: Path, at: datetime, retention: timedelta) -> audit.AuditState:
    entries, malformed = audit.walk(directory / "memory")
    return audit.analyze(entries, malformed, None, at, audit.DreamOptions(retention=retention))[1]


def test_nothing_is_purged_while_rockbot_s_retention_is_zero(tmp_path: Path) -> None:
    """Finding 1: with RockBot's retention at zero (what docs/rockbot.md said at fa2ec85), its audit counts every
    purge as a hard delete outside the purge; dreamkeeper then purges nothing, and says why."""
    vector = cite("audit", "purged only while retention > 0")
    directory = agent(tmp_path, vector["inputs"]["retention"])
    write(directory, "aged", "A note about lunch.", archivedAt=NOW - timedelta(days=100), archiveReason="flagged")
    write(directory, "live", "Rocky lives in Minnesota.")
    before = baseline(directory, NOW - timedelta(hours=1), timedelta(0))
    report = cycle(directory, retention_days=90).report
    assert report.purged == 0
    assert any("nothing purged: RockBot's Dream:MemoryArchiveRetention is 00:00:00" in n for n in report.notes)
    snapshot = audited(directory, before, NOW + timedelta(minutes=10), timedelta(0))
    assert snapshot.hard_deleted_outside_purge == 0 and snapshot.status != "alert"


def test_an_entry_is_purged_only_strictly_after_rockbot_s_window(tmp_path: Path) -> None:
    vector = cite("audit", "purged only strictly after the window")
    directory = agent(tmp_path, vector["inputs"]["retention"])
    write(directory, "edge", "A note about lunch.", archivedAt=NOW - timedelta(days=90), archiveReason="flagged")
    write(directory, "past", "A note about dinner.", archivedAt=NOW - timedelta(days=91), archiveReason="flagged")
    before = baseline(directory, NOW - timedelta(hours=1), timedelta(days=90))
    report = cycle(directory, retention_days=90).report
    assert report.purged == 1
    store = MemoryStore(directory / "memory")
    assert store.get("edge") is not None and store.get("past") is None
    # Audited at the same instant: the one purged was past the window, the one kept would not have been.
    assert audited(directory, before, NOW, timedelta(days=90)).hard_deleted_outside_purge == 0


def test_a_merge_successor_named_by_an_archived_entry_is_never_purged(tmp_path: Path) -> None:
    vector = cite("audit", "merge-chain-unbroken is an alert")
    directory = agent(tmp_path, "90.00:00:00")
    old = NOW - timedelta(days=100)
    # The source is above the floor (RockBot and dreamkeeper both keep it); its successor, merged again later and
    # decayed meanwhile, is below it.
    write(directory, "source", "Rocky's Sheltie is Milo.", archivedAt=old, archiveReason="merged into succ",
          reinforcementCount=7)  # fmt: skip
    write(directory, "succ", "Rocky has a Sheltie named Milo.", archivedAt=old, archiveReason="merged into final")
    write(directory, "final", "Rocky has a Sheltie named Milo, who hates thunderstorms.")
    before = baseline(directory, NOW - timedelta(hours=1), timedelta(days=90))
    report = cycle(directory, retention_days=90).report
    assert report.purged == 0 and report.purge_kept_chain == 1
    assert MemoryStore(directory / "memory").get("succ") is not None
    snapshot = audited(directory, before, NOW + timedelta(minutes=10), timedelta(days=90))
    assert "merge-chain-unbroken" not in snapshot.invariants, vector["expected"]
    # RockBot's own purge would take the successor (below its floor): the cycle held it above that floor first.
    assert audit.rockbot_purge(directory / "memory", NOW + timedelta(days=1), audit.DreamOptions()) == []


def test_rockbot_s_purge_never_deletes_a_last_record_dreamkeeper_keeps(tmp_path: Path) -> None:
    vector = cite("purge", "RunArchivePurgePassAsync deletes by the floor alone")
    directory = agent(tmp_path, vector["inputs"]["retention"])
    eighty_five = NOW - timedelta(days=85)  # inside the hold horizon: RockBot's window closes in 5 days
    write(directory, "only-record", "Trish Roberts runs PWOP Productions in Las Vegas.", archivedAt=eighty_five,
          archiveReason="flagged ephemeral by consolidation", importanceScore=0.3)  # fmt: skip
    write(directory, "kept", "Lunch was fine.", archivedAt=eighty_five, archiveReason="flagged", importanceScore=0.9)
    write(directory, "live", "Rocky lives in Minnesota.")
    # Without the hold, RockBot's purge six days on deletes the last record (its floor alone decides).
    control = tmp_path / "control"
    (control / "memory").mkdir(parents=True)
    for entry in (directory / "memory").iterdir():
        (control / "memory" / entry.name).write_bytes(entry.read_bytes())
    later = NOW + timedelta(days=6)
    deleted = audit.rockbot_purge(control / "memory", later, audit.DreamOptions())
    assert [e.id for e in deleted] == vector["expected"]["rockbotDeletes"]
    report = cycle(directory, retention_days=90).report
    assert report.purge_held == 1
    held = MemoryStore(directory / "memory").require("only-record").entry
    assert held.importance_score == 0.8 and held.meta("dreamkeeperHeldImportance") == "0.3"
    assert held.meta("dreamkeeperHeldFor") == "last record of Trish, Roberts, PWOP, Productions, Las, Vegas"
    assert audit.rockbot_purge(directory / "memory", later, audit.DreamOptions()) == []
    # A restore gives it its own importance back.
    store = MemoryStore(directory / "memory")
    restored = store.restore(store.require("only-record")).entry
    assert restored.importance_score == 0.3 and restored.meta("dreamkeeperHeldImportance") is None


def test_each_reviewing_cycle_is_recorded_in_rockbot_s_ledger(tmp_path: Path) -> None:
    """Finding 2: RockBot's audit reads ``dream-pass-ledger.json`` for its cadence; a cycle that reviewed entries
    records ``memory consolidation`` there as RockBot's pass does, RockBot's other records left as they are."""
    vector = cite("ledger", "DreamPassLedger file shape")
    directory = agent(tmp_path, None)
    other = {"skill consolidation": {"fingerprint": "0A1B", "lastRunAt": "2026-09-13T18:00:00.5+02:00"}}
    (directory / vector["inputs"]["file"]).write_text(json.dumps(other, indent=2), encoding="utf-8")
    write(directory, "a", "Rocky lives in Minnesota.")
    write(directory, "b", "Rocky is from Minnesota.")
    before = baseline(directory, NOW - timedelta(days=1), timedelta(days=90))
    assert cycle(directory).report.reviewed == 2
    ledger = json.loads((directory / vector["inputs"]["file"]).read_text(encoding="utf-8"))
    assert ledger == {
        **other,
        vector["inputs"]["pass"]: {
            "fingerprint": vector["inputs"]["fingerprint"],
            "lastRunAt": "2026-09-14T06:00:00+00:00",
        },
    }
    entries, _ = audit.walk(directory / "memory")
    snapshot, _ = audit.analyze(entries, 0, before, NOW + timedelta(minutes=10), ledger=audit.read_ledger(directory))
    assert snapshot.consolidation_last_run == NOW
    assert snapshot.dream_passes_run == 2  # RockBot's skill pass and dreamkeeper's consolidation


@pytest.mark.parametrize("reviewed", [0, 1])
def test_a_cycle_that_reviewed_fewer_than_two_entries_records_nothing(tmp_path: Path, reviewed: int) -> None:
    """As RockBot's pass, which returns before recording when fewer than two entries are eligible."""
    directory = agent(tmp_path, None)
    for n in range(reviewed):
        write(directory, f"e{n}", "Rocky lives in Minnesota.")
    cycle(directory)
    assert not (directory / "dream-pass-ledger.json").exists()


def test_a_cycle_never_drops_the_live_corpus_past_the_audit_s_loss_alert(tmp_path: Path) -> None:
    """The first cycle of the year simulation folded and merged 15% of a cold corpus; the audit's next run raised
    ``loss-percent-threshold`` and paused dreamkeeper for the year. Where the audit's state is visible, the fold is
    paced to what the audit allows, the rest left for a later cycle (pacing.py)."""
    vector = cite("audit", "loss-percent-threshold between snapshots")
    inputs, expected = vector["inputs"], vector["expected"]
    directory = agent(tmp_path, None)
    for n in range(inputs["previousLive"] - inputs["exactDuplicateCopies"]):
        write(directory, f"fact{n:02d}", f"Fact number {n} about the NAS backup job.")
    for n in range(inputs["exactDuplicateCopies"]):  # copies of four of those facts: exact duplicates
        write(directory, f"copy{n}", f"Fact number {n} about the NAS backup job.", createdAt=NOW)
    at = NOW - timedelta(hours=1)
    entries, malformed = audit.walk(directory / "memory")
    _, before = audit.analyze(entries, malformed, None, at)
    audit.save_state(directory / "memory-audit", before, "snap0")  # as RockBot's audit leaves it
    report = cycle(directory).report
    assert report.folded == expected["dreamkeeperFolds"] and report.fold_paced == expected["dreamkeeperWaits"]
    snapshot = audited(directory, before, NOW + timedelta(minutes=10), timedelta(days=90))
    assert "loss-percent-threshold" not in snapshot.invariants and snapshot.status != "alert"
    # The next cycle, after the audit ran again (18 live: 10% is 1 entry), folds one more; the last waits again.
    entries, malformed = audit.walk(directory / "memory")
    audit.save_state(directory / "memory-audit", audit.analyze(entries, malformed, before, NOW)[1], "snap1")
    later = cycle(directory, now=NOW + timedelta(hours=12)).report
    assert (later.folded, later.fold_paced) == (1, 1)
