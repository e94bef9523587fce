"""`dreamkeeper dream`: run one consolidation cycle on an agent directory.

Settings come from ``--settings`` (a JSON file), then ``--settings-json``, then flags, each overriding the one
before. The cycle's dials are top-level keys (``CycleSettings``); the proposer's are the ``proposer`` section
(``ProposerConfig``), which is also how a DreamSchedule's ``spec.proposer`` reaches its cycle Job; the memory
format's are the ``format`` section (``{"name": "openclaw", "memoryDir": ...}``; ``--format``/``--profile-json``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape

from dreamkeeper.consolidation import (
    FORMAT_OPT,
    FORMAT_SECTION,
    PROFILE_OPT,
    CycleOptions,
    CycleReport,
    CycleSettings,
    cycles_dir,
    format_of,
    render_plan,
    render_report,
    run_cycle,
)
from dreamkeeper.coverage import load_vocabulary
from dreamkeeper.formats import ROCKBOT
from dreamkeeper.memory import (
    LockHeldError,
    MemoryStoreError,
    MiB,
    parse_json_object,
    read_regular,
    read_regular_text,
    redacted_logs,
    utcnow,
)
from dreamkeeper.proposers import (
    EMBEDDINGS_SECTION,
    PRICE_FILE,
    PROPOSER_KINDS,
    PROPOSER_SECTION,
    EmbeddingsConfig,
    ProposerConfig,
    make_embedder,
    make_proposer,
)

# soft_wrap: a pod has no terminal, and a console's hard wraps at 80 columns would reach the termination message
# (and from there conditions and Events) as line breaks in the middle of a sentence.
err = Console(stderr=True, soft_wrap=True)
log = logging.getLogger(__name__)

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_LOCKED = 3
EXIT_PAUSED = 4  # skipped: the agent's pause marker (memory-audit/consolidation-paused.json) is present
EXIT_PROPOSER_FAILED = 5  # the cycle ran, but no batch the proposer was asked about got a usable reply
EXIT_TERMINATED = 143
SHARED_UMASK = 0o002  # files and directories the cycle creates are group-writable (the volume's fsGroup)


class CycleStopped(Exception):
    """Raised at a stage boundary after SIGTERM. An Exception, so the cycle's failure path writes its report
    (what the stages before did) and releases its lock, exactly as for any other failure."""


class GracefulStop:
    """SIGTERM (a deleted Job pod: its schedule, the Job, a drained node) stops the cycle at its next safe point.

    A stage is never cut short: the signal only marks the stop, and the cycle stops when the next stage begins,
    its report written and everything before it complete (the fold journal, the purge). Once ``apply`` has begun
    the cycle runs to its end: what follows only measures and writes the report, and stopping halfway through a
    plan would leave it for the next cycle's recovery. As PID 1 without a handler the signal would be ignored
    until SIGKILL; the pod's grace period (the Job's terminationGracePeriodSeconds) bounds the wait.
    """

    def __init__(self) -> None:
        self.requested = False
        self.stage: str | None = None
        self.stopped_before: str | None = None
        self._applying = False

    def on_signal(self, signum: int, frame: object) -> None:
        if not self.requested:
            self.requested = True
            where = f"during {self.stage}" if self.stage else "before the cycle started"
            then = "it finishes (apply has begun)" if self._applying else "it stops when the next stage begins"
            log.warning("SIGTERM %s: %s", where, then)

    def enter(self, stage: str) -> None:
        """The cycle's progress hook: called as each stage begins."""
        if self.requested and not self._applying:
            self.stopped_before = stage
            raise CycleStopped(f"stopped by SIGTERM before {stage}; every stage before it completed")
        self.stage = stage
        if stage == "apply":
            self._applying = True


SETTINGS_FILE_LIMIT = 1 * MiB
REPORT_LIMIT = 64 * MiB  # a cycle report of ours (its notes are capped): never a FIFO, never unbounded


