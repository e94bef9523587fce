"""A year of adversarial dreams: the same adversary against the seed's naive applier and against dreamkeeper.

    python -m bench year-sim [--quick] [--cycles 730] [--seed N] [--harm-rate P] [--retention-days D] [--name NAME]
                             [--out DIR] [--format rockbot|openclaw|hermes|claude] [--chaos]

Twice-daily cycles for a year on a growing corpus (bench/sim/world.py). Before each cycle the agent mines a few
new facts and restatements; both arms receive exactly the same entries. Then each arm runs one consolidation
cycle against the same seeded adversary (bench/sim/adversary.py explains how its stream is kept the same) and is
measured by the same ledger (bench/sim/ledger.py). Results: ``<out>/<name>.json`` (summary and every cycle),
``<name>.md`` and ``<name>-survival.png``.

``--format openclaw|hermes|claude``: the dreamkeeper arm keeps its memory as that agent does
(bench/sim/format_arm.py) and cycles run through the format seam. A fact the agent could not write (Hermes' caps)
reaches neither arm nor the ledger: both arms are measured on what the agent actually stored.

``--chaos`` (issue 22) adds random undos, SIGKILLs of undo, restore and cycle, and clock jumps to the dreamkeeper arm
(bench/sim/chaos.py), each command followed by the simulation's own census (bench/sim/census.py): the goals then
also require 0 specifics lost, 0 entries orphaned, and every reported ``specificsLost``/``orphaned`` equal to the
census.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import shlex
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.sim.adversary import DESTRUCTIVE, Adversary, Rates, Tally
from bench.sim.chaos import Chaos, ChaosRates
from bench.sim.dreamkeeper_arm import DreamkeeperArm
from bench.sim.format_arm import FormatArm
from bench.sim.ledger import ArmMeasure, Ledger, is_protected
from bench.sim.naive import NaiveCorpus, NaiveOutcome
from bench.sim.world import EPHEMERAL_CATEGORY, World
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.coverage import Specific
from dreamkeeper.coverage.inventory import Inventory

RESULTS = Path(__file__).resolve().parent / "results"
START = datetime(2026, 1, 1, 0, 0, tzinfo=UTC)
STEP = timedelta(hours=12)
CYCLES_PER_YEAR = 730
SEED_TABLE = ((0.9999, 0.93), (0.999, 0.48), (0.995, 0.03))  # the seed's per-cycle → one-year survival table

# Why a specific went missing. Prunes the dreamkeeper policy allows (below the floor, unprotected category) are
# counted apart from everything else; for the naive arm the same split says what dreamkeeper would have allowed.
EPHEMERAL_STATUS = "allowed prune: status note"
EPHEMERAL_FACT = "allowed prune: below-floor fact"
UNEXPLAINED = "lost (no allowed cause)"
PURGED = "purged: its last record was hard-deleted"
ALLOWED = {EPHEMERAL_STATUS, EPHEMERAL_FACT}
# Misjudgement rates for the naive-only sweep: each is both the harm rate and the lossy-drift rate (drift rate ten
# times it, a tenth of drifts lossy). Chosen so the measured per-cycle survival lands near the seed's three rows.
SWEEP_RATES = (0.00017, 0.0017, 0.0087)


def is_allowed(cause: str) -> bool:
    """A disappearance through a prune dreamkeeper's policy allows (alone or jointly with another)."""
    return cause.split(" (jointly")[0] in ALLOWED


log = logging.getLogger(__name__)


@dataclass
class SimConfig:
    cycles: int = CYCLES_PER_YEAR
    seed: int = 1
    people: int = 500
    initial_families: int = 110
    rates: Rates = field(default_factory=Rates)
    name: str = "year-sim"
    out: Path = RESULTS
    workdir: Path | None = None
    keep: bool = False
    plot: bool = True
    sweep: bool = True
    progress_every: int = 50
    format: str = "rockbot"
    format_profile: str | None = None
    retention_days: int = 90
    subsume: bool = True  # the product's default; False sends every cluster to the (hostile) model
    offer_shape: str = "clusters"  # the product's default; "batches" is RockBot's 40-entry layout
    chaos: ChaosRates | None = None
    argv: tuple[str, ...] = ()


