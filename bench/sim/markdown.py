"""The year simulation's Markdown report."""

from __future__ import annotations

from typing import Any


def _pct(value: float) -> str:
    return f"{value:.2%}" if value < 0.9999 or value == 1 else f"{value:.4%}"


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])) or "none"


def year_sim_markdown(result: dict[str, Any], png: str | None) -> str:
    config, arms, goals = result["config"], result["arms"], result["goals"]
    nv, dk = arms["naive"], arms["dreamkeeper"]
    rates = config["rates"]
    fmt = config.get("format", "rockbot")
    lines = [
        f"# Year simulation: {config['cycles']} adversarial cycles"
        + (f", the dreamkeeper arm in {fmt}'s Markdown format" if fmt != "rockbot" else ""),
        "",
        f"Command: `{result['command']}` (seed {config['seed']}; {result['seconds']['total']} s wall, of which "
        f"dreamkeeper cycles {result['seconds']['dreamkeeper']} s, naive {result['seconds']['naive']} s, "
        f"measurement {result['seconds']['measure']} s; {result['seconds'].get('cpu', '?')} CPU seconds: the "
        f"machine is shared, wall time includes waiting for a core). Generated {result['generatedAt']}.",
        "",
        f"Adversary: harm rate {rates['harm_rate']} per offered entry per cycle, drift {rates['drift_rate']} "
        f"(lossy {rates['drift_loss']}), good merges {rates['merge_rate']} per offered family, status-note prunes "
        f"{rates['ephemeral_prune']}. Corpus: {result['entriesMined']} entries mined (non-status, with specifics), "
        f"{result['specificsMined']} distinct specifics, {result['protectedSpecifics']} of them protected "
        "(carried by an entry above the high-value floor or in a protected category when mined).",
        "",
    ]
    if png:
        lines += [f"![survival curves]({png})", ""]
    lines += [
        "## End of run",
        "",
        "| | naive (seed's original) | dreamkeeper |",
        "|---|---|---|",
        f"| specifics surviving in the live corpus | {_pct(nv['specificsSurvivingFraction'])} | "
        f"{_pct(dk['specificsSurvivingFraction'])} |",
        f"| protected specifics surviving | {_pct(nv['protectedSurvivingFraction'])} | "
        f"{_pct(dk['protectedSurvivingFraction'])} |",
        f"| specifics missing at end, excluding allowed prunes | {nv['missingAtEndExcludingAllowedPrunes']} | "
        f"{dk['missingAtEndExcludingAllowedPrunes']} |",
        f"| protected specifics missing at end | {nv['protectedMissingAtEnd']} | {dk['protectedMissingAtEnd']} |",
        f"| live entries | {nv['liveAtEnd']} | {dk['liveAtEnd']} (+{dk['archivedAtEnd']} archived) |",
        f"| entry per-cycle survival (content still said somewhere) | {nv['entryPerCycleSurvival']:.5f} | "
        f"{dk['entryPerCycleSurvival']:.5f} |",
        f"| implied one-year survival (per-cycle ^ 730) | {_pct(nv['entryImpliedOneYearSurvival'])} | "
        f"{_pct(dk['entryImpliedOneYearSurvival'])} |",
        f"| day-0 cohort whose content survives at the end ({nv['cohortSize']} entries) | "
        f"{_pct(nv['cohortAliveAtEnd'])} | {_pct(dk['cohortAliveAtEnd'])} |",
        f"| destructive acts proposed to the arm | {nv['destructiveProposed']} | {dk['destructiveProposed']} |",
        "",
        "Disappearances of specifics from the live corpus over the run, by cause (a specific can disappear, be "
        "restated by mining, and disappear again):",
        "",
        f"- naive: {_counts(nv['disappearances'])}",
        f"- dreamkeeper: {_counts(dk['disappearances'])}",
        f"- protected, naive: {_counts(nv['protectedDisappearances'])}",
        f"- protected, dreamkeeper: {_counts(dk['protectedDisappearances'])}",
        "",
        "## The seed's table, and the naive arm measured against it",
        "",
        "| per-entry, per-cycle survival | survives one year (730 cycles) | source |",
        "|---|---|---|",
    ]
    for row in result["seedTable"]:
        if row.get("measured"):
            lines.append(
                f"| {row['perCycle']:.5f} | {_pct(row['computed'])} implied; {_pct(row['cohortOneYear'])} of the "
                f"day-0 cohort measured after {config['cycles']} cycles | naive arm, this run |"
            )
        else:
            lines.append(f"| {row['perCycle']:.2%} | {row['oneYear']:.0%} (computed {row['computed']:.0%}) | seed |")
    for row in result.get("naiveSweep", []):
        lines.append(
            f"| {row['perCycleSurvival']:.5f} | {_pct(row['impliedOneYear'])} implied; "
            f"{_pct(row['cohortAliveAtEnd'])} of the day-0 cohort measured | naive arm alone, harm rate "
            f"{row['harmRate']}, drift {row['driftRate']:.4g} |"
        )
    totals = dk["cycleReportTotals"]
    lines += [
        "",
        "## What dreamkeeper's safeguards did (sums of the cycle reports)",
        "",
        "| " + " | ".join(totals) + " |",
        "|" + "---|" * len(totals),
        "| " + " | ".join(str(v) for v in totals.values()) + " |",
        "",
        "## What each arm was asked to do (adversary acts, counted when proposed)",
        "",
        f"- naive: {_counts(nv['proposed'])}",
        f"- dreamkeeper: {_counts(dk['proposed'])}",
        "",
        "Examples of specifics that went missing, by cause:",
        "",
    ]
    for arm_name, arm in (("naive", nv), ("dreamkeeper", dk)):
        for cause, examples in arm["examples"].items():
            lines.append(f"- {arm_name}, {cause}: {', '.join(examples)}")
    if fmt != "rockbot":
        lines += [
            "",
            f"## The {fmt} arm",
            "",
            f"- units merged (archived with a successor): {totals.get('archivedWithReplacement', 0)}; archived in all: "
            f"{totals.get('archived', 0)}; successors written into the agent's files: {totals.get('saved', 0)}",
            f"- facts the agent itself could not write (its caps refused them; they reached neither arm): "
            f"{dk.get('factsTheAgentCouldNotWrite', 0)}",
        ]
    store = dk.get("store")
    if store is not None:
        lines += [
            "",
            "## The store, archive included: the purge and last records",
            "",
            f"- ephemeral prunes allowed: {totals.get('ephemeral', 0)}; purged after retention: "
            f"{totals.get('purged', 0)}; kept past retention as last records: "
            f"{totals.get('purgeKeptLastRecord', 0)} (entry-cycles: an entry kept is counted each cycle it is due)",
            f"- specifics that left the store for good: **{store['specificsLeftTheStore']}** (goal 0)"
            + (f" — {_counts(store['leftTheStoreByCause'])}" if store["leftTheStoreByCause"] else ""),
            f"- specifics at the end said only by archived entries (what RockBot's purge would delete once they "
            f"are 90 days archived): {store['specificsOnlyInTheArchiveAtEnd']}",
        ]
    lines += _chaos_lines(result)
    lines += [
        "",
        "## Goals",
        "",
        f"- dreamkeeper protected specifics lost: **{goals['dreamkeeperProtectedLost']}** (goal 0)",
        f"- dreamkeeper specifics lost other than by an allowed ephemeral prune: "
        f"**{goals['dreamkeeperLostOutsideAllowedPrunes']}** (goal 0)",
        f"- naive specifics lost: {goals['naiveLost']} (expected > 0)",
        f"- dreamkeeper specifics that left the store (archive included) for good: "
        f"**{goals.get('dreamkeeperSpecificsLeftTheStore', 0)}** (goal 0)",
        f"- dreamkeeper hard deletes (files or units gone without a purge): "
        f"**{goals.get('dreamkeeperHardDeletes', 0)}** (goal 0)",
        *(
            [
                f"- chaos: specifics lost by any command (census): **{goals['chaosSpecificsLost']}** (goal 0); "
                f"entries orphaned: **{goals['chaosOrphaned']}** (goal 0); reports disagreeing with the census: "
                f"**{goals['chaosReportCensusMismatches']}** (goal 0)"
            ]
            if "chaosSpecificsLost" in goals
            else []
        ),
        f"- all met: **{goals['met']}**",
        "",
    ]
    return "\n".join(lines)


