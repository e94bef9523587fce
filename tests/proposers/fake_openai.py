"""A local stand-in for an OpenAI-compatible Chat Completions endpoint, for tests and the token bench.

It speaks the real wire protocol on 127.0.0.1 (``POST /v1/chat/completions``), so the official ``openai`` client
runs unmodified against it. Replies are scripted: a queue of :class:`Reply` objects, then an optional responder
callable; every request is recorded. Token usage is reported with :func:`estimate_tokens`, so tests can check that
what the proposer accounts for is exactly what the server said.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def estimate_tokens(text: str) -> int:
    """~4 characters per token: the same rule everywhere the fake server reports usage."""
    return math.ceil(len(text) / 4) if text else 0


@dataclass
class Reply:
    """One scripted response. ``content`` is the assistant message; ``body`` overrides the whole JSON body."""

    content: str | None = ""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    finish_reason: str = "stop"
    refusal: str | None = None
    body: Any = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    include_usage: bool = True
    no_choices: bool = False

    @classmethod
    def json(cls, obj: Any, **kwargs: Any) -> Reply:
        return cls(content=json.dumps(obj), **kwargs)

    @classmethod
    def error(cls, status: int, message: str, headers: dict[str, str] | None = None, **kwargs: Any) -> Reply:
        body = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}
        return cls(content=None, status=status, body=body, headers=headers or {}, **kwargs)


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    received_at: float
    status: int = 0  # the status the server answered with (0 until answered)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    @property
    def prompt_text(self) -> str:
        return "\n".join(str(m.get("content") or "") for m in self.messages)

    @property
    def user_text(self) -> str:
        return "\n".join(str(m.get("content") or "") for m in self.messages if m.get("role") == "user")

    @property
    def response_format(self) -> str | None:
        fmt = self.body.get("response_format")
        return str(fmt.get("type")) if isinstance(fmt, dict) else None


Responder = Callable[[RecordedRequest], Reply]


class FakeOpenAIServer:
    """``with FakeOpenAIServer() as server: server.script(Reply.json({...})); ... server.base_url``"""

    def __init__(self, responder: Responder | None = None, reject_formats: set[str] | None = None) -> None:
        self.responder = responder
        # response_format types answered with a 400 that names the parameter, like servers without schema support
        self.reject_formats = set(reject_formats or ())
        self.requests: list[RecordedRequest] = []
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- scripting -------------------------------------------------------------------------------------

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    @property
    def completions(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def _next_reply(self, request: RecordedRequest) -> Reply:
        fmt = request.response_format
        if fmt is not None and fmt in self.reject_formats:
            return Reply.error(400, f"Invalid parameter: 'response_format' of type '{fmt}' is not supported.")
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self.responder is not None:
            return self.responder(request)
        return Reply.error(
            500,
            "the fake server has no scripted reply left",
        )

    # ---- lifecycle -------------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeOpenAIServer:
        server = self

        class Handler(_Handler):
            fake = server

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers sleeping on a scripted delay
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._httpd = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    fake: FakeOpenAIServer
    protocol_version = "HTTP/1.1"
    timeout = 30  # idle keep-alive connections give their thread back

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"_unparseable": raw.decode("utf-8", "replace")}
        request = RecordedRequest(self.path, {k.lower(): v for k, v in self.headers.items()}, body, time.monotonic())
        with self.fake._lock:
            self.fake.requests.append(request)
        if not self.path.endswith("/chat/completions"):
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}}, {})
            return
        reply = self.fake._next_reply(request)
        if reply.delay and self.fake._stopping.wait(reply.delay):
            return
        request.status = reply.status
        self._send(reply.status, reply.body if reply.body is not None else _completion(request, reply), reply.headers)

    def _send(self, status: int, body: Any, headers: dict[str, str]) -> None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout): exactly what a slow-reply test provokes


def _completion(request: RecordedRequest, reply: Reply) -> dict[str, Any]:
    prompt = reply.prompt_tokens if reply.prompt_tokens is not None else estimate_tokens(request.prompt_text)
    completion = reply.completion_tokens
    if completion is None:
        completion = estimate_tokens(reply.content or "")
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.refusal is not None:
        message["refusal"] = reply.refusal
    out: dict[str, Any] = {
        "id": f"chatcmpl-fake-{len(request.body)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(request.body.get("model", "fake")),
        "choices": []
        if reply.no_choices
        else [{"index": 0, "message": message, "finish_reason": reply.finish_reason, "logprobs": None}],
    }
    if reply.include_usage:
        out["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    return out