def _settings(retention_days: int = 90, subsume: bool = True, offer_shape: str = "clusters") -> CycleSettings:
    # Twice daily with RockBot's 6 h minimum interval; 90-day retention, so purge runs for real from day 90.
    return CycleSettings.model_validate(
        {"min_interval_hours": 6, "retention_days": retention_days, "subsume": subsume, "offer_shape": offer_shape}
    )


def _workdir(config: SimConfig) -> Path:
    base = config.workdir or (Path("/dev/shm") if os.access("/dev/shm", os.W_OK) else None)
    return Path(tempfile.mkdtemp(prefix="dk-year-sim-", dir=base))


Explain = Callable[[Specific], str]


def _first_cover(candidates: Sequence[tuple[str, str]], fallback: str) -> Explain:
    """Blame a disappearance on the first removed text (in blame order) that said the specific.

    Coverage is by token, case-folded: a specific can be kept alive by a text that does not count it as one of its
    own specifics (a lowercase "registration" keeps "Registration"), so blame is by coverage, not by extraction.
    """
    inventories = [(cause, Inventory.of(text)) for cause, text in candidates]
    together = Inventory()
    for _, text in candidates:
        together.add(text)

    def explain(specific: Specific) -> str:
        for cause, inventory in inventories:
            if inventory.covers(specific):
                return cause
        if candidates and together.covers(specific):
            # Said only jointly (a month name credited by dates in two texts): blame the worst of them.
            return candidates[0][0] + " (jointly with others)"
        return fallback

    return explain


def _naive_explain(ledger: Ledger, outcome: NaiveOutcome) -> Explain:
    """The most blameworthy act wins: a protected prune, then a merge, then a prune dreamkeeper would allow."""
    ranked: list[tuple[int, str, str]] = []
    for entry in outcome.removed:
        mode = outcome.modes.get(entry.id, "prune")
        if mode == "ephemeral-prune" or (mode == "prune" and entry.category == EPHEMERAL_CATEGORY):
            ranked.append((3, EPHEMERAL_STATUS, entry.content))
        elif mode == "prune":
            if is_protected(ledger.settings, entry.importance, entry.reinforcement, entry.category):
                ranked.append((0, "prune: protected entry", entry.content))
            else:
                ranked.append((2, EPHEMERAL_FACT, entry.content))
        else:
            ranked.append((1, f"merge: {mode}", entry.content))
    ranked.sort(key=lambda r: r[0])
    return _first_cover([(cause, text) for _, cause, text in ranked], UNEXPLAINED)


def _dk_explain(ephemeral: Sequence[tuple[str, str | None]]) -> Explain:
    """Only an ephemeral prune the policy allowed may take a specific out of dreamkeeper's live corpus."""
    candidates = [
        (EPHEMERAL_STATUS if category == EPHEMERAL_CATEGORY else EPHEMERAL_FACT, content)
        for content, category in ephemeral
    ]
    return _first_cover(candidates, UNEXPLAINED)


def _fractions(measure: ArmMeasure, ledger: Ledger) -> tuple[float, float]:
    known = measure.known
    protected = ledger.protected & known
    total = len(known) or 1
    return len(measure.covered) / total, len(measure.covered & protected) / (len(protected) or 1)


