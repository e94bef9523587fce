"""Real models behind a real server: three dream cycles of the sample agent with the ``openai`` proposer against
llama.cpp's OpenAI-compatible server (llama-cpp-python, built by ``make tools``) and each PyPI model, every decision
judged by an independent judge (``bench/realmodel_judge.py``) (#18 item 8).

``python -m bench real-model [--models smollm2,gemma3] [--prompts before,after] [--cycles 3] [--size 300]``

Per cycle: requests, usable replies (batches answered usably / batches asked), merges saved / rejected / repaired,
prunes allowed / refused, tokens, wall time, and how the work converges (entries offered, near-duplicate clusters
left in the live corpus). The judge counts false rejections, lossy and inventive accepts, prunes that removed a
last mention, and refused prunes that were needed.

``--prompts``: ``after`` is the shipped prompt; ``before`` is the one main had before #18's part 2 (the reply
contract with ``"<id>"`` placeholders), put back for the run to measure the change on the same engine;
``example`` is the shipped one with a worked example (ids of its own), tried and measured, not shipped. Sampling
is the server's default (what a new user gets; ``--temperature`` sends one) with its fixed seed, so a run repeats
given the same requests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.realmodel.server import CONTEXT_TOKENS, MODELS, LlamaServer, server_version

from bench.realmodel_judge import CycleVerdicts, Decision, Lexicon, judge
from dreamkeeper.consolidation.cycle import CycleOptions, CycleOutcome, run_cycle
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.demo.sample import DEFAULT_SEED, DEFAULT_SIZE, generate_sample
from dreamkeeper.demo.world import ANCHOR
from dreamkeeper.memory import Entry, MemoryStore
from dreamkeeper.proposers import prompts
from dreamkeeper.proposers.config import ProposerConfig
from dreamkeeper.proposers.openai import OpenAIProposer

RESULTS = Path(__file__).parent / "results"
CYCLE_SPACING = timedelta(hours=12)  # twice a day, as the year simulation runs

# The reply contract and directive format main shipped before #18's part 2 (commit e192be0), for --prompts before.
BEFORE_OFFER_CONTRACT = (
    'Reply with one JSON object and nothing else: {"toDelete": ["<id>"], "toSave": [{"content": "...", '
    '"category": "...", "tags": [], "sourceIds": ["<id>"], "importance": null}]}, naming only ids shown above. '
    'When nothing should change, reply {"toDelete": [], "toSave": []}.'
)
BEFORE_REPLY_FORMAT = (
    "Reply with one JSON object and nothing else:\n"
    '`{"toDelete": ["<id>", ...], "toSave": [{"content": "...", "category": "...", "tags": ["..."], '
    '"sourceIds": ["<id>", ...], "importance": null}]}`\n'
    'When nothing should change, reply `{"toDelete": [], "toSave": []}`.'
)


# A worked example with ids of its own (a model copying it names no offered id), tried for #18 and not shipped:
# the "example" variant adds it, and lists the shown ids, after the shipped contract.
EXAMPLE = (
    "The only ids you may name are the ones shown above after ID:. Example: for two entries with the ids ex01 "
    '("Dana\'s badge is 4471.") and ex02 ("Dana\'s badge number is 4471, issued in Lisbon."), the reply '
    '{"toDelete": [], "toSave": [{"content": "Dana\'s badge number is 4471, issued in Lisbon.", "category": '
    '"people/dana", "tags": [], "sourceIds": ["ex01", "ex02"], "importance": null}]} merges them, keeping 4471 '
    "and Lisbon."
)
VARIANTS = ("before", "example", "after")


@contextmanager
def prompt_variant(name: str) -> Iterator[None]:
    """``after``: the shipped prompt; ``before``: main's previous contract and reply format; ``example``: the
    shipped contract with a worked example. Patched in for the run, restored after."""
    if name == "after":
        yield
        return
    shipped_contract, shipped_directive = prompts.offer_contract, prompts.default_directive
    directive = shipped_directive()
    head = directive[: directive.index("## Reply format")]
    before_directive = head + "## Reply format\n\n" + BEFORE_REPLY_FORMAT + "\n"

    def contract() -> str:
        if name == "before":
            return BEFORE_OFFER_CONTRACT
        lines = shipped_contract().split("\n")
        return "\n".join([*lines[:-1], EXAMPLE, lines[-1]])

    prompts.offer_contract = contract
    if name == "before":
        prompts.default_directive = lambda: before_directive  # type: ignore[assignment]
    try:
        yield
    finally:
        prompts.offer_contract = shipped_contract
        prompts.default_directive = shipped_directive


@dataclass
class CycleRow:
    cycle: int
    result: str
    requests: int
    batches_asked: int
    batches_usable: int
    batches_unusable: int
    batches_failed: int
    invented_replies: int
    offered: int
    held: int
    saved: int
    rejected: int
    invented: int
    repaired: int
    prunes_allowed: int
    prunes_refused: int
    input_tokens: int
    output_tokens: int
    wall_seconds: float
    live_after: int
    clusters_left: int
    specifics_lost: int
    hard_deletes: int
    judge: dict[str, Any]

    @property
    def usable_share(self) -> float | None:
        return self.batches_usable / self.batches_asked if self.batches_asked else None


def _shown(entry: Entry) -> str:
    """What the offer's header shows about an entry, for the judge (as validation's `_shown_about`)."""
    return " ".join([entry.category or "", *entry.tags, f"{entry.created_at:%Y-%m-%d}", f"{entry.seen_at:%Y-%m-%d}"])


def decision_of(outcome: CycleOutcome, before: dict[str, Entry]) -> Decision:
    """The cycle's decisions as texts: accepted merges and prunes from the plan, rejections and refusals from the
    report (a rejection's text is the report's, clipped at 500 characters)."""
    plan, report = outcome.plan, outcome.report
    accepted = []
    pruned: list[str] = []
    if plan is not None:
        for merge in plan.merges:
            sources = [s.entry for s in merge.sources]
            accepted.append(([e.content for e in sources], merge.successor.content, [_shown(e) for e in sources]))
        pruned = [p.target.entry.content for p in plan.prunes]
    rejected = []
    for rejection in report.rejections:
        sources = [before[i] for i in rejection.source_ids if i in before]
        rejected.append(([e.content for e in sources], rejection.content, [_shown(e) for e in sources]))
    refused = [before[p.id].content for p in report.protections if p.id in before]
    return Decision(accepted, rejected, pruned, refused)


def run_model(
    model: str,
    variant: str,
    cycles: int,
    size: int,
    work: Path,
    log: Callable[[str], None],
    temperature: float | None = None,
) -> dict:
    agent = work / f"{model}-{variant}"
    generate_sample(agent, DEFAULT_SEED, size)
    store = MemoryStore(agent / "memory")
    lexicon = Lexicon.of(s.entry.content for s in store.scan().entries)
    settings = CycleSettings(min_interval_hours=0)
    rows: list[CycleRow] = []
    server = LlamaServer(model, state_dir=work / f"{model}-{variant}-server")
    with server, prompt_variant(variant):
        for k in range(cycles):
            before = {s.id: s.entry for s in store.scan().entries}
            config = ProposerConfig(
                type="openai",
                model=server.model,
                base_url=server.base_url,
                temperature=temperature,
                timeout=900,  # 2 shared cores: a long offer can take minutes
                defer_below_entries=0,  # every cycle asks: the bench measures the model, not the deferral
            )
            now = ANCHOR + timedelta(days=1) + k * CYCLE_SPACING
            started = time.monotonic()
            outcome = asyncio.run(run_cycle(CycleOptions(agent, settings, now=now), OpenAIProposer(config)))
            wall = time.monotonic() - started
            r = outcome.report
            live = [s.entry for s in store.scan().live]
            verdicts: CycleVerdicts = judge(decision_of(outcome, before), {e.id: e.content for e in live}, lexicon)
            row = CycleRow(
                cycle=k + 1,
                result=r.result,
                requests=r.llm_calls,
                batches_asked=r.batches_usable + r.batches_unusable + r.batches_failed,
                batches_usable=r.batches_usable,
                batches_unusable=r.batches_unusable,
                batches_failed=r.batches_failed,
                invented_replies=r.invented_replies,
                offered=r.reviewed,
                held=r.held,
                saved=r.saved,
                rejected=r.rejected,
                invented=r.invented,
                repaired=r.repaired,
                prunes_allowed=r.ephemeral,
                prunes_refused=r.protected + r.prunes_refused,
                input_tokens=r.input_tokens,
                output_tokens=r.output_tokens,
                wall_seconds=round(wall, 1),
                live_after=len(live),
                # The engine's own count (its clustering, its settings, the vectors on disk): issue 23 found this
                # bench clustering differently (8 clusters left where the engine offered 35).
                clusters_left=r.duplicate_backlog,
                specifics_lost=r.specifics_lost,
                hard_deletes=r.hard_deletes,
                judge=asdict(verdicts),
            )
            rows.append(row)
            log(
                f"{model}/{variant} cycle {k + 1}: {r.result}, {row.requests} requests, "
                f"{row.batches_usable}/{row.batches_asked} usable, saved {row.saved}, rejected {row.rejected}, "
                f"prunes {row.prunes_allowed}/{row.prunes_refused}, {row.input_tokens}+{row.output_tokens} tokens, "
                f"{wall:.0f}s; judge: {verdicts.lossy_accepts} lossy / {verdicts.inventive_accepts} inventive accepts, "
                f"{verdicts.false_rejections} false rejections, {verdicts.prunes_removing_last_mention} prunes "
                f"removing a last mention, {verdicts.refusals_needed}/{verdicts.prunes_refused} refusals needed"
            )
    return {"model": model, "prompt": variant, "cycles": [asdict(r) | {"usable_share": r.usable_share} for r in rows]}


# ---- report -----------------------------------------------------------------------------------------------------


def _share(usable: int, asked: int) -> str:
    return f"{usable}/{asked} ({usable / asked:.0%})" if asked else "0/0"


def _markdown(report: dict[str, Any]) -> str:
    lines = [
        "# Real models behind a real server",
        "",
        f"Command: `{report['command']}`  ",
        f"Server: llama-cpp-python {report['server']} (`python -m llama_cpp.server`, CPU, {report['threads']} "
        f"threads, n_ctx {report['context']}, seed 1234, {report['temperature']}), built by `make tools` "
        "(tests/tools/install.d/40-llama.sh).  ",
        f"Corpus: the sample agent (`dreamkeeper sample`, seed {report['seed']}, {report['size']} entries), "
        f"{report['cycles']} cycles {CYCLE_SPACING.total_seconds() / 3600:.0f} h apart, default settings "
        "(minimum interval 0; the openai proposer's deferral off).  ",
        f"Host: {report['host']}. Generated {report['generated']}{report['note']}.",
        "",
        "Models (both from PyPI):",
        "",
    ]
    for name in report["models"]:
        spec = MODELS[name]
        lines.append(f"- `{name}`: {spec.about}; package `{spec.package}`; chat format `{spec.chat_format}`")
    for run in report["runs"]:
        lines += [
            "",
            f"## {run['model']}, prompt {run['prompt']}",
            "",
            "| cycle | result | requests | usable replies | offered (held) | saved | rejected (inventing) "
            "| repaired | prunes allowed / refused | tokens in / out | wall | live | clusters left |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for c in run["cycles"]:
            lines.append(
                f"| {c['cycle']} | {c['result']} | {c['requests']} | {_share(c['batches_usable'], c['batches_asked'])} "
                f"| {c['offered']} ({c['held']}) | {c['saved']} | {c['rejected']} ({c['invented']}) | {c['repaired']} "
                f"| {c['prunes_allowed']} / {c['prunes_refused']} | {c['input_tokens']} / {c['output_tokens']} "
                f"| {c['wall_seconds']:.0f} s | {c['live_after']} | {c['clusters_left']} |"
            )
        lines += [
            "",
            "| cycle | judge: merges accepted | lossy accepts | inventive accepts | merges rejected "
            "| false rejections | prunes allowed | removed a last mention | prunes refused | refusals needed |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for c in run["cycles"]:
            j = c["judge"]
            lines.append(
                f"| {c['cycle']} | {j['merges_accepted']} | {j['lossy_accepts']} | {j['inventive_accepts']} "
                f"| {j['merges_rejected']} | {j['false_rejections']} | {j['prunes_allowed']} "
                f"| {j['prunes_removing_last_mention']} | {j['prunes_refused']} | {j['refusals_needed']} |"
            )
        examples = [(k, e) for c in run["cycles"] for k, shown in c["judge"]["examples"].items() for e in shown]
        if examples:
            lines += ["", "The judge's findings (first few):", ""]
            for kind, example in examples[:8]:
                lines.append(f"- {kind}: `{json.dumps(example, ensure_ascii=False)[:400]}`")
    lines += ["", "## Usable replies, before and after the prompt change", ""]
    lines += ["| model | prompt | batches asked | usable | invented ids | saved | judge: lossy / inventive accepts |"]
    lines += ["|---|---|---|---|---|---|---|"]
    for run in report["runs"]:
        cs = run["cycles"]
        asked, usable = sum(c["batches_asked"] for c in cs), sum(c["batches_usable"] for c in cs)
        lines.append(
            f"| {run['model']} | {run['prompt']} | {asked} | {_share(usable, asked)} "
            f"| {sum(c['invented_replies'] for c in cs)} | {sum(c['saved'] for c in cs)} "
            f"| {sum(c['judge']['lossy_accepts'] for c in cs)} / {sum(c['judge']['inventive_accepts'] for c in cs)} |"
        )
    lines += [
        "",
        '`before`: the contract main had before this change (`"<id>"` placeholders); `after`: the shipped one (no '
        "placeholder: ids as shown after `ID:`); `example`: `after` plus a worked example with ids of its own. "
        "Usable: a reply that names an offered id or is the explicit no-change reply; one naming only ids that were "
        "not offered decides nothing.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench real-model", description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated (default: every model)")
    parser.add_argument("--prompts", default=",".join(VARIANTS), help=f"comma-separated, of: {', '.join(VARIANTS)}")
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--temperature", type=float, default=None, help="sent with every request (default: none)")
    parser.add_argument("--size", type=int, default=DEFAULT_SIZE, help="sample agent entries (default 300)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--name", default="real-model", help="results file name (default real-model)")
    parser.add_argument("--note", default="", help="a line added to the header (what main had, e.g.)")
    parser.add_argument(
        "--log", type=Path, default=Path(tempfile.gettempdir()) / "dk-real-model.log", help="the cycles' log (INFO)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        filename=args.log, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True
    )
    print(f"cycle logs: {args.log}", flush=True)

    def log(line: str) -> None:
        print(line, flush=True)

    models = [m for m in args.models.split(",") if m]
    variants = [v for v in args.prompts.split(",") if v]
    unknown = [m for m in models if m not in MODELS] + [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown model or prompt variant: {', '.join(unknown)}")
    os.environ.setdefault("OPENAI_API_KEY", "local-no-key")  # llama.cpp's server checks none
    for name in ("OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"):
        os.environ.pop(name, None)
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="dk-real-model-") as tmp:
        for model in models:
            for variant in variants:
                runs.append(run_model(model, variant, args.cycles, args.size, Path(tmp), log, args.temperature))
                _save(args, argv, models, runs, final=False)  # an interrupted run keeps the runs it finished
    print(_save(args, argv, models, runs, final=True))
    return 0


def _save(
    args: argparse.Namespace, argv: list[str] | None, models: list[str], runs: list[dict[str, Any]], *, final: bool
) -> str:
    partial = "" if final else f"; interrupted: {len(runs)} run(s) finished so far"
    report = {
        "command": " ".join(["python -m bench real-model", shlex.join(sys.argv[2:] if argv is None else argv)]).strip(),
        "server": server_version(),
        "threads": 2,
        "temperature": (
            f"temperature {args.temperature:g}" if args.temperature is not None else "the server's default temperature"
        ),
        "context": CONTEXT_TOKENS,
        "seed": DEFAULT_SEED,
        "size": args.size,
        "cycles": args.cycles,
        "models": models,
        "host": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "note": (f"; {args.note}" if args.note else "") + partial,
        "runs": runs,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    markdown = _markdown(report)
    (args.out / f"{args.name}.md").write_text(markdown)
    return markdown
