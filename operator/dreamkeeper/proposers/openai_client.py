"""The HTTP side of the OpenAI proposer: the ``openai`` client and its own retry machinery.

The client already retries what is worth retrying (connection errors, timeouts, 408, 409, 429, 5xx) with
exponential backoff and jitter, waits what the server asks (``retry-after-ms``, ``retry-after`` as seconds or an
HTTP date, up to two minutes) and obeys the server's ``x-should-retry``. We add only what it cannot know, through
httpx event hooks (public httpx API) and that one header it already obeys:

- a status whose body names ``response_format`` is a server that does not support the output mode we asked for
  (llama.cpp's server answers an unsupported one with HTTP 500): never retried, the proposer moves to the next
  mode at once;
- a ``Retry-After`` longer than our patience is not waited for;
- a request that timed out after it was sent is not retried: a server that cannot cancel a non-streaming request
  (llama.cpp's) is still generating it, and a retry queues behind that runaway generation (issue 18 finding 4: a
  Gemma 3 request generated for 15 minutes, its retry behind it). A connect or pool timeout reached no server and
  is retried as before;
- every attempt is counted against the call that made it (a context variable: the hooks run in the caller's
  task), so the report's request and failure counts include the client's retries.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

import httpx2  # the transport the openai client is built on (openai.DefaultAsyncHttpxClient is an httpx2 client)
import openai
from openai import AsyncOpenAI
from openai._constants import DEFAULT_CONNECTION_LIMITS

FATAL_STATUS = frozenset({401, 403, 404})  # every later request would fail the same way
FORMAT_WORDS = ("response_format", "json_schema", "json_object")
MAX_RETRY_AFTER = 120.0  # the client never waits longer than this (openai._constants.MAX_RETRY_AFTER_DELAY)
NO_RETRY = "x-should-retry"


class _Request(Protocol):
    @property
    def content(self) -> bytes: ...


class _Response(Protocol):
    """What the hooks read of an httpx response (``httpx`` or ``httpx2``, whichever the client is built on)."""

    @property
    def status_code(self) -> int: ...
    @property
    def headers(self) -> Any: ...
    @property
    def request(self) -> _Request: ...
    @property
    def text(self) -> str: ...
    async def aread(self) -> bytes: ...


@dataclass
class Attempts:
    """HTTP attempts of one logical call (the first try and the client's retries)."""

    sent: int = 0


_current: ContextVar[Attempts | None] = ContextVar("dreamkeeper_openai_attempts", default=None)


@contextmanager
def counting() -> Iterator[Attempts]:
    attempts = Attempts()
    token = _current.set(attempts)
    try:
        yield attempts
    finally:
        _current.reset(token)


def names_response_format(text: str) -> bool:
    lowered = text.lower()
    return any(word in lowered for word in FORMAT_WORDS)


class _SentTimeoutsNotRetried(httpx2.AsyncBaseTransport):
    """Raises a read or write timeout as the client's own ``APITimeoutError``, which it propagates without retrying
    (an ``OpenAIError`` from the transport is passed through as is); a connect or pool timeout stays retryable."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            return await self.inner.handle_async_request(request)
        except (httpx2.ReadTimeout, httpx2.WriteTimeout) as exc:
            raise openai.APITimeoutError(request=request) from exc

    async def aclose(self) -> None:
        await self.inner.aclose()


class ProposerClient:
    """An ``AsyncOpenAI`` whose retries follow the proposer's config; build one per cycle, close it after."""

    def __init__(self, base_url: str | None, timeout: float, max_retries: int, retry_after_max: float) -> None:
        self.retry_after_max = min(retry_after_max, MAX_RETRY_AFTER)
        http_client = openai.DefaultAsyncHttpxClient(
            transport=_SentTimeoutsNotRetried(httpx2.AsyncHTTPTransport(limits=DEFAULT_CONNECTION_LIMITS)),
            event_hooks={"request": [self._on_request], "response": [self._on_response]},
        )
        self.openai = AsyncOpenAI(base_url=base_url, timeout=timeout, max_retries=max_retries, http_client=http_client)

    async def close(self) -> None:
        await self.openai.close()

    def retry_after(self, headers: Any) -> float | None:
        """The wait the server asked for, read by the client's own parser (the one its retries use)."""
        value = self.openai._parse_retry_after_header(headers)
        return None if value is None else max(0.0, float(value))

    async def _on_request(self, request: Any) -> None:
        attempts = _current.get()
        if attempts is not None:
            attempts.sent += 1

    async def _on_response(self, response: _Response) -> None:
        if response.status_code < 400:
            return
        await response.aread()  # the body is not read yet inside a hook; the client reads it again for free
        if b'"response_format"' in response.request.content and names_response_format(response.text):
            response.headers[NO_RETRY] = "false"
            return
        asked = self.retry_after(response.headers)
        if asked is not None and asked > self.retry_after_max:
            response.headers[NO_RETRY] = "false"


def status_of(exc: BaseException) -> int | None:
    return exc.status_code if isinstance(exc, openai.APIStatusError) else None


def is_format_rejection(exc: BaseException) -> bool:
    """A client or server error that names the structured-output parameter: the server does not support the
    ``response_format`` we sent (400/422 from most servers, 500 from llama.cpp's)."""
    if not isinstance(exc, openai.APIStatusError):
        return False
    sent = exc.response.request.content
    return b'"response_format"' in sent and names_response_format(f"{exc.message} {exc.body}")


def is_retryable(exc: BaseException) -> bool:
    """What the client retries by itself (so it did, as often as it was allowed, before raising)."""
    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return True
    status = status_of(exc)
    return status is not None and (status in (408, 409, 429) or status >= 500)


def describe(exc: BaseException) -> str:
    status = status_of(exc)
    if isinstance(exc, openai.APITimeoutError):
        return "request timed out"
    if isinstance(exc, openai.APIConnectionError):
        return f"connection failed ({exc.__cause__ or exc})"
    if status is not None:
        assert isinstance(exc, openai.APIStatusError)
        return f"HTTP {status}: {exc.message[:200]}"
    return f"{type(exc).__name__}: {str(exc)[:200]}"
