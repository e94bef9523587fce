"""`python -m bench <name> [args]` runs one benchmark; `python -m bench all` runs every one with defaults.

To add a benchmark, add its module to SUBCOMMANDS; the module needs `main(argv: list[str]) -> int`.
"""

from __future__ import annotations

import importlib
import sys

SUBCOMMANDS: dict[str, str] = {
    "coverage": "bench.coverage_eval",  # merge coverage check: false rejections and catch rate
    "llm-tokens": "bench.llm_tokens",  # LLM input tokens per cycle: whole corpus vs RockBot-style vs dreamkeeper
    "year-sim": "bench.year_sim",  # a year of adversarial cycles: naive applier vs dreamkeeper
    "audit-year": "bench.audit_year",  # a year beside RockBot's own purge and memory audit: alerts, purges, pauses
    "embeddings-sample": "bench.embeddings_sample",  # the sample's clusters with and without a real embedding model
    "scale": "bench.scale",  # cycle time, peak RSS and per-stage time at 1k / 10k / 100k entries
    "scale-steady": "bench.scale_steady",  # the steady cycle (corpus index) against a full read+parse, side by side
    "clustering": "bench.clustering_bench",  # near-duplicate scan: LSH vs brute force time, memory, recall
    "operator-scale": "bench.operator_scale",  # 500 DreamSchedules: operator RSS, reconcile-all after restart
    "entry-footprint": "bench.entry_footprint",  # bytes per parsed entry (by part), scan and parse seconds
    "extraction": "bench.extraction",  # coverage extraction time against input length, 1 KB - 1 MB: the slope
    "real-model": "bench.real_model",  # llama.cpp + PyPI models: usable replies, decisions and an independent judge
    "offer-pairs": "bench.offer_pairs",  # near-duplicate pairs never shown in the same request: main vs now
    "dream-table": "bench.dream_table",  # the seed's six-cycle table with Qwen2.5-Coder 1.5B / 0.5B, judged
    "dream-ceiling": "bench.dream_ceiling",  # the dream table with a perfect (scripted) model: the clustering's reach
    "invariant-cost": "bench.invariant_cost",  # the end-of-run invariant's cost per cycle, with / without
    "floor": "bench.floor",  # the files a cold and a steady cycle write, written bare: the cycle's physical floor
    "write-cost": "bench.write_cost",  # per-file CPU and fsyncs of a journaled write (decay, stamp, merge, prune)
    "cycle-start": "bench.cycle_start",  # one `dreamkeeper dream` process, imports included: this vs a baseline
    "peak-probe": "bench.peak_probe",  # a cold cycle's memory: traced peak within named functions, RSS by stage
}


def _usage() -> str:
    names = "\n".join(f"  {name:<12} {module}" for name, module in sorted(SUBCOMMANDS.items()))
    return f"usage: python -m bench <name> [args] | all\n\nbenchmarks:\n{names}"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(_usage())
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name == "all":
        codes = [importlib.import_module(module).main(rest) for module in SUBCOMMANDS.values()]
        return max(codes, default=0)
    module = SUBCOMMANDS.get(name)
    if module is None:
        print(f"unknown benchmark {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    code: int = importlib.import_module(module).main(rest)
    return code


if __name__ == "__main__":
    sys.exit(main())