def run(config: SimConfig) -> dict[str, Any]:
    settings = _settings(config.retention_days, config.subsume, config.offer_shape)
    world = World(config.seed, config.people)
    ledger = Ledger(settings)
    adversary = Adversary(config.seed, config.rates)
    tallies = {"naive": Tally(), "dreamkeeper": Tally()}
    naive = NaiveCorpus()
    workdir = _workdir(config)
    dk: DreamkeeperArm | FormatArm = (
        DreamkeeperArm(workdir / "agent", settings, adversary, tallies["dreamkeeper"])
        if config.format == "rockbot"
        else FormatArm(
            workdir / "agent", settings, adversary, tallies["dreamkeeper"], config.format, config.format_profile
        )
    )
    chaos = (
        Chaos(dk, config.seed, config.chaos) if config.chaos is not None and isinstance(dk, DreamkeeperArm) else None
    )
    measures = {"naive": ArmMeasure("naive", ledger), "dreamkeeper": ArmMeasure("dreamkeeper", ledger)}
    # dreamkeeper's whole store, archive included: a specific that leaves it has left for good (the purge deleted its
    # last record). The live-corpus measure above allows ephemeral prunes; this one allows nothing.
    store_measure = ArmMeasure("dreamkeeper-store", ledger)
    report_totals: Counter[str] = Counter()
    timings = {"naive": 0.0, "dreamkeeper": 0.0, "measure": 0.0, "mining": 0.0}
    rows: list[dict[str, Any]] = []
    started, cpu_started = time.perf_counter(), _cpu_seconds()
    try:
        initial = [m for m in world.initial(config.initial_families, START) if dk.add(m)]
        for mined in initial:
            ledger.record(mined, 0)
            naive.add(mined)
        cohort = [m.id for m in initial if m.id in ledger.entry_keys]
        live0 = {m.id: m.content for m in initial}
        for measure in (*measures.values(), store_measure):
            measure.sync(live0)
            measure.measure(-1, set(ledger.mined), lambda _: UNEXPLAINED)
        for cycle in range(config.cycles):
            now = START + STEP * (cycle + 1)
            t0 = time.perf_counter()
            mined_now = [m for m in world.mine(now) if dk.add(m)]  # what the agent could write (Hermes' caps)
            for mined in mined_now:
                ledger.record(mined, cycle)
                naive.add(mined)
                for measure in (*measures.values(), store_measure):
                    measure.covered |= ledger.keys_of(mined.content, mined.category)
            known = set(ledger.mined)
            t1 = time.perf_counter()
            outcome = naive.cycle(adversary, cycle, tallies["naive"])
            t2 = time.perf_counter()
            arm = chaos.cycle(cycle, now) if chaos is not None else dk.cycle(cycle, now)
            t3 = time.perf_counter()
            measures["naive"].sync({e.id: e.content for e in naive.live.values()})
            measures["naive"].measure(cycle, known, _naive_explain(ledger, outcome))
            measures["dreamkeeper"].sync(arm.live)
            measures["dreamkeeper"].measure(cycle, known, _dk_explain(arm.ephemeral_texts))
            store_measure.sync(arm.stored)
            store_measure.measure(cycle, known, _first_cover([(PURGED, c) for c, _ in arm.purged], UNEXPLAINED))
            t4 = time.perf_counter()
            timings["mining"] += t1 - t0
            timings["naive"] += t2 - t1
            timings["dreamkeeper"] += t3 - t2
            timings["measure"] += t4 - t3
            report = arm.outcome.report
            for name in _REPORT_FIELDS:
                report_totals[name] += int(getattr(report, name))
            rows.append(_row(cycle, now, len(mined_now), ledger, measures, naive, outcome, arm, cohort, t3 - t2))
            if config.progress_every and (cycle + 1) % config.progress_every == 0:
                print(_progress(rows[-1], time.perf_counter() - started), file=sys.stderr, flush=True)
    finally:
        if not config.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    timings["cpu"] = _cpu_seconds() - cpu_started
    elapsed = time.perf_counter() - started
    result = _summary(config, ledger, measures, tallies, report_totals, timings, rows, cohort, elapsed, workdir)
    result["arms"]["dreamkeeper"]["store"] = _store_summary(store_measure, measures["dreamkeeper"])
    result["goals"]["dreamkeeperSpecificsLeftTheStore"] = sum(store_measure.ever_lost.values())
    result["goals"]["dreamkeeperHardDeletes"] = report_totals["hard_deletes"]
    result["goals"]["met"] = (
        result["goals"]["met"]
        and result["goals"]["dreamkeeperSpecificsLeftTheStore"] == 0
        and result["goals"]["dreamkeeperHardDeletes"] == 0
    )
    result["config"]["format"] = config.format
    result["config"]["formatProfile"] = config.format_profile
    if isinstance(dk, FormatArm):
        result["arms"]["dreamkeeper"]["factsTheAgentCouldNotWrite"] = dk.refused
    if chaos is not None:
        summary = chaos.tally.summary()
        result["chaos"] = {"rates": asdict(chaos.rates), **summary}
        goals = result["goals"]
        goals["chaosSpecificsLost"] = summary["independentSpecificsLost"]
        goals["chaosOrphaned"] = summary["independentOrphaned"]
        goals["chaosReportCensusMismatches"] = summary["reportCensusMismatches"]
        goals["met"] = goals["met"] and not (
            goals["chaosSpecificsLost"] or goals["chaosOrphaned"] or goals["chaosReportCensusMismatches"]
        )
    if config.sweep:
        result["naiveSweep"] = [naive_only(config, rate) for rate in SWEEP_RATES]
    return result


