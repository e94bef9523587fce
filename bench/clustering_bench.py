"""Clustering: near-duplicate scan time, memory and recall at 1k / 10k / 100k entries, LSH vs brute force.

    python -m bench clustering [--quick] [--sizes 1000,10000,100000] [--brute-max 10000] [--out DIR]

Corpora (deterministic, seed 1): synthetic entries of 6-24 tokens over a Zipf vocabulary of 8000 words, 5% of
them near-duplicates of an earlier entry (0-2 token edits; embeddings at cosine ~0.89-0.995 from their source),
in three flavours: ``jaccard`` (no embeddings), ``embedded`` (every entry has a 384-dim vector; 200 topics put
unrelated same-topic entries at cosine ~0.4, as sentence-embedding models do) and ``mixed`` (half embedded,
so both measures and cross-measure pairs are exercised). Plus ``realistic``: the bench/corpus.py memory
generator with 25% of entries restated in other wordings (the way an agent re-saves a fact).

Per corpus and size: ``find_clusters`` as the engine calls it (strategy auto, threshold 0.88, max cluster 8),
timed wall and CPU, with the extra peak RSS it needed (VmHWM reset through /proc/self/clear_refs); up to
``--brute-max`` entries also the exhaustive brute force in the same process, the speed ratio, and recall:
LSH edges are verified exactly, so they are a subset of brute force's and equal counts mean equal edge sets.
Goal: 100k entries in well under a minute on the 2-core runner (checked: <= 30 s wall).
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import resource
import shlex
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np

from dreamkeeper.consolidation.clustering import ClusteringStats, ClusterItem, Strategy, find_clusters
from dreamkeeper.consolidation.clustering.scan import edge_graph
from dreamkeeper.consolidation.clustering.similarity import similarity

RESULTS = Path(__file__).resolve().parent / "results"
GOAL_100K_SECONDS = 30.0
THRESHOLD = 0.88
MAX_CLUSTER = 8
DIM = 384
Flavour = Literal["jaccard", "embedded", "mixed", "realistic"]


# --------------------------------------------------------------------------------------------- corpora


Planted = list[tuple[str, str]]


def synthetic_corpus(n: int, flavour: Flavour, seed: int = 1, dim: int = DIM) -> tuple[list[ClusterItem], Planted]:
    """Entries and the (source, near-duplicate) id pairs planted among them."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocabulary: list[str] = sorted({"".join(rng.choice(letters, int(rng.integers(4, 11)))) for _ in range(9000)})[:8000]
    zipf = 1.0 / np.arange(1, len(vocabulary) + 1) ** 1.05
    lengths = rng.integers(6, 25, size=n)
    drawn = rng.choice(len(vocabulary), size=int(lengths.sum()), p=zipf / zipf.sum())
    starts = np.concatenate(([0], np.cumsum(lengths)))
    tokens: list[list[int]] = [drawn[starts[k] : starts[k + 1]].tolist() for k in range(n)]
    duplicate = rng.random(n) < 0.05
    duplicate[0] = False
    source = np.zeros(n, dtype=np.int64)
    for k in np.flatnonzero(duplicate).tolist():
        origin = int(rng.integers(0, k))
        while duplicate[origin]:
            origin = int(rng.integers(0, k))
        source[k] = origin
        copy = list(tokens[origin])
        for _ in range(int(rng.integers(0, 3))):
            if rng.random() < 0.5 and len(copy) > 4:
                copy.pop(int(rng.integers(0, len(copy))))
            else:
                copy.append(int(rng.integers(0, len(vocabulary))))
        tokens[k] = copy
    vectors: np.ndarray | None = None
    embedded = np.zeros(n, dtype=bool)
    if flavour in ("embedded", "mixed"):
        topics = rng.standard_normal((200, dim))
        topics /= np.linalg.norm(topics, axis=1, keepdims=True)
        vectors = 0.8 * topics[rng.integers(0, 200, size=n)] + rng.standard_normal((n, dim)) / np.sqrt(dim)
        noise = rng.standard_normal((n, dim))
        noise /= np.linalg.norm(noise, axis=1, keepdims=True)
        scale = rng.uniform(0.1, 0.5, size=n) * np.linalg.norm(vectors[source], axis=1)
        vectors[duplicate] = vectors[source[duplicate]] + noise[duplicate] * scale[duplicate, None]
        vectors = vectors.astype(np.float32)
        embedded = np.ones(n, dtype=bool) if flavour == "embedded" else rng.random(n) < 0.5
    items = [
        ClusterItem(
            f"e{k:07d}",
            " ".join(vocabulary[t] for t in tokens[k]),
            None,
            vectors[k] if vectors is not None and embedded[k] else None,
        )
        for k in range(n)
    ]
    return items, [(items[int(source[k])].id, items[k].id) for k in np.flatnonzero(duplicate).tolist()]


