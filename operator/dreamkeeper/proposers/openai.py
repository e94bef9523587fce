"""The OpenAI-compatible proposer: one Chat Completions request per batch the engine offers, structured output when
the server has it, tolerant parsing when it does not, the client's own retries (``openai_client``), a per-cycle
token budget and exact token accounting from the API's ``usage`` fields. It is untrusted like every proposer: a
reply it cannot read becomes an unusable batch (nothing changes, nothing is stamped reviewed), and the engine
validates everything else.

Frugal by default: only near-duplicate clusters are shown (a lone entry can only be pruned, the action we trust
least), and a small fresh offer is deferred until it is worth a request (see ``openai_defer``).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import openai

from dreamkeeper.consolidation import (
    Batch,
    BatchReply,
    Proposal,
    ProposalRequest,
    ProposerUsage,
    RepairRequest,
    ReplyFault,
)
from dreamkeeper.proposers.config import ProposerConfig, require_api_key
from dreamkeeper.proposers.openai_client import (
    FATAL_STATUS,
    ProposerClient,
    counting,
    describe,
    is_format_rejection,
    is_retryable,
    status_of,
)
from dreamkeeper.proposers.openai_defer import defer_reason, measure
from dreamkeeper.proposers.openai_output import OutputNegotiation, halves, joined, reply_tokens
from dreamkeeper.proposers.openai_parse import ReplyError, parse_proposal, parse_repair, preview
from dreamkeeper.proposers.prompts import (
    REPAIR_DIRECTIVE,
    OutputMode,
    RequestKind,
    repair_message,
    shown_groups,
    system_prompt,
    user_message,
)
from dreamkeeper.proposers.prompts_shaped import (
    cluster_messages,
    parse_cluster,
    parse_review,
    repair_messages,
    review_messages,
    shown_entries,
)

__all__ = ["CallResult", "OpenAIProposer"]

log = logging.getLogger(__name__)

Messages = list[dict[str, str]]
Kind = RequestKind
DEFAULT_CHARS_PER_TOKEN = 4.0
REVIEW_TOKENS_BASE = 32  # {"obsolete": []} and room for a short preamble the parser strips
REVIEW_TOKENS_PER_ENTRY = 4  # a number and its comma


@dataclass
class _Answer:
    """A batch's proposal, or why there is none (the CallResult flags carried along)."""

    proposal: Proposal | None
    error: str | None = None
    invalid: bool = False
    unsent: bool = False
    cut_off: bool = False


@dataclass
class CallResult:
    """The text of a usable completion, or why there is none. ``invalid``: the server answered but the answer is
    unusable (empty, refused, truncated); otherwise the request itself failed."""

    text: str | None
    error: str | None = None
    invalid: bool = False
    unsent: bool = False  # never sent: the budget or an earlier failure stopped this cycle's requests
    cut_off: bool = False  # finish_reason=length: the reply hit max_tokens