def _store_summary(store: ArmMeasure, live: ArmMeasure) -> dict[str, Any]:
    """What left dreamkeeper's store for good (target 0), and what only its archive still holds: the specifics the
    last-record rule keeps from the purge (RockBot's purge deletes them once archived 90 days)."""
    return {
        "specificsLeftTheStore": sum(store.ever_lost.values()),
        "leftTheStoreByCause": dict(store.ever_lost),
        "examples": store.lost_examples,
        "specificsOnlyInTheArchiveAtEnd": len(store.covered - live.covered),
        "specificsMissingFromTheStoreAtEnd": len(store.known - store.covered),
    }


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def naive_only(config: SimConfig, rate: float) -> dict[str, Any]:
    """The naive arm alone (it is cheap) at another harm rate: the seed's table, measured rather than computed."""
    settings = _settings(config.retention_days, config.subsume, config.offer_shape)
    world = World(config.seed, config.people)
    ledger = Ledger(settings)
    rates = Rates(**{**asdict(config.rates), "harm_rate": rate, "drift_rate": 10 * rate})
    adversary = Adversary(config.seed, rates)
    naive, tally, measure = NaiveCorpus(), Tally(), ArmMeasure("naive", ledger)
    initial = world.initial(config.initial_families, START)
    for mined in initial:
        ledger.record(mined, 0)
        naive.add(mined)
    cohort = [m.id for m in initial if m.id in ledger.entry_keys]
    measure.sync({m.id: m.content for m in initial})
    measure.measure(-1, set(ledger.mined), lambda _: UNEXPLAINED)
    alive: list[float] = []
    for cycle in range(config.cycles):
        for mined in world.mine(START + STEP * (cycle + 1)):
            ledger.record(mined, cycle)
            naive.add(mined)
            measure.covered |= ledger.keys_of(mined.content, mined.category)
        outcome = naive.cycle(adversary, cycle, tally)
        measure.sync({e.id: e.content for e in naive.live.values()})
        measure.measure(cycle, set(ledger.mined), _naive_explain(ledger, outcome))
        alive.append(round(measure.cohort_alive(cohort), 6))
    survival = measure.per_cycle_survival
    return {
        "harmRate": rate,
        "driftRate": 10 * rate,
        "perCycleSurvival": survival,
        "impliedOneYear": survival**CYCLES_PER_YEAR,
        "cohortAliveAtEnd": measure.cohort_alive(cohort),
        "specificsSurvivingFraction": len(measure.covered) / (len(measure.known) or 1),
        "cohortAlive": alive,
    }


_REPORT_FIELDS = (
    "reviewed",
    "withheld",
    "folded",
    "saved",
    "archived",
    "archived_with_replacement",
    "ephemeral",
    "rejected",
    "repaired",
    "protected",
    "merge_only_ignored",
    "census_refusals",
    "prunes_refused",
    "invented",
    "invented_replies",
    "ephemeral_specifics",
    "conflicts",
    "hard_deletes",
    "decayed",
    "decay_left_floor",
    "merged_into_existing",
    "subsumed",
    "refused_restating",
    "refused_layout",
    "refused_notation",
    "purged",
    "purge_kept_last_record",
    "specifics_lost",
    "invalid_replies",
    "llm_calls",
    "units_ingested",
    "units_kept_for_agent",
    "units_written",
    "units_taken_out",
    "units_refused",
    "stale_units",
)