def realistic_corpus(seed: int = 7, people: int = 400) -> tuple[list[ClusterItem], Planted]:
    from bench.corpus import generate_corpus

    corpus = generate_corpus(seed, people=people)
    rng = random.Random(seed)
    items = [ClusterItem(e.id, e.content, e.category, None) for e in corpus.entries]
    planted: Planted = []
    for entry in corpus.entries:
        if rng.random() < 0.25:
            restated = " ".join(fact.render(rng) for fact in entry.facts)
            items.append(ClusterItem(f"{entry.id}-r", restated, entry.category, None))
            planted.append((entry.id, f"{entry.id}-r"))
    return items, planted


# --------------------------------------------------------------------------------------------- measuring


def _status_kib(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS (Linux >= 4.0)
    except OSError:
        return False
    return True


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_once(items: Sequence[ClusterItem], strategy: Strategy) -> dict[str, Any]:
    rss = _status_kib("VmRSS")
    can_reset = _reset_peak()
    cpu = _cpu_seconds()
    started = time.perf_counter()
    stats = ClusteringStats()
    clusters = find_clusters(items, threshold=THRESHOLD, max_cluster_size=MAX_CLUSTER, strategy=strategy, stats=stats)
    wall = time.perf_counter() - started
    cpu = _cpu_seconds() - cpu
    peak = _status_kib("VmHWM")
    extra = (peak - rss) / 1024.0 if can_reset and peak is not None and rss is not None else None
    return {
        "strategy": strategy,
        "seconds": round(wall, 3),
        "cpuSeconds": round(cpu, 3),
        "peakExtraMiB": None if extra is None else round(extra, 1),
        "clusters": len(clusters),
        "oversizeClusters": stats.oversize_clusters,
        "edges": stats.edges,
        "scans": _scans(stats),
        "clusterIds": [list(c.ids) for c in clusters],
    }


def _scans(stats: ClusteringStats) -> list[dict[str, Any]]:
    return [
        {
            "measure": scan.measure,
            "dim": scan.dim,
            "items": scan.items,
            "strategy": scan.strategy,
            "bands": None if scan.plan is None else scan.plan.bands,
            "rows": None if scan.plan is None else scan.plan.rows,
            "filterBits": None if scan.plan is None else scan.plan.filter_bits,
            "filterMaxDistance": None if scan.plan is None else scan.plan.filter_max_distance,
            "recallAtThreshold": None if scan.plan is None else round(scan.plan.recall_at(THRESHOLD), 6),
            "emittedPairs": scan.emitted_pairs,
            "candidatePairs": scan.candidate_pairs,
            "verifiedPairs": scan.verified_pairs,
            "edges": scan.edges,
        }
        for scan in stats.scans
    ]


def planted_recall(items: Sequence[ClusterItem], planted: Planted) -> dict[str, Any]:
    """Share of planted near-duplicate pairs at or above the threshold (exact) that the scan returns as edges.

    Checkable at every size, including 100k where brute force is out of reach.
    """
    by_id = {entry.id: entry for entry in items}
    due = {tuple(sorted(pair)) for pair in planted if similarity(by_id[pair[0]], by_id[pair[1]])[0] >= THRESHOLD}
    graph = edge_graph(
        items, threshold=THRESHOLD, same_top_level_category=False, strategy="auto", seed=None, stats=ClusteringStats()
    )
    found = {(p.a, p.b) for p in graph.entry_pairs()}
    missed = sorted(due - found)
    return {
        "planted": len(planted),
        "atThreshold": len(due),
        "found": len(due) - len(missed),
        "recall": 1.0 if not due else round((len(due) - len(missed)) / len(due), 6),
        "missed": [list(pair) for pair in missed[:10]],
    }


def measure(flavour: Flavour, items: Sequence[ClusterItem], planted: Planted, brute_max: int) -> dict[str, Any]:
    row: dict[str, Any] = {"corpus": flavour, "items": len(items)}
    auto = run_once(items, "auto")
    row["auto"] = auto
    row["plantedRecall"] = planted_recall(items, planted)
    if len(items) <= brute_max:
        lsh = run_once(items, "lsh")
        brute = run_once(items, "brute")
        row["lsh"] = lsh
        row["brute"] = brute
        row["speedup"] = round(brute["seconds"] / max(auto["seconds"], 1e-9), 2)
        row["lshEdgeRecall"] = 1.0 if not brute["edges"] else round(lsh["edges"] / brute["edges"], 6)
        row["sameClustersAsBrute"] = lsh["clusterIds"] == brute["clusterIds"] == auto["clusterIds"]
    for run in (row.get("auto"), row.get("lsh"), row.get("brute")):
        if run is not None:
            run.pop("clusterIds")
    print(_line(row), flush=True)
    return row


def _line(row: dict[str, Any]) -> str:
    auto = row["auto"]
    text = (
        f"{row['corpus']:<9} {row['items']:>7} entries: {auto['seconds']:7.2f}s wall {auto['cpuSeconds']:7.2f}s cpu, "
        f"+{auto['peakExtraMiB']} MiB, {auto['edges']} edges, {auto['clusters']} clusters"
    )
    planted = row["plantedRecall"]
    text += f", planted {planted['found']}/{planted['atThreshold']}"
    if "brute" in row:
        text += f" | brute {row['brute']['seconds']:.2f}s (x{row['speedup']}), edge recall {row['lshEdgeRecall']}"
    return text


# --------------------------------------------------------------------------------------------- report


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "# Near-duplicate clustering benchmark",
        "",
        f"Command: `{result['command']}`  ",
        f"Date: {result['date']}; host: {result['host']}; threshold {THRESHOLD}, max cluster {MAX_CLUSTER}.",
        "",
        "Wall and CPU seconds of `find_clusters` (strategy auto, as the engine calls it); peak = extra RSS over the",
        "corpus already in memory; planted recall = planted near-duplicate pairs at >= 0.88 (exact) returned as edges,",
        "at every size; brute force = exhaustive vectorised comparison in the same process; edge recall = LSH edges /",
        "brute-force edges (LSH edges are exactly verified, so 1.0 means the same edge set).",
        "",
        "| corpus | entries | wall s | CPU s | peak MiB | edges | clusters | planted recall | brute s | speed-up"
        " | edge recall | same clusters |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in result["runs"]:
        auto = row["auto"]
        brute = row.get("brute")
        brute_seconds = "" if brute is None else f"{brute['seconds']:.2f}"
        lines.append(
            f"| {row['corpus']} | {row['items']} | {auto['seconds']:.2f} | {auto['cpuSeconds']:.2f} "
            f"| {auto['peakExtraMiB']} | {auto['edges']} | {auto['clusters']} "
            f"| {row['plantedRecall']['found']}/{row['plantedRecall']['atThreshold']} | {brute_seconds} "
            f"| {row.get('speedup', '')} | {row.get('lshEdgeRecall', '')} | {row.get('sameClustersAsBrute', '')} |"
        )
    lines += [
        "",
        "LSH plans chosen (auto): bands x rows, cosine Hamming prefilter, per-pair recall at the threshold by formula,",
        "and the pairs each stage handled.",
        "",
        "| corpus | entries | measure | strategy | bands x rows | prefilter | recall@0.88 | emitted | distinct"
        " | verified | edges |",
        "|---|---:|---|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for row in result["runs"]:
        for scan in row["auto"]["scans"]:
            plan = "" if scan["bands"] is None else f"{scan['bands']} x {scan['rows']}"
            prefilter = f"{scan['filterMaxDistance']}/{scan['filterBits']} bits" if scan["filterBits"] else ""
            lines.append(
                f"| {row['corpus']} | {row['items']} | {scan['measure']}"
                f"{'' if not scan['dim'] else ' ' + str(scan['dim'])} | {scan['strategy']} | {plan} | {prefilter} "
                f"| {scan['recallAtThreshold'] or ''} | {scan['emittedPairs']} | {scan['candidatePairs']} "
                f"| {scan['verifiedPairs']} | {scan['edges']} |"
            )
    goal: dict[str, Any] = result["goals"]
    lines += [
        "",
        f"Goal: 100k entries in <= {GOAL_100K_SECONDS:.0f} s wall on every corpus: "
        f"{'met' if goal['met'] else 'NOT met'} ({goal['detail']}).",
        "",
    ]
    return "\n".join(lines)


def goals(runs: list[dict[str, Any]]) -> dict[str, Any]:
    big = [r for r in runs if r["items"] >= 100_000]
    if not big:
        return {"met": True, "detail": "no 100k run in this invocation"}
    worst = max(big, key=lambda r: r["auto"]["seconds"])
    met = all(r["auto"]["seconds"] <= GOAL_100K_SECONDS for r in big)
    return {"met": met, "detail": f"slowest {worst['corpus']} {worst['auto']['seconds']:.1f} s"}


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench clustering", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="comma-separated corpus sizes")
    parser.add_argument("--brute-max", type=int, default=10_000, help="largest size also run by brute force")
    parser.add_argument("--corpora", default="jaccard,embedded,mixed,realistic", help="comma-separated flavours")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (pipeline check, not a measurement)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="directory for clustering.json and .md")
    args = parser.parse_args(list(argv))
    sizes = [600] if args.quick else [int(s) for s in args.sizes.split(",") if s]
    flavours: list[Flavour] = [f for f in ("jaccard", "embedded", "mixed", "realistic") if f in args.corpora]
    runs: list[dict[str, Any]] = []
    for flavour in flavours:
        if flavour == "realistic":
            runs.append(measure(flavour, *realistic_corpus(people=40 if args.quick else 400), args.brute_max))
            continue
        for size in sizes:
            runs.append(measure(flavour, *synthetic_corpus(size, flavour), args.brute_max))
    command = "python -m bench clustering" + "".join(f" {shlex.quote(a)}" for a in argv)
    result: dict[str, Any] = {
        "command": command,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": f"{platform.machine()}, {_cpus()} CPUs, Python {platform.python_version()}, numpy {np.__version__}",
        "threshold": THRESHOLD,
        "maxClusterSize": MAX_CLUSTER,
        "runs": runs,
        "goals": goals(runs),
    }
    stem = "clustering-quick" if args.quick else "clustering"  # a pipeline check never overwrites measurements
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / f"{stem}.md").write_text(markdown(result))
    print(f"wrote {args.out / stem}.json and .md")
    return 0 if result["goals"]["met"] else 1


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
