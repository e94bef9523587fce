"""Our retry policy (the client's own is switched off so this one is explicit and testable): which failures are
worth another try, and how long to wait — the server's ``Retry-After`` when it gives one, else exponential
backoff with jitter."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import openai

RETRYABLE_STATUS = frozenset({408, 409, 429})
FATAL_STATUS = frozenset({401, 403, 404})  # every later request would fail the same way
FORMAT_WORDS = ("response_format", "json_schema", "json_object", "structured output", "schema")


def retry_after_seconds(headers: Mapping[str, str], now: datetime | None = None) -> float | None:
    """``retry-after-ms``, else ``retry-after`` as seconds or an HTTP date; None when absent or unreadable."""
    lowered = {k.lower(): v for k, v in headers.items()}
    raw_ms = lowered.get("retry-after-ms")
    if raw_ms is not None:
        try:
            value = float(raw_ms) / 1000
            if math.isfinite(value):
                return max(0.0, value)
        except ValueError:
            pass
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    try:
        value = float(raw)
        return max(0.0, value) if math.isfinite(value) else None
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def status_of(exc: BaseException) -> int | None:
    return exc.status_code if isinstance(exc, openai.APIStatusError) else None


def is_retryable(exc: BaseException) -> bool:
    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return True
    status = status_of(exc)
    return status is not None and (status in RETRYABLE_STATUS or status >= 500)


def is_format_rejection(exc: BaseException) -> bool:
    """A 400/422 that names the structured-output parameter: the server does not support that response_format."""
    status = status_of(exc)
    if status not in (400, 422):
        return False
    assert isinstance(exc, openai.APIStatusError)
    text = f"{exc.message} {exc.body}".lower()
    return any(word in text for word in FORMAT_WORDS)


def describe(exc: BaseException) -> str:
    status = status_of(exc)
    if isinstance(exc, openai.APITimeoutError):
        return "request timed out"
    if isinstance(exc, openai.APIConnectionError):
        return f"connection failed ({exc.__cause__ or exc})"
    if status is not None:
        assert isinstance(exc, openai.APIStatusError)
        message = exc.message
        return f"HTTP {status}: {message[:200]}"
    return f"{type(exc).__name__}: {str(exc)[:200]}"


@dataclass
class RetryDecision:
    retry: bool
    delay: float = 0.0
    reason: str = ""


def decide(
    exc: BaseException,
    attempt: int,
    max_retries: int,
    ceiling: float,
    retry_after_max: float,
    rng: random.Random,
) -> RetryDecision:
    """Retry ``attempt`` (0-based count of retries already made)? The server's Retry-After wins over backoff."""
    if not is_retryable(exc):
        return RetryDecision(False, reason="not retryable")
    if attempt >= max_retries:
        return RetryDecision(False, reason=f"gave up after {max_retries} retr{'y' if max_retries == 1 else 'ies'}")
    asked = None
    if isinstance(exc, openai.APIStatusError):
        asked = retry_after_seconds(exc.response.headers)
    if asked is not None:
        if asked > retry_after_max:
            return RetryDecision(
                False, reason=f"server asked to wait {asked:.0f}s, over the {retry_after_max:.0f}s limit"
            )
        return RetryDecision(True, asked, "Retry-After")
    # "Equal jitter": at least half the ceiling, so retries still back off, but clients do not stampede in step.
    return RetryDecision(True, ceiling / 2 + rng.random() * ceiling / 2, "backoff")