def _row(
    cycle: int,
    now: datetime,
    mined: int,
    ledger: Ledger,
    measures: Mapping[str, ArmMeasure],
    naive: NaiveCorpus,
    outcome: NaiveOutcome,
    arm: Any,
    cohort: list[str],
    dk_seconds: float,
) -> dict[str, Any]:
    report = arm.outcome.report
    n_frac, n_prot = _fractions(measures["naive"], ledger)
    d_frac, d_prot = _fractions(measures["dreamkeeper"], ledger)
    return {
        "cycle": cycle,
        "day": (now - START).total_seconds() / 86400,
        "mined": mined,
        "specifics": len(measures["naive"].known),
        "protectedSpecifics": len(ledger.protected & measures["naive"].known),
        "naive": {
            "live": len(naive.live),
            "surviving": round(n_frac, 6),
            "protectedSurviving": round(n_prot, 6),
            "cohortAlive": round(measures["naive"].cohort_alive(cohort), 6),
            "deleted": outcome.deleted,
            "saved": outcome.saved,
        },
        "dreamkeeper": {
            "live": report.live_entries,
            "archivedEntries": report.archived_entries,
            "surviving": round(d_frac, 6),
            "protectedSurviving": round(d_prot, 6),
            "cohortAlive": round(measures["dreamkeeper"].cohort_alive(cohort), 6),
            "result": report.result,
            "seconds": round(dk_seconds, 4),
            **{_camel(name): int(getattr(report, name)) for name in _REPORT_FIELDS},
        },
    }


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.capitalize() for p in rest)


def _progress(row: dict[str, Any], elapsed: float) -> str:
    n, d = row["naive"], row["dreamkeeper"]
    return (
        f"cycle {row['cycle'] + 1}: {elapsed:.0f}s — specifics surviving naive {n['surviving']:.1%} "
        f"dreamkeeper {d['surviving']:.1%} (protected {n['protectedSurviving']:.1%} / {d['protectedSurviving']:.1%}); "
        f"live naive {n['live']} dreamkeeper {d['live']} (+{d['archivedEntries']} archived)"
    )


def _arm_summary(measure: ArmMeasure, ledger: Ledger, tally: Tally, cohort: list[str]) -> dict[str, Any]:
    frac, prot = _fractions(measure, ledger)
    uncovered = measure.uncovered_by_cause()
    survival = measure.per_cycle_survival
    return {
        "specificsSurviving": len(measure.covered),
        "specificsSurvivingFraction": round(frac, 6),
        "protectedSurvivingFraction": round(prot, 6),
        "missingAtEnd": dict(uncovered),
        "missingAtEndExcludingAllowedPrunes": sum(v for k, v in uncovered.items() if not is_allowed(k)),
        "protectedMissingAtEnd": sum(measure.uncovered_by_cause(protected_only=True).values()),
        "disappearances": dict(measure.ever_lost),
        "protectedDisappearances": dict(measure.ever_lost_protected),
        "examples": measure.lost_examples,
        "entryPerCycleSurvival": survival,
        "entryImpliedOneYearSurvival": survival**CYCLES_PER_YEAR,
        "entryLossEvents": measure.losses_total,
        "entryCyclesAtRisk": measure.at_risk_total,
        "cohortSize": len(cohort),
        "cohortAliveAtEnd": measure.cohort_alive(cohort),
        "proposed": dict(sorted(tally.counts.items())),
        "destructiveProposed": sum(v for k, v in tally.counts.items() if k in DESTRUCTIVE),
    }


