"""PNG plots for the benchmarks (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # after use("Agg"): the backend must be chosen first

NAIVE = "#c0392b"
DREAMKEEPER = "#1f6fb2"


def plot_year_sim(result: dict[str, Any], path: Path) -> None:
    rows = result["cycles"]
    days = [r["day"] for r in rows]
    cycles = [r["cycle"] + 1 for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(17, 5.2))

    ax = axes[0]
    for arm, colour, label in (
        ("naive", NAIVE, "naive (seed's original)"),
        ("dreamkeeper", DREAMKEEPER, "dreamkeeper"),
    ):
        ax.plot(days, [100 * r[arm]["surviving"] for r in rows], color=colour, label=f"{label}: all specifics")
        ax.plot(
            days,
            [100 * r[arm]["protectedSurviving"] for r in rows],
            color=colour,
            linestyle="--",
            label=f"{label}: protected specifics",
        )
    ax.set_title("Specifics ever mined that are still in the live corpus")
    ax.set_xlabel("day")
    ax.set_ylabel("% of specifics mined so far")
    ax.set_ylim(bottom=min(0.0, ax.get_ylim()[0]), top=101)
    ax.legend(fontsize=8, loc="lower left")
    ax.grid(alpha=0.3)

    ax = axes[1]
    horizon = max(730, len(rows))
    xs = list(range(0, horizon + 1, 5))
    for per_cycle, one_year in ((0.9999, 0.93), (0.999, 0.48), (0.995, 0.03)):
        ax.plot(
            xs,
            [100 * per_cycle**x for x in xs],
            color="grey",
            linewidth=0.8,
            linestyle=":",
        )
        ax.annotate(f"seed: {per_cycle:.2%} → {one_year:.0%}", (horizon, 100 * one_year), fontsize=7, ha="right")
    naive_s = result["arms"]["naive"]["entryPerCycleSurvival"]
    ax.plot(xs, [100 * naive_s**x for x in xs], color=NAIVE, linestyle="--", linewidth=1, label=f"{naive_s:.5f}^n")
    for sweep in result.get("naiveSweep", []):
        series = sweep["cohortAlive"]
        ax.plot(
            range(1, len(series) + 1),
            [100 * v for v in series],
            color=NAIVE,
            alpha=0.35,
            linewidth=0.9,
            label=f"naive alone, rate {sweep['harmRate']}: {sweep['perCycleSurvival']:.5f}/cycle",
        )
    ax.plot(cycles, [100 * r["naive"]["cohortAlive"] for r in rows], color=NAIVE, label="naive, measured")
    ax.plot(cycles, [100 * r["dreamkeeper"]["cohortAlive"] for r in rows], color=DREAMKEEPER, label="dreamkeeper")
    ax.set_title("Day-0 entries whose content still survives")
    ax.set_xlabel("cycle (twice daily)")
    ax.set_ylabel("% of the day-0 cohort")
    ax.set_ylim(0, 101)
    ax.legend(fontsize=8, loc="lower left")
    ax.grid(alpha=0.3)

    ax = axes[2]
    series = (
        ("rejected", "merges rejected"),
        ("protected", "prunes refused (floor / category)"),
        ("censusRefusals", "census refusals (merges)"),
        ("prunesRefused", "census refusals (prunes)"),
        ("ephemeral", "ephemeral prunes allowed"),
        ("saved", "merges saved"),
    )
    for key, label in series:
        total = 0
        cumulative = []
        for r in rows:
            total += r["dreamkeeper"][key]
            cumulative.append(total)
        ax.plot(days, cumulative, label=label)
    ax.set_title("dreamkeeper safeguards, cumulative")
    ax.set_xlabel("day")
    ax.set_ylabel("count")
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(alpha=0.3)

    rates = result["config"]["rates"]
    fig.suptitle(
        f"{result['config']['cycles']} cycles, seed {result['config']['seed']}, adversary harm rate "
        f"{rates['harm_rate']} / drift {rates['drift_rate']} per offered entry per cycle",
        fontsize=10,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_scale(result: dict[str, Any], path: Path) -> None:
    runs = result["runs"]
    sizes = [r["size"] for r in runs]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    ax = axes[0]
    ax.plot(sizes, [r["cycleSeconds"] for r in runs], marker="o", label="cold-start cycle")
    if any("warmCycleSeconds" in r for r in runs):
        ax.plot(sizes, [r.get("warmCycleSeconds", float("nan")) for r in runs], marker="o", label="second cycle")
    ax.plot(sizes, [r["loadSeconds"] for r in runs], marker="s", label="load + parse every entry")
    if any("warmLoadSeconds" in r for r in runs):
        ax.plot(
            sizes,
            [r.get("warmLoadSeconds", float("nan")) for r in runs],
            marker="s",
            label="load of the stamped files (before the second cycle)",
        )
    ax.plot(sizes, [3 * r["loadSeconds"] for r in runs], linestyle=":", color="grey", label="goal: 3 × load")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("entries")
    ax.set_ylabel("seconds")
    ax.set_title("Wall time")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, which="both")
    ax = axes[1]
    ax.plot(sizes, [r["peakRssMiB"] for r in runs], marker="o", label="peak RSS (cycle)")
    ax.axhline(1024, linestyle=":", color="grey", label="goal: 1 GiB")
    ax.set_xscale("log")
    ax.set_xlabel("entries")
    ax.set_ylabel("MiB")
    ax.set_title("Peak resident memory")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
