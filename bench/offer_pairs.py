"""Near-duplicate pairs never shown together (issue 24 item 5): how the offer is cut into requests.

``python -m bench offer-pairs [--size 30000] [--quick]``

RockBot cuts a near-duplicate component of more than ``max_cluster_size`` (3) entries into chunks; each chunk is a
cluster of its own. Main packed those chunks into 40-entry batches one by one, so two chunks of one component could
land in two requests, and a pair of entries above the similarity threshold that straddled them was never put side
by side: no model could ever merge it. Now every chunk of a component goes into the same request
(``gating.make_batches``), in both offer shapes.

For each corpus (the bundled sample agent as it is, and a cold-start synthetic corpus of ``--size`` entries from
``bench/sim/world.py``, half of it with embeddings): the eligible set the engine's gate selects with default
settings, every near-duplicate pair among eligible entries (the engine's own edges, twin classes expanded), and how
many of those pairs share no request: main's packing (reproduced here verbatim as ``main_batches``), then
``make_batches`` in the ``batches`` shape and the ``clusters`` shape.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.sim.world import write_synthetic_corpus
from dreamkeeper.consolidation.clustering import ClusteringStats, ClusterItem
from dreamkeeper.consolidation.clustering.scan import edge_graph
from dreamkeeper.consolidation.fold import plan_folds
from dreamkeeper.consolidation.gating import GatingResult, make_batches, select_candidates
from dreamkeeper.consolidation.proposal import Batch, OfferedEntry, OfferGroup
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.demo.sample import copy_bundled
from dreamkeeper.demo.world import ANCHOR
from dreamkeeper.memory import MemoryStore, StoredEntry, embedding_file_name

RESULTS = Path(__file__).parent / "results"


def main_batches(gating: GatingResult, max_entries: int) -> list[Batch]:
    """Main's ``make_batches`` before issue 24 item 5 (commit fa2ec85): clusters first (each chunk kept whole, but
    chunks of one component packed independently), then singletons, first fit into bounded batches."""
    by_id = {s.id: s for s in gating.eligible}
    reopened = {c.ids for c in gating.reopened}
    groups: list[OfferGroup] = [OfferGroup(c.ids, True, c.ids in reopened) for c in gating.clusters]
    in_cluster = {i for c in gating.clusters for i in c.ids}
    groups += [OfferGroup((s.id,), False) for s in gating.eligible if s.id not in in_cluster]
    batches: list[Batch] = []
    current: list[OfferGroup] = []
    size = 0
    for group in groups:
        if current and size + len(group.ids) > max_entries:
            entries = tuple(OfferedEntry(by_id[i].entry) for g in current for i in g.ids)
            batches.append(Batch(len(batches), tuple(current), entries))
            current, size = [], 0
        current.append(group)
        size += len(group.ids)
    if current:
        entries = tuple(OfferedEntry(by_id[i].entry) for g in current for i in g.ids)
        batches.append(Batch(len(batches), tuple(current), entries))
    return batches


def embeddings_of(store: MemoryStore) -> Callable[[str], Any]:
    """The cycle's loader: the entry's stored vector when it has one (``.embeddings/<id>.bin``)."""
    present = store.embedding_files()
    return lambda i: store.load_embedding(i) if embedding_file_name(i).casefold() in present else None


def eligible_pairs(
    live: Sequence[StoredEntry], gating: GatingResult, settings: CycleSettings, load: Callable[[str], Any]
) -> list[tuple[str, str]]:
    """Every near-duplicate pair (the engine's edges, same options and vectors as gating), both entries eligible."""
    store_items = [ClusterItem(s.id, s.entry.content, s.entry.category, load(s.id)) for s in live]
    graph = edge_graph(
        store_items,
        threshold=settings.similarity_threshold,
        same_top_level_category=settings.same_category_clusters,
        strategy="auto",
        seed=None,
        stats=ClusteringStats(),
        tokens=settings.cluster_tokens,
    )
    eligible = gating.eligible_ids
    return [(p.a, p.b) for p in graph.entry_pairs() if p.a in eligible and p.b in eligible]


def never_together(pairs: list[tuple[str, str]], batches: list[Batch]) -> int:
    where: dict[str, set[int]] = {}
    for batch in batches:
        for entry_id in batch.ids:
            where.setdefault(entry_id, set()).add(batch.index)
    return sum(1 for a, b in pairs if not where.get(a, set()) & where.get(b, set()))


def component_sizes(gating: GatingResult) -> dict[str, int]:
    """Each clustered entry's component size (entries in all its chunks)."""
    members: dict[int, set[str]] = {}
    for cluster in gating.clusters:
        members.setdefault(cluster.component, set()).update(cluster.ids)
    return {i: len(ids) for ids in members.values() for i in ids}


def measure(name: str, store: MemoryStore, now: datetime) -> dict[str, Any]:
    settings = CycleSettings()
    folded = {c.id for f in plan_folds(store.scan().live, settings, now) for c in f.copies}
    live = [s for s in store.scan().live if s.id not in folded]  # what gating sees: after the exact fold
    started = time.perf_counter()
    load = embeddings_of(store)
    gating = select_candidates(live, settings, now, load)
    pairs = eligible_pairs(live, gating, settings, load)
    shapes: dict[str, Callable[[], list[Batch]]] = {
        "main": lambda: main_batches(gating, settings.batch_max_entries),
        "batches": lambda: make_batches(gating, settings.batch_max_entries, "batches"),
        "clusters": lambda: make_batches(gating, settings.batch_max_entries, "clusters"),
    }
    size_of = component_sizes(gating)
    small = [(a, b) for a, b in pairs if max(size_of.get(a, 0), size_of.get(b, 0)) <= settings.batch_max_entries]
    result: dict[str, Any] = {
        "corpus": name,
        "live": len(live),
        "eligible": len(gating.eligible),
        "clusters": len(gating.clusters),
        "components": len({c.component for c in gating.clusters}),
        "largest_component": max(
            (
                sum(len(c.ids) for c in gating.clusters if c.component == k)
                for k in {c.component for c in gating.clusters}
            ),
            default=0,
        ),
        "pairs": len(pairs),
        "pairs_in_fitting_components": len(small),
        "large_components": sorted({n for n in size_of.values() if n > settings.batch_max_entries}, reverse=True),
    }
    for shape, build in shapes.items():
        batches = build()
        result[f"shape_{shape}"] = {
            "requests": len(batches),
            "never_together": never_together(pairs, batches),
            "never_together_fitting": never_together(small, batches),
        }
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result


def _markdown(report: dict[str, Any]) -> str:
    lines = [
        "# Near-duplicate pairs never shown together",
        "",
        f"Command: `{report['command']}`. Generated {report['generated']}.",
        "",
        "Pairs: near-duplicate pairs (the engine's own edges at the default threshold 0.88, RockBot's tokens, cosine "
        "where both entries have a stored vector) with both entries in the eligible set of a cycle with default "
        "settings (cluster cap 3, RockBot's chunks, batches of 40). Never together: pairs that share no request.",
        "",
        "| corpus | live | eligible | clusters (components, largest) | pairs (in components of <= 40) "
        "| main: requests / never together (of those) | batches shape | clusters shape |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in report["results"]:
        lines.append(
            f"| {r['corpus']} | {r['live']} | {r['eligible']} | {r['clusters']} ({r['components']}, "
            f"{r['largest_component']}) | {r['pairs']} ({r['pairs_in_fitting_components']}) | "
            + " | ".join(
                f"{r[k]['requests']} / {r[k]['never_together']} (**{r[k]['never_together_fitting']}**)"
                for k in ("shape_main", "shape_batches", "shape_clusters")
            )
            + " |"
        )
    for r in report["results"]:
        if r["large_components"]:
            lines += [
                "",
                f"{r['corpus']}: components larger than a request (40 entries) are cut at chunk boundaries: sizes "
                f"{', '.join(map(str, r['large_components']))}. They are template facts that differ only in a version, "
                "a host or an address (Postgres X for the agent's episode store runs on host (IP:port); Host H (IP) "
                "serves Ollama on port P): near-duplicates by Jaccard, and all distinct facts. Their pairs are the "
                "ones never shown together; hundreds of them in one request would decide nothing.",
            ]
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench offer-pairs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=30_000, help="synthetic corpus entries (default 30000)")
    parser.add_argument("--quick", action="store_true", help="a 3,000-entry synthetic corpus")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    size = 3_000 if args.quick else args.size
    results = []
    with tempfile.TemporaryDirectory(prefix="dk-offer-pairs-") as tmp:
        sample = Path(tmp) / "sample"
        copy_bundled(sample)
        results.append(
            measure("sample agent (bundled, 300)", MemoryStore(sample / "memory"), ANCHOR + timedelta(days=1))
        )
        print(json.dumps(results[-1]), flush=True)
        synthetic = Path(tmp) / "synthetic" / "memory"
        write_synthetic_corpus(synthetic, size, seed=7)
        results.append(measure(f"synthetic cold start ({size})", MemoryStore(synthetic), datetime.now(UTC)))
        print(json.dumps(results[-1]), flush=True)
    report = {
        "command": " ".join(
            ["python -m bench offer-pairs", shlex.join(sys.argv[2:] if argv is None else argv)]
        ).strip(),
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "results": results,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    name = "offer-pairs-quick" if args.quick else "offer-pairs"
    (args.out / f"{name}.json").write_text(json.dumps(report, indent=2) + "\n")
    markdown = _markdown(report)
    (args.out / f"{name}.md").write_text(markdown)
    print(markdown)
    return 0