def _summary(
    config: SimConfig,
    ledger: Ledger,
    measures: Mapping[str, ArmMeasure],
    tallies: Mapping[str, Tally],
    report_totals: Counter[str],
    timings: dict[str, float],
    rows: list[dict[str, Any]],
    cohort: list[str],
    elapsed: float,
    workdir: Path,
) -> dict[str, Any]:
    arms = {name: _arm_summary(measures[name], ledger, tallies[name], cohort) for name in measures}
    arms["dreamkeeper"]["cycleReportTotals"] = {_camel(k): v for k, v in report_totals.items()}
    arms["dreamkeeper"]["liveAtEnd"] = rows[-1]["dreamkeeper"]["live"] if rows else 0
    arms["dreamkeeper"]["archivedAtEnd"] = rows[-1]["dreamkeeper"]["archivedEntries"] if rows else 0
    arms["naive"]["liveAtEnd"] = rows[-1]["naive"]["live"] if rows else 0
    dk = arms["dreamkeeper"]
    goals = {
        "dreamkeeperProtectedLost": sum(dk["protectedDisappearances"].values()),
        "dreamkeeperLostOutsideAllowedPrunes": sum(v for k, v in dk["disappearances"].items() if k not in ALLOWED),
        "naiveLost": sum(arms["naive"]["disappearances"].values()),
    }
    goals["met"] = (
        goals["dreamkeeperProtectedLost"] == 0
        and goals["dreamkeeperLostOutsideAllowedPrunes"] == 0
        and goals["naiveLost"] > 0
    )
    naive_s = arms["naive"]["entryPerCycleSurvival"]
    return {
        "command": config_command(config),
        "generatedAt": datetime.now(UTC).isoformat(timespec="seconds"),
        "config": {
            "cycles": config.cycles,
            "seed": config.seed,
            "people": config.people,
            "initialFamilies": config.initial_families,
            "rates": asdict(config.rates),
            "settings": _settings(config.retention_days, config.subsume, config.offer_shape).model_dump(mode="json"),
            "workdir": str(workdir),
        },
        "seconds": {"total": round(elapsed, 1), **{k: round(v, 1) for k, v in timings.items()}},
        "entriesMined": len(ledger.entry_cycle) + 0,
        "specificsMined": len(ledger.mined),
        "protectedSpecifics": len(ledger.protected & ledger.mined),
        "arms": arms,
        "seedTable": [{"perCycle": s, "oneYear": y, "computed": round(s**CYCLES_PER_YEAR, 4)} for s, y in SEED_TABLE]
        + [
            {
                "perCycle": round(naive_s, 6),
                "oneYear": None,
                "computed": round(naive_s**CYCLES_PER_YEAR, 4),
                "measured": "naive arm",
                "cohortOneYear": round(arms["naive"]["cohortAliveAtEnd"], 4),
            }
        ],
        "goals": goals,
        "cycles": rows,
    }


def config_command(config: SimConfig) -> str:
    return ("python -m bench year-sim " + shlex.join(config.argv)).strip()


# ---- CLI --------------------------------------------------------------------------------------------------