def _chaos_lines(result: dict[str, Any]) -> list[str]:
    chaos = result.get("chaos")
    if not chaos:
        return []
    rates = ", ".join(f"{k} {v}" for k, v in chaos["rates"].items())
    return [
        "",
        "## Chaos: undos, SIGKILLs and clock jumps (issue 22)",
        "",
        f"Rates: {rates}. Every command, the killed ones included, was followed by the simulation's own census of the "
        "store (bench/sim/census.py: specifics of the live corpus before it that no live entry says after it, "
        "documented ephemeral prunes apart; entries live before it whose merged-into chain ends in no live entry).",
        "",
        f"- events: {_counts(chaos['events'])}",
        f"- commands censused: {_counts(chaos['commandsCensused'])}",
        f"- specifics lost (census): **{chaos['independentSpecificsLost']}**; entries orphaned (census): "
        f"**{chaos['independentOrphaned']}**",
        f"- reported by the commands: specificsLost {chaos['reportedSpecificsLost']}, orphaned "
        f"{chaos['reportedOrphaned']}; reports disagreeing with the census: **{chaos['reportCensusMismatches']}**",
        f"- losses the end-of-run invariant brought back: {chaos['lossesReversed']}; purge/decay refusals for a "
        f"disagreeing clock: {chaos['clockRefusals']}",
    ]
