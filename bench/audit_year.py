"""A year of twice-daily dreamkeeper cycles beside a RockBot whose dream is switched off as documented, with RockBot's
own archive purge and memory audit (ported in tests/parity/rockbot_audit.py) run after every cycle.

    python -m bench audit-year [--settings before|after] [--quick] [--cycles 730] [--seed 1] [--harm-rate P]
                               [--drift-rate P] [--name NAME] [--out DIR]

The agent mines and the adversary proposes as in the year simulation (bench/year_sim.py: the same world, seed and
adversary; dreamkeeper's real engine on a real store). Beside it, RockBot as its documentation says to run it:

* ``before`` (docs/rockbot.md at fa2ec85): ``Dream__MemoryArchiveRetention=00:00:00`` (its purge off),
  ``retentionDays: 90`` in dreamkeeper;
* ``after`` (docs/rockbot.md, "Running beside RockBot's audit"): ``Dream__MemoryArchiveRetention=90.00:00:00``
  (its purge on, the same window as dreamkeeper's), written into ``AGENT_DIR/appsettings.json`` where dreamkeeper
  reads it;

and in both ``MemoryAudit__PauseConsolidationOnAlert=true``. With coordination ``Stop`` the agent restarts after
every cycle, so its dream runs 5 minutes after it (``InitialDelay``; the archive purge first, whatever its toggles
say) and its audit 10 minutes after it (the audit's ``InitialDelay``), plus the audit's daily run at 04:00. The
audit's pause marker, once written, stops every later cycle (nobody removes it in a simulation).

Measured per quarter: the audit's alerts (runs with status alert, and which invariants), its purged and
hard-deleted-outside-purge counts, the cycles paused; what RockBot's purge deleted, and how many of those
dreamkeeper keeps; what dreamkeeper purged and held; and the specifics that left the store (archive included) for
good. The engine under test is whatever ``dreamkeeper`` imports (run ``before`` with the engine at fa2ec85 first on
``PYTHONPATH`` to measure the old behaviour; the results record which engine ran).
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import shutil
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from tests.parity.rockbot_audit import (
    AuditEntry,
    AuditOptions,
    AuditState,
    DreamOptions,
    analyze,
    pause_reason,
    read_ledger,
    rockbot_purge,
    save_state,
    walk,
    write_pause_marker,
)

import dreamkeeper
from bench.sim.adversary import Adversary, Rates, Tally
from bench.sim.dreamkeeper_arm import DreamkeeperArm
from bench.sim.ledger import ArmMeasure, Ledger
from bench.sim.world import World
from bench.year_sim import START, STEP, UNEXPLAINED
from dreamkeeper.consolidation.settings import CycleSettings

RESULTS = Path(__file__).resolve().parent / "results"
DOCUMENTED = {
    "before": {"Dream": {"MemoryConsolidationEnabled": False, "MemoryExactDuplicateFoldEnabled": False,
                         "MemoryArchiveRetention": "00:00:00"}},
    "after": {"Dream": {"MemoryConsolidationEnabled": False, "MemoryExactDuplicateFoldEnabled": False,
                        "MemoryArchiveRetention": "90.00:00:00"}},
}  # fmt: skip
QUARTER_DAYS = 365 / 4

log = logging.getLogger(__name__)


@dataclass
class Quarter:
    audits: int = 0
    alerts: int = 0
    warnings: int = 0
    invariants: Counter[str] = field(default_factory=Counter)
    purged: int = 0
    hard_deleted_outside_purge: int = 0
    paused_cycles: int = 0
    marker_written: int = 0
    rockbot_deleted: int = 0
    rockbot_deleted_kept: int = 0
    dk_purged: int = 0
    dk_held: int = 0
    specifics_left_store: int = 0

    def row(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "invariants"}
        out["invariants"] = dict(self.invariants)
        return out


@dataclass
class Config:
    settings_kind: str = "after"
    cycles: int = 730
    seed: int = 1
    retention_days: int = 90
    rates: Rates = field(default_factory=Rates)
    people: int = 500
    initial_families: int = 110
    name: str = ""
    out: Path = RESULTS
    argv: tuple[str, ...] = ()


def _agent_settings(kind: str, retention_days: int) -> dict[str, Any]:
    documented = json.loads(json.dumps(DOCUMENTED[kind]))
    if kind == "after":
        documented["Dream"]["MemoryArchiveRetention"] = f"{retention_days}.00:00:00"
    documented["MemoryAudit"] = {"PauseConsolidationOnAlert": True}
    return documented


def run(config: Config) -> dict[str, Any]:
    settings = CycleSettings(min_interval_hours=6, retention_days=config.retention_days)
    rockbot_retention = timedelta(days=config.retention_days if config.settings_kind == "after" else 0)
    dream = DreamOptions(retention=rockbot_retention)
    options = AuditOptions(pause_on_alert=True)
    world, ledger = World(config.seed, config.people), Ledger(settings)
    adversary = Adversary(config.seed, config.rates)
    workdir = Path(tempfile.mkdtemp(prefix="dk-audit-year-"))
    agent = workdir / "agent"
    arm = DreamkeeperArm(agent, settings, adversary, Tally())
    (agent / "appsettings.json").write_text(json.dumps(_agent_settings(config.settings_kind, config.retention_days)))
    memory = agent / "memory"
    store = ArmMeasure("store", ledger)
    quarters = [Quarter() for _ in range(4)]
    state: AuditState | None = None
    marker_at: str | None = None
    try:
        for mined in world.initial(config.initial_families, START):
            ledger.record(mined, 0)
            arm.add(mined)
        walked = walk(memory)
        store.sync({e.id: e.content for e in walked[0]})
        store.measure(-1, set(ledger.mined), lambda _: UNEXPLAINED)
        state = _audit(agent, walked, None, START + timedelta(minutes=10), dream, options, quarters[0])[0]
        for cycle in range(config.cycles):
            now = START + STEP * (cycle + 1)
            quarter = quarters[min(3, int((now - START).days / QUARTER_DAYS))]
            for mined in world.mine(now):
                ledger.record(mined, cycle)
                arm.add(mined)
                store.covered |= ledger.keys_of(mined.content, mined.category)
            result = arm.cycle(cycle, now)
            report = result.outcome.report
            quarter.paused_cycles += int(report.paused)
            quarter.dk_purged += report.purged
            quarter.dk_held += int(getattr(report, "purge_held", 0))
            purge_at = now + timedelta(minutes=5)
            if rockbot_purge(memory, purge_at, dream, delete=False):
                kept = _kept_by_dreamkeeper(memory, settings)  # asked only when RockBot's purge deletes something
                deleted = rockbot_purge(memory, purge_at, dream)
                quarter.rockbot_deleted += len(deleted)
                quarter.rockbot_deleted_kept += sum(1 for e in deleted if e.id.lower() in kept)
            walked = walk(memory)  # nothing writes again before the next cycle: one walk serves all
            store.sync({e.id: e.content for e in walked[0]})
            gone = store.measure(cycle, set(ledger.mined), lambda _: "purged: its last record was deleted")
            quarter.specifics_left_store += len(gone)
            times = [now + timedelta(minutes=10)]
            if now.hour == 0:
                times.append(now + timedelta(hours=4))  # the audit's own cron, 0 4 * * *
            for at in times:
                state, reason = _audit(agent, walked, state, at, dream, options, quarter)
                if reason and marker_at is None:
                    marker_at = at.isoformat()
                    quarter.marker_written += 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    total = Quarter()
    for q in quarters:
        for key, value in q.__dict__.items():
            if key == "invariants":
                total.invariants.update(value)
            else:
                setattr(total, key, getattr(total, key) + value)
    return {
        "command": ("python -m bench audit-year " + shlex.join(config.argv)).strip(),
        "engine": str(Path(dreamkeeper.__file__).resolve().parent),
        "settings": config.settings_kind,
        "agentSettings": _agent_settings(config.settings_kind, config.retention_days),
        "cycles": config.cycles,
        "seed": config.seed,
        "rates": config.rates.__dict__,
        "retentionDays": config.retention_days,
        "pauseMarkerWrittenAt": marker_at,
        "quarters": [q.row() for q in quarters],
        "total": total.row(),
    }


def _audit(
    agent: Path,
    walked: tuple[list[AuditEntry], int],
    state: AuditState | None,
    at: datetime,
    dream: DreamOptions,
    options: AuditOptions,
    quarter: Quarter,
) -> tuple[AuditState, str | None]:
    entries, malformed = walked
    snapshot, new_state = analyze(entries, malformed, state, at, dream, options, read_ledger(agent))
    quarter.audits += 1
    quarter.alerts += int(snapshot.status == "alert")
    quarter.warnings += int(snapshot.status == "warning")
    quarter.invariants.update(snapshot.invariants.keys())
    quarter.purged += snapshot.purged
    quarter.hard_deleted_outside_purge += snapshot.hard_deleted_outside_purge
    save_state(agent / "memory-audit", new_state, f"sim-{at:%Y%m%d%H%M}")  # as the service saves it, every run
    reason = pause_reason(snapshot, options)
    marker = agent / "memory-audit" / "consolidation-paused.json"
    if reason and not marker.exists():
        write_pause_marker(marker.parent, reason, f"sim-{at:%Y%m%d%H%M}", at)
        return new_state, reason
    return new_state, None


def _kept_by_dreamkeeper(memory: Path, settings: CycleSettings) -> set[str]:
    """Archived entries dreamkeeper's purge keeps whenever they are due: above its floor, the last record of a
    specific, or a merge successor an archived entry names (what RockBot's purge must not delete)."""
    from dreamkeeper.consolidation.purge import LastRecords
    from dreamkeeper.coverage import DEFAULT_VOCABULARY
    from dreamkeeper.memory import MemoryStore

    try:
        from dreamkeeper.memory import unheld
    except ImportError:  # an engine from before the purge's hold (the "before" run)

        def unheld(entry: Any) -> Any:
            return entry

    scan = MemoryStore(memory).scan()
    archived = [s for s in scan.entries if s.entry.is_archived]
    rule = LastRecords.of((s.entry for s in scan.entries), DEFAULT_VOCABULARY)
    kept = {s.id.lower() for s in archived if settings.floor.protects(unheld(s.entry))}
    kept |= {i.lower() for i in rule.keep(archived)}
    targets = {
        (s.entry.archive_reason or "")[len("merged into ") :].strip().lower()
        for s in scan.entries
        if s.entry.is_archived and (s.entry.archive_reason or "").lower().startswith("merged into ")
    }
    return kept | (targets & {s.id.lower() for s in archived})


# ---- CLI and output --------------------------------------------------------------------------------------------


def parse(argv: Sequence[str]) -> Config:
    parser = argparse.ArgumentParser(prog="python -m bench audit-year", description=__doc__.splitlines()[0])
    parser.add_argument("--settings", choices=("before", "after"), default="after")
    parser.add_argument("--quick", action="store_true", help="20 cycles, retention 3 days (for tests)")
    parser.add_argument("--cycles", type=int, default=None)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--harm-rate", type=float, default=None)
    parser.add_argument("--drift-rate", type=float, default=None)
    parser.add_argument("--name", default=None)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(list(argv))
    config = Config(settings_kind=args.settings, seed=args.seed, out=args.out, argv=tuple(argv))
    if args.quick:
        config.cycles, config.retention_days, config.people, config.initial_families = 20, 3, 60, 40
        config.rates.harm_rate = config.rates.drift_rate = 0.05
    if args.cycles is not None:
        config.cycles = args.cycles
    if args.harm_rate is not None:
        config.rates.harm_rate = args.harm_rate
    if args.drift_rate is not None:
        config.rates.drift_rate = args.drift_rate
    config.name = args.name or f"audit-year-{config.settings_kind}"
    return config


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"# A year beside RockBot's audit: {result['settings']} settings",
        "",
        f"Command: `{result['command']}` (engine: `{result['engine']}`; seed {result['seed']}, "
        f"{result['cycles']} cycles, adversary harm {result['rates']['harm_rate']}, "
        f"drift {result['rates']['drift_rate']}).",
        "",
        f"RockBot's settings: `{json.dumps(result['agentSettings'])}`. Pause marker written: "
        f"{result['pauseMarkerWrittenAt'] or 'never'}.",
        "",
        "| quarter | audits | alerts | warnings | purged (audit) | hard-deleted outside purge | cycles paused | "
        "RockBot purge deleted (of them kept by dreamkeeper) | dreamkeeper purged / held | specifics left the store |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for number, q in enumerate([*result["quarters"], result["total"]], start=1):
        label = f"Q{number}" if number <= 4 else "year"
        lines.append(
            f"| {label} | {q['audits']} | {q['alerts']} | {q['warnings']} | {q['purged']} | "
            f"{q['hard_deleted_outside_purge']} | {q['paused_cycles']} | {q['rockbot_deleted']} "
            f"({q['rockbot_deleted_kept']}) | {q['dk_purged']} / {q['dk_held']} | {q['specifics_left_store']} |"
        )
    lines += [
        "",
        "Invariants that failed, over the year (audit runs): "
        + (", ".join(f"`{k}` {v}" for k, v in sorted(result["total"]["invariants"].items())) or "none"),
    ]
    return "\n".join(lines) + "\n"


def combined(before: dict[str, Any], after: dict[str, Any]) -> str:
    """Both runs' quarters in one table: what the issue asks to see, before and after."""
    lines = [
        "# A year beside RockBot's audit: before and after issue 24",
        "",
        "Twice-daily dreamkeeper cycles for a year beside a RockBot whose dream is switched off as documented, its "
        "archive purge and memory audit (ported from its source: tests/parity/rockbot_audit.py) run after every "
        "cycle and at the audit's own 04:00, `MemoryAudit__PauseConsolidationOnAlert=true`. Details per run: "
        "[before](audit-year-before.md), [after](audit-year-after.md).",
        "",
        f"* before: `{before['command']}` with the engine at fa2ec85 first on `PYTHONPATH` "
        f"(`{before['engine']}`), RockBot's settings as docs/rockbot.md said then: "
        f"`{json.dumps(before['agentSettings'])}`; pause marker written: {before['pauseMarkerWrittenAt'] or 'never'}",
        f"* after: `{after['command']}` (engine `{after['engine']}`), the settings docs/rockbot.md gives now: "
        f"`{json.dumps(after['agentSettings'])}`; pause marker written: {after['pauseMarkerWrittenAt'] or 'never'}",
        "",
        "| quarter | alerts (before / after) | purged | hard-deleted outside purge | cycles paused | RockBot's purge "
        "deleted a record dreamkeeper keeps | specifics left the store |",
        "|---|---|---|---|---|---|---|",
    ]
    labels = ["Q1", "Q2", "Q3", "Q4", "year"]
    for label, b, a in zip(
        labels, [*before["quarters"], before["total"]], [*after["quarters"], after["total"]], strict=True
    ):
        lines.append(
            f"| {label} | {b['alerts']} / {a['alerts']} | {b['purged']} / {a['purged']} | "
            f"{b['hard_deleted_outside_purge']} / {a['hard_deleted_outside_purge']} | "
            f"{b['paused_cycles']} / {a['paused_cycles']} | "
            f"{b['rockbot_deleted_kept']} / {a['rockbot_deleted_kept']} | "
            f"{b['specifics_left_store']} / {a['specifics_left_store']} |"
        )
    for name, result in (("before", before), ("after", after)):
        failed = ", ".join(f"`{k}` {v}" for k, v in sorted(result["total"]["invariants"].items())) or "none"
        lines.append(f"\nInvariants that failed over the year, {name} (audit runs): {failed}.")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str]) -> int:
    if list(argv[:1]) == ["--combine"]:
        out = Path(argv[1]) if len(argv) > 1 else RESULTS
        runs = [json.loads((out / f"audit-year-{k}.json").read_text(encoding="utf-8")) for k in ("before", "after")]
        (out / "audit-year.md").write_text(combined(*runs), encoding="utf-8")
        print(f"wrote {out / 'audit-year.md'}")
        return 0
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    engine_log = logging.getLogger("dreamkeeper")
    previous = engine_log.level
    engine_log.setLevel(logging.ERROR)
    try:
        config = parse(argv)
        result = run(config)
    finally:
        engine_log.setLevel(previous)
    config.out.mkdir(parents=True, exist_ok=True)
    (config.out / f"{config.name}.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    (config.out / f"{config.name}.md").write_text(markdown(result), encoding="utf-8")
    total = result["total"]
    print(
        f"{config.name}: {total['alerts']} alert run(s), purged {total['purged']}, hard-deleted outside purge "
        f"{total['hard_deleted_outside_purge']}, paused cycles {total['paused_cycles']}, RockBot deleted "
        f"{total['rockbot_deleted_kept']} entr(ies) dreamkeeper keeps, specifics left the store "
        f"{total['specifics_left_store']}"
    )
    return 0