def parse(argv: Sequence[str]) -> SimConfig:
    parser = argparse.ArgumentParser(prog="python -m bench year-sim", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 cycles on a small world (for tests)")
    parser.add_argument("--cycles", type=int, default=None, help=f"cycles to run (default {CYCLES_PER_YEAR})")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--harm-rate", type=float, default=None, help="hostile acts per offered entry per cycle")
    parser.add_argument("--drift-rate", type=float, default=None, help="rewrites per offered entry per cycle")
    parser.add_argument("--name", default=None, help="result file stem (default year-sim, or year-sim-quick)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results directory")
    parser.add_argument("--workdir", type=Path, default=None, help="where the corpus lives (default /dev/shm)")
    parser.add_argument("--keep", action="store_true", help="keep the dreamkeeper arm's agent directory")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument("--no-sweep", action="store_true", help="skip the naive-only runs at other harm rates")
    parser.add_argument(
        "--retention-days", type=int, default=None, help="archive retention before purge (default 90; quick: 3)"
    )
    parser.add_argument(
        "--format",
        default="rockbot",
        choices=("rockbot", "openclaw", "hermes", "claude"),
        help="the dreamkeeper arm's format",
    )
    parser.add_argument(
        "--format-profile", default=None, help='profile overrides as JSON, e.g. \'{"caps": {"MEMORY.md": 100000}}\''
    )
    parser.add_argument(
        "--no-subsume",
        action="store_true",
        help="every cluster goes to the hostile model (subsumption settles those a member already covers unasked)",
    )
    parser.add_argument(
        "--offer-shape",
        default="clusters",
        choices=("clusters", "batches"),
        help="how entries are offered to the model (batches: RockBot's layout, every entry in front of the adversary)",
    )
    parser.add_argument(
        "--chaos",
        action="store_true",
        help="random undos, SIGKILLs of undo/restore/cycle and clock jumps, each command censused (issue 22)",
    )
    args = parser.parse_args(list(argv))
    if args.chaos and args.format != "rockbot":
        parser.error("--chaos runs on the RockBot arm only")
    rates = Rates()
    config = SimConfig(seed=args.seed, rates=rates, out=args.out, workdir=args.workdir, keep=args.keep)
    if args.quick:
        config.cycles, config.people, config.initial_families, config.progress_every = 20, 60, 40, 0
        rates.harm_rate, rates.drift_rate = 0.05, 0.05
        config.name = "year-sim-quick"
        config.retention_days = 3  # ten simulated days: the purge and its last-record rule run too
    if args.cycles is not None:
        config.cycles = args.cycles
    if args.retention_days is not None:
        config.retention_days = args.retention_days
    if args.harm_rate is not None:
        rates.harm_rate = args.harm_rate
    if args.drift_rate is not None:
        rates.drift_rate = args.drift_rate
    if args.name:
        config.name = args.name
    config.format = args.format
    config.format_profile = args.format_profile
    config.subsume = not args.no_subsume
    config.offer_shape = args.offer_shape
    if args.format != "rockbot" and not args.name:
        config.name = f"{config.name}-{args.format}"
    if args.chaos:
        config.chaos = ChaosRates()
        if args.quick:  # twenty cycles: every kind of event, several times
            config.chaos = ChaosRates(kill_cycle=0.25, undo=0.3, restore=0.3, clock_ahead=0.08, clock_back=0.08)
        if not args.name:
            config.name += "-chaos"
    config.plot = not args.no_plot
    config.sweep = not (args.no_sweep or args.quick)
    config.argv = tuple(argv)
    return config


def write_results(config: SimConfig, result: dict[str, Any]) -> list[Path]:
    from bench.plots import plot_year_sim
    from bench.sim.markdown import year_sim_markdown

    config.out.mkdir(parents=True, exist_ok=True)
    paths = [config.out / f"{config.name}.json", config.out / f"{config.name}.md"]
    paths[0].write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    png = config.out / f"{config.name}-survival.png"
    if config.plot:
        plot_year_sim(result, png)
        paths.append(png)
    paths[1].write_text(year_sim_markdown(result, png.name if config.plot else None), encoding="utf-8")
    return paths


def main(argv: Sequence[str]) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # The engine explains every refusal at INFO/WARNING; a year of them is millions of lines. Errors still show.
    engine_log = logging.getLogger("dreamkeeper")
    previous_level = engine_log.level
    engine_log.setLevel(logging.ERROR)
    try:
        config = parse(argv)
        result = run(config)
    finally:
        engine_log.setLevel(previous_level)  # main() also runs inside test processes
    for path in write_results(config, result):
        print(f"wrote {path}")
    goals = result["goals"]
    dk, nv = result["arms"]["dreamkeeper"], result["arms"]["naive"]
    print(
        f"{config.cycles} cycles in {result['seconds']['total']}s — specifics surviving: naive "
        f"{nv['specificsSurvivingFraction']:.1%}, dreamkeeper {dk['specificsSurvivingFraction']:.1%}; dreamkeeper "
        f"lost {goals['dreamkeeperProtectedLost']} protected and {goals['dreamkeeperLostOutsideAllowedPrunes']} "
        f"outside allowed prunes; naive per-cycle entry survival {nv['entryPerCycleSurvival']:.5f} → "
        f"{nv['entryImpliedOneYearSurvival']:.1%} a year"
    )
    return 0 if goals["met"] else 1
