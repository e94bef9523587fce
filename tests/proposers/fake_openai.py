"""A local stand-in for an OpenAI-compatible Chat Completions endpoint, for tests and the token bench.

It speaks the real wire protocol on 127.0.0.1 (``POST /v1/chat/completions``), so the official ``openai`` client
runs unmodified against it. Replies are scripted: a queue of :class:`Reply` objects, then an optional responder
callable; every request is recorded. Token usage is reported with :func:`estimate_tokens`, so tests can check that
what the proposer accounts for is exactly what the server said.

Structured output is answered like the server being imitated: ``reject_formats`` names the ``response_format``
kinds it refuses (``json_schema``, ``json_object``, or ``json_object+schema`` for a json_object that carries a
schema), with OpenAI's HTTP 400 by default, or — :meth:`FakeOpenAIServer.like_llama_cpp` — with the HTTP 500 that
llama-cpp-python's server sends for ``json_schema`` (its request model only knows ``text`` and ``json_object``;
a pydantic validation error becomes a 500), while it accepts ``{"type": "json_object", "schema": …}``.
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
    def error(
        cls,
        status: int,
        message: str,
        headers: dict[str, str] | None = None,
        error_type: str = "invalid_request_error",
        **kwargs: Any,
    ) -> Reply:
        body = {"error": {"message": message, "type": error_type, "param": None, "code": None}}
        return cls(content=None, status=status, body=body, headers=headers or {}, **kwargs)


def llama_cpp_format_error(fmt: str) -> Reply:
    """llama-cpp-python 0.3.36's answer to an unsupported response_format type, as its server sent it (the file
    path shortened): HTTP 500, the pydantic validation error as the message."""
    message = (
        "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
        f"'msg': \"Input should be 'text' or 'json_object'\", 'input': '{fmt}', "
        "'ctx': {'expected': \"'text' or 'json_object'\"}}\n\n"
        '  File "llama_cpp/server/app.py", line 376, in create_chat_completion\n    POST /v1/chat/completions'
    )
    return Reply.error(500, message, error_type="internal_server_error")


def openai_format_error(fmt: str) -> Reply:
    return Reply.error(400, f"Invalid parameter: 'response_format' of type '{fmt}' is not supported.")


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
        """The response_format type, ``json_object+schema`` for a json_object that carries a schema."""
        fmt = self.body.get("response_format")
        if not isinstance(fmt, dict):
            return None
        kind = str(fmt.get("type"))
        return f"{kind}+schema" if kind == "json_object" and "schema" in fmt else kind


Responder = Callable[[RecordedRequest], Reply]


class FakeOpenAIServer:
    """``with FakeOpenAIServer() as server: server.script(Reply.json({...})); ... server.base_url``"""

    def __init__(
        self,
        responder: Responder | None = None,
        reject_formats: set[str] | None = None,
        rejection: Callable[[str], Reply] = openai_format_error,
    ) -> None:
        self.responder = responder
        # response_format kinds answered with an error that names the parameter, like servers without that support
        self.reject_formats = set(reject_formats or ())
        self.rejection = rejection
        self.requests: list[RecordedRequest] = []
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @classmethod
    def like_llama_cpp(cls, responder: Responder | None = None) -> FakeOpenAIServer:
        return cls(responder, reject_formats={"json_schema"}, rejection=llama_cpp_format_error)

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
        if fmt is not None and {fmt, fmt.split("+")[0]} & self.reject_formats:
            return self.rejection(fmt.split("+")[0])
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