class OpenAIProposer:
    name = "openai"

    def __init__(self, config: ProposerConfig) -> None:
        if config.type != "openai" or config.model is None:
            raise ValueError("OpenAIProposer needs a ProposerConfig of type openai with a model")
        require_api_key()
        self.config = config
        self.model = config.model
        self._output = OutputNegotiation(config.output_mode)  # moves on for good when the server rejects a mode
        self._client: ProposerClient | None = None
        self._usage = ProposerUsage()
        self._stopped: str | None = None
        self._reserved = 0  # estimated prompt tokens of requests in flight
        self._chars_sent = 0
        self._usage_estimated = False
        self._logged_calls = 0

    # ---- Proposer protocol -----------------------------------------------------------------------------

    @property
    def output_mode(self) -> OutputMode:
        return self._output.mode

    def usage(self) -> ProposerUsage:
        return self._usage

    async def propose(self, request: ProposalRequest) -> list[BatchReply]:
        """One request per batch (``concurrency`` at a time), replies in batch order. Usage is per cycle: it starts
        again at zero here."""
        self._usage = ProposerUsage()
        self._stopped = None
        self._reserved = 0
        self._logged_calls = 0
        # When clustering failed every entry looks lone; showing them (RockBot's way) beats stamping them unasked.
        singletons = self._singletons(request)
        deferred = defer_reason(
            measure(request, singletons),
            request.now,
            self.config.defer_below_entries,
            timedelta(hours=self.config.defer_max_hours),
        )
        if deferred is not None:
            self._note(deferred)
            log.info("openai proposer: %s", deferred)
            return [self._deferred(batch, singletons) for batch in request.batches]
        system = system_prompt(request.directive, request.memory_rules)
        gate = asyncio.Semaphore(self.config.concurrency)

        async def one(batch: Batch) -> tuple[BatchReply, bool]:
            async with gate:
                return await self._propose_batch(batch, request, system, singletons)

        outcomes = await asyncio.gather(*(one(b) for b in request.batches))
        unsent = sum(1 for _, was_unsent in outcomes if was_unsent)
        if unsent:
            self._note(
                f"{unsent} of {len(request.batches)} batch(es) not sent ({self._stopped}); "
                "their entries stay unreviewed"
            )
        unasked = sum(len(b.entries) - sum(len(g.ids) for g in shown_groups(b, singletons)) for b in request.batches)
        if unasked:
            self._note(f"{unasked} entr(ies) with no near-duplicate reviewed without asking the model")
        self._log_summary(f"{len(request.batches)} batch(es)")
        return [reply for reply, _ in outcomes]

    def _singletons(self, request: ProposalRequest) -> bool:
        """Whether lone entries are shown: as configured, else RockBot's layout shows them and a prune review (the
        clusters shape's batches of lone entries) is not asked for (see ``ProposerConfig.offer_singletons``). When
        clustering failed every entry looks lone: RockBot's layout shows them rather than stamping them unasked."""
        if self.config.offer_singletons is not None:
            return self.config.offer_singletons or request.degraded
        return not any(batch.shape == "review" for batch in request.batches)

    def _deferred(self, batch: Batch, singletons: bool) -> BatchReply:
        # No proposal and no error: the engine changes nothing and stamps nothing, so gating offers it again.
        if shown_groups(batch, singletons):
            return BatchReply(batch.index, None, asked=False)
        return BatchReply(batch.index, Proposal(), asked=False)

    async def _propose_batch(
        self, batch: Batch, request: ProposalRequest, system: str, singletons: bool
    ) -> tuple[BatchReply, bool]:
        """The reply for one batch, and whether it went unsent (budget or endpoint stop). A reply cut off at
        ``max_tokens`` is asked again once, in two halves with the same limit each; cut off again, it is unusable."""
        what = f"batch {batch.index + 1}/{len(request.batches)}"
        shown = [o.entry for g in shown_groups(batch, singletons) for o in batch.entries if o.entry.id in g.ids]
        if not shown:
            # Only lone entries: nothing to merge, and we do not ask for standalone prunes. "No change" is the
            # answer the model would be allowed to give; the engine stamps them reviewed as usual.
            log.debug("%s: %d lone entr(ies), no request", what, len(batch.entries))
            return BatchReply(batch.index, Proposal(), asked=False), False
        if batch.shape == "cluster":
            result = await self._ask_shaped(batch, "cluster", what)
        elif batch.shape == "review":
            result = await self._within_budget(batch, what, lambda part, label: self._ask_shaped(part, "review", label))
        else:
            max_tokens = self._reply_tokens(sum(len(e.content) for e in shown), len(shown))

            async def ask(part: Batch, label: str) -> _Answer:
                answer = await self._ask(part, request, system, singletons, label, max_tokens)
                parts = halves(part, singletons) if answer.cut_off else None
                if parts is None:
                    return answer
                log.info("openai %s: reply cut off at max_tokens=%d; asking again in two halves", label, max_tokens)
                return await self._ask_halves(parts, request, system, singletons, label, max_tokens)

            result = await self._within_budget(batch, what, ask, lambda part: self._offer_chars(part, request, system))
        if result.proposal is None:
            if result.invalid:
                self._invalid("proposal", what, result.error or "unusable reply")
            fault: ReplyFault = "reply" if result.invalid else "request"
            return BatchReply(batch.index, None, result.error, fault), result.unsent
        proposal = result.proposal
        log.debug("%s: proposal with %d merge(s), %d prune(s)", what, len(proposal.to_save), len(proposal.to_delete))
        return BatchReply(batch.index, proposal), False

    async def _within_budget(
        self,
        batch: Batch,
        what: str,
        ask: Callable[[Batch, str], Awaitable[_Answer]],
        chars: Callable[[Batch], int] | None = None,
    ) -> _Answer:
        """``ask`` about the batch, in parts (clusters kept whole) while its prompt would exceed the per-request
        token budget (``request_token_budget``); the parts' proposals joined, an unusable part spoiling the batch."""
        budget = self.config.request_token_budget
        size = chars if chars is not None else (lambda part: sum(len(m["content"]) for m in review_messages(part)))
        parts = halves(batch, True) if budget is not None and self._estimate(size(batch)) > budget else None
        if parts is None:
            return await ask(batch, what)
        log.debug("openai %s: over the %d-token request budget; asked in two parts", what, budget)
        first = await self._within_budget(parts[0], f"{what} (part 1)", ask, chars)
        if first.proposal is None:
            return first
        second = await self._within_budget(parts[1], f"{what} (part 2)", ask, chars)
        if second.proposal is None:
            return second
        return _Answer(joined(first.proposal, second.proposal))

    def _offer_chars(self, batch: Batch, request: ProposalRequest, system: str) -> int:
        return len(system) + len(user_message(batch, request, singletons=True) or "")

    async def _ask_shaped(self, batch: Batch, kind: RequestKind, what: str) -> _Answer:
        """A shaped request (prompts_shaped.py): one component's "same fact?" question, or a prune review."""
        entries = shown_entries(batch)
        if kind == "cluster":
            messages = cluster_messages(batch)
            max_tokens = self._reply_tokens(sum(len(e.content) for e in entries), 1)
        else:
            messages = review_messages(batch)
            max_tokens = self.config.max_output_tokens or REVIEW_TOKENS_BASE + REVIEW_TOKENS_PER_ENTRY * len(entries)
        result = await self._complete(messages, kind, what, max_tokens)
        if result.text is None:
            return _Answer(None, result.error, result.invalid, result.unsent, result.cut_off)
        try:
            parse = parse_cluster if kind == "cluster" else parse_review
            return _Answer(parse(result.text, batch))
        except ReplyError as exc:
            return _Answer(None, str(exc), invalid=True)

    async def _ask_halves(
        self,
        parts: tuple[Batch, Batch],
        request: ProposalRequest,
        system: str,
        singletons: bool,
        what: str,
        max_tokens: int,
    ) -> _Answer:
        """Both halves' proposals joined; an unusable first half spoils the batch, so the second is not asked."""
        first = await self._ask(parts[0], request, system, singletons, f"{what} (first half)", max_tokens)
        if first.proposal is not None:
            second = await self._ask(parts[1], request, system, singletons, f"{what} (second half)", max_tokens)
            if second.proposal is not None:
                return _Answer(joined(first.proposal, second.proposal))
            first = second
        first.error = f"asked again in halves: {first.error}"
        return first

    async def _ask(
        self, batch: Batch, request: ProposalRequest, system: str, singletons: bool, what: str, max_tokens: int
    ) -> _Answer:
        """One request for ``batch`` and its parsed proposal; unusable replies are counted by the caller."""
        offer = user_message(batch, request, singletons=singletons)
        assert offer is not None  # the caller only asks about batches with something to show
        messages = [{"role": "system", "content": system}, {"role": "user", "content": offer}]
        result = await self._complete(messages, "proposal", what, max_tokens)
        if result.text is None:
            return _Answer(None, result.error, result.invalid, result.unsent, result.cut_off)
        try:
            return _Answer(parse_proposal(result.text))
        except ReplyError as exc:
            return _Answer(None, str(exc), invalid=True)

    async def repair(self, request: RepairRequest) -> str | None:
        if request.shape == "cluster":
            messages = repair_messages(request)  # the same short shape the merge was asked in
        else:
            messages = [
                {"role": "system", "content": REPAIR_DIRECTIVE},
                {"role": "user", "content": repair_message(request)},
            ]
        what = f"repair of [{', '.join(s.id for s in request.sources)}]"
        sources = [request.merge.content, *(s.content for s in request.sources)]
        max_tokens = self._reply_tokens(max(len(t) for t in sources) + sum(map(len, request.missing)), 1)
        result = await self._complete(messages, "repair", what, max_tokens)
        if result.text is None:
            if result.invalid:
                self._invalid("repair", what, result.error or "unusable reply")
            return None
        try:
            return parse_repair(result.text)
        except ReplyError as exc:
            self._invalid("repair", what, str(exc))
            return None

    async def aclose(self) -> None:
        if self._usage.calls > self._logged_calls:
            self._log_summary("cycle total")
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()

    # ---- one request, with retries, format fallback and budget -------------------------------------------

    def _client_for_cycle(self) -> ProposerClient:
        if self._client is None:
            c = self.config
            self._client = ProposerClient(c.base_url, c.timeout, c.max_retries, c.retry_after_max)
        return self._client

    async def _complete(self, messages: Messages, kind: Kind, what: str, max_tokens: int) -> CallResult:
        """One call: the client retries what is worth retrying; a rejected output mode is sent again in the next."""
        while True:
            if self._stopped:
                return CallResult(None, self._stopped, unsent=True)
            reserve = self._reserve(messages, max_tokens)
            if reserve is None:
                return CallResult(None, self._stopped, unsent=True)
            sent_step = self._output.step
            started = time.monotonic()
            failure: openai.OpenAIError | None = None
            with counting() as attempts:
                try:
                    response = await self._client_for_cycle().openai.chat.completions.create(
                        **self._request_args(messages, kind, max_tokens)
                    )
                except openai.OpenAIError as exc:
                    failure = exc
            self._reserved -= reserve
            self._usage.calls += attempts.sent
            if failure is None:
                self._usage.failed_calls += attempts.sent - 1
                return self._read(response, messages, what, time.monotonic() - started, max_tokens)
            log.debug("openai %s: %s after %.2fs", what, describe(failure), time.monotonic() - started)
            if is_format_rejection(failure) and (sent_step != self._output.step or self._downgrade(failure)):
                # The negotiation, not a failure: the server refused only the output mode (issue 23: every cycle
                # against llama.cpp reported one failed call for it). Counted apart; the same request goes again.
                self._usage.failed_calls += attempts.sent - 1
                self._usage.format_refusals += 1
                continue
            self._usage.failed_calls += attempts.sent
            return self._failed(failure, kind, what, retries=attempts.sent - 1)

    def _failed(self, exc: openai.OpenAIError, kind: Kind, what: str, retries: int) -> CallResult:
        """Why the call failed; a failure that will repeat (endpoint down, throttled past our patience, refusing
        us) stops this cycle's requests, so the remaining batches wait for the next cycle."""
        stop = is_retryable(exc) or status_of(exc) in FATAL_STATUS
        if not is_retryable(exc):
            reason = "not retryable"
        else:
            client = self._client_for_cycle()
            asked = client.retry_after(exc.response.headers) if isinstance(exc, openai.APIStatusError) else None
            if asked is not None and asked > client.retry_after_max:
                reason = f"server asked to wait {asked:.0f}s, over the {client.retry_after_max:.0f}s limit"
            else:
                reason = f"gave up after {retries} retr{'y' if retries == 1 else 'ies'}"
        error = f"{describe(exc)}; {reason}"
        if stop and not self._stopped:
            self._stopped = f"endpoint unavailable: {error}"
            self._note(self._stopped)
            log.warning("openai %s failed, no more requests this cycle: %s", what, error)
        else:
            # A batch's failure is logged by the engine with the batch's error; only a repair's is logged here.
            log.log(logging.WARNING if kind == "repair" else logging.DEBUG, "openai %s failed: %s", what, error)
        return CallResult(None, error)

    def _request_args(self, messages: Messages, kind: Kind, max_tokens: int) -> dict[str, Any]:
        args: dict[str, Any] = {"model": self.model, "messages": messages, "max_tokens": max_tokens}
        fmt = self._output.response_format(kind)
        if fmt is not None:
            args["response_format"] = fmt
        if self.config.temperature is not None:
            args["temperature"] = self.config.temperature
        return args

    def _reply_tokens(self, content_chars: int, entries: int) -> int:
        return reply_tokens(self._estimate(content_chars), entries, self.config.max_output_tokens)

    def _downgrade(self, exc: BaseException) -> bool:
        old = self._output.describe()
        if not self._output.downgrade():
            return False
        self._note(f"server rejected response_format {old} ({describe(exc)}); using {self._output.describe()} now")
        log.warning("openai: %s", self._usage.notes[-1])
        return True

    def _read(self, response: Any, messages: Messages, what: str, elapsed: float, max_tokens: int) -> CallResult:
        choice = response.choices[0] if response.choices else None
        message = choice.message if choice is not None else None
        content: str | None = message.content if message is not None else None
        finish = getattr(choice, "finish_reason", None)
        self._account(response, sum(len(m["content"]) for m in messages), content, what, finish, elapsed)
        if message is None:
            return CallResult(None, "reply has no choices", invalid=True)
        if getattr(message, "refusal", None):
            return CallResult(None, f"model refused: {preview(message.refusal)}", invalid=True)
        if finish == "length":
            why = (
                f"reply cut off at the output limit (finish_reason=length, max_tokens={max_tokens}): {preview(content)}"
            )
            return CallResult(None, why, invalid=True, cut_off=True)
        if finish == "content_filter":
            return CallResult(None, "reply withheld by the server's content filter", invalid=True)
        if not content or not content.strip():
            return CallResult(None, "empty reply", invalid=True)
        return CallResult(content)

    def _account(
        self, response: Any, prompt_chars: int, content: str | None, what: str, finish: str | None, elapsed: float
    ) -> None:
        """Tokens from the response's ``usage``; a server that reports none is estimated, and the report says so."""
        usage = getattr(response, "usage", None)
        if usage is not None and usage.prompt_tokens is not None:
            input_tokens, output_tokens = int(usage.prompt_tokens), int(usage.completion_tokens or 0)
        else:
            if not self._usage_estimated:
                self._usage_estimated = True
                self._note("server reported no token usage; tokens estimated at ~4 characters per token")
            input_tokens, output_tokens = self._estimate(prompt_chars), self._estimate(len(content or ""))
        self._usage.input_tokens += input_tokens
        self._usage.output_tokens += output_tokens
        self._chars_sent += prompt_chars
        self._price(getattr(response, "model", None))
        log.debug(
            "openai %s: %d in / %d out tokens, finish=%s, mode=%s, %.2fs",
            what,
            input_tokens,
            output_tokens,
            finish,
            self._output.describe(),
            elapsed,
        )

    def _invalid(self, kind: Kind, what: str, why: str) -> None:
        """Count an unusable reply. A batch's is logged by the engine (with the batch's error), once; a repair's
        has no such log, so it is logged here."""
        self._usage.invalid_replies += 1
        level = logging.WARNING if kind == "repair" else logging.DEBUG
        log.log(level, "openai %s: unusable reply, nothing changes for it — %s", what, why)

    # ---- budget, cost, notes -------------------------------------------------------------------------------

    def _estimate(self, chars: int) -> int:
        """Prompt tokens for ``chars`` characters, calibrated on what the server has reported so far."""
        ratio = 1 / DEFAULT_CHARS_PER_TOKEN
        if self._chars_sent and self._usage.input_tokens and not self._usage_estimated:
            ratio = self._usage.input_tokens / self._chars_sent
        return math.ceil(chars * ratio)

    def _reserve(self, messages: Messages, max_tokens: int) -> int | None:
        """Tokens set aside for a request about to be sent, its prompt and the most it may generate (so neither
        its reply nor concurrent requests can overrun the budget); None when it would not fit, which stops
        further requests this cycle."""
        needed = self._estimate(sum(len(m["content"]) for m in messages)) + max_tokens
        budget = self.config.token_budget
        if budget is None:
            return 0
        used = self._usage.input_tokens + self._usage.output_tokens + self._reserved
        if used + needed > budget:
            self._usage.budget_exhausted = True
            self._stopped = f"token budget of {budget} reached ({used} used or in flight, next request ~{needed})"
            self._note(f"{self._stopped}; what was already validated is kept")
            log.warning("openai: %s", self._stopped)
            return None
        self._reserved += needed
        return needed

    def _price(self, served_model: str | None) -> None:
        price = self.config.price(self.config.model, served_model)
        if price is not None:
            self._usage.estimated_cost = price.cost(self._usage.input_tokens, self._usage.output_tokens)
        elif self.config.prices and not any("no price for model" in n for n in self._usage.notes):
            self._note(f"no price for model {self.config.model!r} in the price table; cost not estimated")

    def _note(self, text: str) -> None:
        if text not in self._usage.notes:
            self._usage.notes.append(text)

    def _log_summary(self, scope: str) -> None:
        u = self._usage
        self._logged_calls = u.calls
        cost = f", estimated cost {u.estimated_cost:.4f}" if u.estimated_cost is not None else ""
        log.info(
            "openai proposer (%s, %s output) %s: %d request(s), %d input / %d output tokens, %d unusable "
            "repl(ies), %d failed request(s)%s%s",
            self.config.model,
            self._output.describe(),
            scope,
            u.calls,
            u.input_tokens,
            u.output_tokens,
            u.invalid_replies,
            u.failed_calls,
            cost,
            " — token budget exhausted" if u.budget_exhausted else "",
        )