def _settings_data(settings_file: Path | None, settings_json: str | None) -> dict[str, Any]:
    """The settings layers merged (file, then inline JSON), each a JSON object without duplicate keys. A FIFO or
    device named as the file is refused without being opened; nothing is validated yet (the caller does it whole)."""
    data: dict[str, Any] = {}
    layers: list[tuple[str, str | None]] = []
    if settings_file is not None:
        try:
            layers.append((str(settings_file), read_regular_text(settings_file, SETTINGS_FILE_LIMIT)))
        except UnicodeDecodeError as exc:
            raise ValueError(f"{settings_file}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    layers.append(("--settings-json", settings_json))
    for origin, text in layers:
        if text is None:
            continue
        try:
            layer = parse_json_object(text.encode("utf-8"))
        except ValueError as exc:
            kind = "JSON object" if not text.strip() else "valid settings object"
            raise ValueError(f"{origin}: expected a {kind}: {exc}") from None
        sections = {}
        for name in (PROPOSER_SECTION, EMBEDDINGS_SECTION):
            section = layer.pop(name, None)
            if section is not None and not isinstance(section, dict):
                raise ValueError(f"{origin}: {name!r} must be an object, not {type(section).__name__}")
            sections[name] = section
        memory_format = layer.pop(FORMAT_SECTION, None)
        if memory_format is not None and not isinstance(memory_format, dict):
            raise ValueError(f"{origin}: {FORMAT_SECTION!r} must be an object, not {type(memory_format).__name__}")
        data.update(layer)
        for name, section in sections.items():
            data[name] = {**data.get(name, {}), **(section or {})}
        if memory_format is not None:
            data[FORMAT_SECTION] = {**data.get(FORMAT_SECTION, {}), **memory_format}
    return data


def _overlay(base: dict[str, Any], flags: dict[str, Any]) -> dict[str, Any]:
    return {**base, **{k: v for k, v in flags.items() if v is not None}}


def proposer_config(agent_dir: Path, section: dict[str, Any], flags: dict[str, Any]) -> ProposerConfig:
    """The settings' proposer section overlaid with the flags that were given; an openai proposer also reads the
    agent's own llm-pricing.json when no price file was named (RockBot keeps it there)."""
    data = _overlay(section, flags)
    default_prices = agent_dir / PRICE_FILE
    if data.get("type") == "openai" and data.get("price_file") is None and default_prices.is_file():
        data["price_file"] = default_prices
    return ProposerConfig.model_validate(data)


def register(app: typer.Typer) -> None:
    @app.command("dream")
    def dream_command(
        agent_dir: Path = typer.Argument(
            ..., help="The agent's data directory (RockBot: memory under AGENT_DIR/memory; see --format)."
        ),
        proposer: str | None = typer.Option(None, help=f"{' | '.join(PROPOSER_KINDS)} (default offline)."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan as a diff; write nothing."),
        as_json: bool = typer.Option(False, "--json", help="Print the JSON report on stdout."),
        force: bool = typer.Option(False, "--force", help="Ignore the minimum interval between cycles."),
        memory_dir: Path | None = typer.Option(None, help="Memory directory (default AGENT_DIR/memory)."),
        settings_file: Path | None = typer.Option(None, "--settings", help="JSON file of cycle settings."),
        settings_json: str | None = typer.Option(None, "--settings-json", help="Cycle settings as inline JSON."),
        similarity_threshold: float | None = typer.Option(None, help="Near-duplicate threshold (0.88)."),
        retention_days: int | None = typer.Option(None, help="Archive retention before purge (90; 0 = forever)."),
        min_interval_hours: float | None = typer.Option(None, help="Minimum hours between completed cycles (6)."),
        termination_message_path: Path | None = typer.Option(
            None, help="Write the compact JSON summary here (a container's termination-message file)."
        ),
        model: str | None = typer.Option(None, help="openai: model name."),
        base_url: str | None = typer.Option(None, help="openai: base URL (else OPENAI_BASE_URL)."),
        timeout: float | None = typer.Option(None, help="openai: per-request timeout in seconds (120)."),
        temperature: float | None = typer.Option(None, help="openai: sampling temperature (the server's default)."),
        max_output_tokens: int | None = typer.Option(
            None, help="openai: every request's max_tokens (default: sized from the entries it shows)."
        ),
        max_retries: int | None = typer.Option(None, help="openai: retries on 429/5xx."),
        token_budget: int | None = typer.Option(None, help="openai: per-cycle token budget (input + output)."),
        concurrency: int | None = typer.Option(None, help="openai: requests in flight at once (1)."),
        offer_singletons: bool | None = typer.Option(
            None,
            "--offer-singletons/--no-offer-singletons",
            help="openai: show new or changed entries with no near-duplicate too, for the model to prune (default: "
            "in RockBot's layout yes, in the clusters shape no). --no-offer-singletons is the frugal mode.",
        ),
        defer_below_entries: int | None = typer.Option(
            None, help="openai: hold back offers smaller than this until they are a day old (8; 0 = never)."
        ),
        output_mode: str | None = typer.Option(
            None, help="openai: structured output json_schema | json_object | none (falls back by itself)."
        ),
        price_file: Path | None = typer.Option(
            None,
            help=f"openai: JSON price table, model -> input/output per 1M tokens (default AGENT_DIR/{PRICE_FILE}).",
        ),
        batch_size: int | None = typer.Option(None, help="Maximum entries per proposer request."),
        offer_shape: str | None = typer.Option(
            None,
            help="How the offer is cut into requests: clusters (one near-duplicate component per short request, "
            "lone entries reviewed apart; the default) or batches (RockBot's layout, batches of --batch-size).",
        ),
        request_token_budget: int | None = typer.Option(
            None, help="openai: a request whose prompt would be larger is asked in parts (clusters kept whole)."
        ),
        embeddings_url: str | None = typer.Option(
            None,
            help="An OpenAI-compatible embeddings endpoint (its /v1 base URL): missing vectors are generated before "
            "clustering and written as RockBot's EmbeddingCache does (key: DREAMKEEPER_EMBEDDINGS_API_KEY).",
        ),
        embeddings_model: str | None = typer.Option(None, help="embeddings: the model name (the agent's)."),
        embeddings_batch_size: int | None = typer.Option(None, help="embeddings: texts per request (64)."),
        embeddings_timeout: float | None = typer.Option(None, help="embeddings: seconds per request (60)."),
        approve_hold: str | None = typer.Option(
            None,
            "--approve-hold",
            help="Apply the plan this cycle id held over the blast-radius cap, if the corpus is unchanged "
            "(AGENT_DIR/.dreamkeeper/holds/pending.json).",
        ),
        trust_clock: bool = typer.Option(
            False,
            "--trust-clock",
            help="Purge and decay even when the clock disagrees with the newest ledger or journal time (it is then "
            "recorded, and history dated ahead of this clock is disregarded from then on).",
        ),
        shared_group: bool = typer.Option(
            False,
            "--shared-group",
            help="Create files and directories group-writable (umask 002): the agent and later cycles share the "
            "volume through its group (a pod's fsGroup).",
        ),
        redact_logs: bool = typer.Option(
            False,
            "--redact-logs",
            envvar="DREAMKEEPER_REDACT_LOGS",
            help="Log entry ids and counts only, never memory content (for shipped logs); the volume keeps it all.",
        ),
        memory_format: str | None = FORMAT_OPT,
        profile_json: str | None = PROFILE_OPT,
    ) -> None:
        """Run one consolidation cycle. Nothing is ever hard-deleted; every archive is reversible.

        Exit codes: 0 completed (or skipped), 1 failed, 2 invalid settings, 3 another cycle holds the agent's lock,
        4 paused by the agent's memory audit, 5 proposer failed (the cycle ran, but no batch the model was asked
        about got a usable reply), 143 SIGTERM.
        """
        if shared_group:
            os.umask(SHARED_UMASK)
        try:
            data = _settings_data(settings_file, settings_json)
            section = data.pop(PROPOSER_SECTION, {})
            chosen_format = format_of(memory_format, profile_json, data.pop(FORMAT_SECTION, None))
            if chosen_format.name != ROCKBOT and memory_dir is not None:
                raise ValueError("--memory-dir is RockBot's; a Markdown format's files are named by its profile")
            embeddings = _overlay(
                data.pop(EMBEDDINGS_SECTION, {}),
                {
                    "base_url": embeddings_url,
                    "model": embeddings_model,
                    "batch_size": embeddings_batch_size,
                    "timeout": embeddings_timeout,
                },
            )
            embeddings_config = EmbeddingsConfig.model_validate(embeddings) if embeddings else None
            settings = CycleSettings.model_validate(
                _overlay(
                    data,
                    {
                        "similarity_threshold": similarity_threshold,
                        "retention_days": retention_days,
                        "min_interval_hours": min_interval_hours,
                        "batch_max_entries": batch_size,
                        "offer_shape": offer_shape,
                    },
                )
            )
        except (OSError, ValueError, ValidationError) as exc:
            err.print(f"[red]invalid settings:[/red] {escape(_one_message(exc))}")
            raise typer.Exit(EXIT_USAGE) from None
        flags = {
            "type": proposer,
            "model": model,
            "base_url": base_url,
            "timeout": timeout,
            "temperature": temperature,
            "max_output_tokens": max_output_tokens,
            "max_retries": max_retries,
            "token_budget": token_budget,
            "output_mode": output_mode,
            "concurrency": concurrency,
            "offer_singletons": offer_singletons,
            "defer_below_entries": defer_below_entries,
            "price_file": price_file,
            "request_token_budget": request_token_budget,
        }
        try:
            config = proposer_config(agent_dir, section, flags)
        except (ValueError, ValidationError) as exc:
            err.print(f"[red]invalid settings:[/red] {escape(_one_message(exc))}")
            raise typer.Exit(EXIT_USAGE) from None
        # Everything is validated; only now is anything read for the cycle (the vocabulary never raises).
        vocab_path = Path(settings.vocabulary_path)
        vocabulary = load_vocabulary(vocab_path if vocab_path.is_absolute() else agent_dir / vocab_path).vocabulary
        try:
            chosen = make_proposer(config, vocabulary)
            embedder = make_embedder(embeddings_config)
        except (ValueError, ValidationError) as exc:
            err.print(f"[red]error:[/red] {escape(str(exc))}")
            raise typer.Exit(EXIT_USAGE) from None
        options = CycleOptions(
            agent_dir=agent_dir,
            settings=settings,
            memory_dir=memory_dir,
            dry_run=dry_run,
            force=force,
            approve_hold=approve_hold,
            format=chosen_format if chosen_format.name != ROCKBOT else None,
            trust_clock=trust_clock,
            embedder=embedder,
        )
        status = err.status("dreaming…") if err.is_terminal and not as_json else None
        stop = GracefulStop()

        def progress(stage: str) -> None:
            stop.enter(stage)
            if status is not None:
                status.update(f"dreaming… {stage}")

        options.progress = progress
        options.stop_requested = lambda: stop.requested  # a slow model must not hold the stop past the grace period
        if status is not None:
            status.start()
        started = utcnow()
        previous = signal.signal(signal.SIGTERM, stop.on_signal)
        try:
            with redacted_logs(redact_logs):
                outcome = asyncio.run(run_cycle(options, chosen))
        except CycleStopped as exc:
            err.print(f"[yellow]stopped:[/yellow] {exc}; the report is on the volume")
            _write_message(termination_message_path, _stopped_summary(agent_dir, started, str(exc)))
            raise typer.Exit(EXIT_TERMINATED) from None
        except LockHeldError as exc:
            err.print(f"[yellow]skipped:[/yellow] {exc}")
            raise typer.Exit(EXIT_LOCKED) from None
        except (MemoryStoreError, OSError) as exc:
            # A full or read-only volume, an unusable state directory, a missing memory directory: one clear line.
            err.print(f"[red]error:[/red] {escape(str(exc))}")
            _write_message(termination_message_path, {"result": "failed", "error": str(exc)[:500]})
            raise typer.Exit(EXIT_FAILED) from None
        except Exception as exc:
            _write_message(
                termination_message_path, {"result": "failed", "error": f"{type(exc).__name__}: {exc}"[:500]}
            )
            raise
        finally:
            signal.signal(signal.SIGTERM, previous)
            if status is not None:
                status.stop()
        report = outcome.report
        if termination_message_path is not None:
            termination_message_path.write_text(report.summary_json(), encoding="utf-8")
        if dry_run and outcome.plan is not None and not as_json:
            render_plan(outcome.plan, report, Console(soft_wrap=True))
        if as_json:
            typer.echo(report.to_json())
        elif not dry_run:
            _print_report(report)
            if chosen_format.name != ROCKBOT:
                err.print(
                    f"{chosen_format.name} files: {report.units_written} unit(s) written, {report.units_taken_out} "
                    f"taken out (kept in the archive), {report.units_kept_for_agent} the agent removed kept "
                    f"(restorable), {report.units_refused} refused, {report.stale_units} stale copies taken out again"
                )
        if report.result == "failed":
            err.print(f"[red]failed:[/red] {escape(report.error or 'the cycle failed')}")
            raise typer.Exit(EXIT_FAILED)
        if report.result == "proposer-failed":
            err.print(f"[red]proposer failed:[/red] {escape(report.proposer_failure or '')}")
            raise typer.Exit(EXIT_PROPOSER_FAILED)
        if report.pause_marker is not None:
            err.print(f"[yellow]skipped:[/yellow] {escape(report.skip_reason or '')}")
            raise typer.Exit(EXIT_PAUSED)


def _one_message(exc: BaseException) -> str:
    """A settings error as one readable line per problem: pydantic's field paths and messages, without its URLs."""
    if not isinstance(exc, ValidationError):
        return str(exc)
    problems = []
    for error in exc.errors():
        message = str(error["msg"]).removeprefix("Value error, ")
        if error["loc"]:
            where = ".".join(str(part) for part in error["loc"])
            message = f"{where}: {message} (got {error.get('input')!r:.80})"
        problems.append(message)
    return "; ".join(problems)


def _stopped_summary(agent_dir: Path, started: datetime, why: str) -> dict[str, Any]:
    """The termination message of a stopped cycle: the summary of the report it wrote (its counts), else why."""
    reports = sorted(cycles_dir(agent_dir).glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    for path in reports[:1]:
        try:
            report = CycleReport.model_validate_json(read_regular(path, REPORT_LIMIT, follow_symlinks=False))
        except (OSError, ValueError):
            break
        if report.started_at >= started - timedelta(seconds=1) and report.result == "failed":
            return report.summary()
    return {"result": "failed", "error": why}


def _write_message(path: Path | None, data: dict[str, Any]) -> None:
    if path is not None:
        try:
            path.write_text(json.dumps(data), encoding="utf-8")
        except OSError as exc:
            log.warning("could not write the termination message %s: %s", path, exc)


def _print_report(report: CycleReport) -> None:
    render_report(report, Console())
