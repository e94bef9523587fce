"""A minimal JSON client for the Kubernetes API (urllib + TLS), used by the test infrastructure itself.

The fixtures and the node agent speak raw JSON (camelCase dicts exactly as the API serves them) rather than the
`kubernetes` client's typed models: a kubelet-like agent manipulates Pod status as documents, and this keeps
the infrastructure independent of the client library's version. Tests get a `kubernetes` ApiClient as well.
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

Obj = dict[str, Any]

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"


class ApiError(RuntimeError):
    """A non-2xx answer; `status` is the HTTP code and `body` the decoded Status object (or raw text)."""

    def __init__(self, method: str, path: str, status: int, body: Obj | str) -> None:
        self.status = status
        self.body = body
        self.message = body.get("message", "") if isinstance(body, dict) else body
        super().__init__(f"{method} {path} -> {status}: {self.message}")


@dataclass
class KubeApi:
    server: str
    ca_file: Path
    client_cert: tuple[Path, Path] | None = None  # (cert, key)
    token: str | None = None
    timeout: float = 30.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @cached_property
    def _ssl(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        if self.client_cert:
            ctx.load_cert_chain(str(self.client_cert[0]), str(self.client_cert[1]))
        return ctx

    def _url(self, path: str, params: Mapping[str, Any] | None) -> str:
        query = urllib.parse.urlencode({k: v for k, v in (params or {}).items() if v is not None})
        return f"{self.server}{path}" + (f"?{query}" if query else "")

    def _open(
        self,
        method: str,
        path: str,
        body: Obj | None,
        params: Mapping[str, Any] | None,
        content_type: str,
        timeout: float,
    ) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self._url(path, params), data=data, method=method)
        request.add_header("Accept", "application/json, */*")
        if data is not None:
            request.add_header("Content-Type", content_type)
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        with self._lock:
            context = self._ssl
        try:
            return urllib.request.urlopen(request, context=context, timeout=timeout)
        except urllib.error.HTTPError as exc:
            raw = exc.read().decode(errors="replace")
            try:
                decoded: Obj | str = json.loads(raw)
            except ValueError:
                decoded = raw
            raise ApiError(method, path, exc.code, decoded) from None

    def request(
        self,
        method: str,
        path: str,
        body: Obj | None = None,
        *,
        params: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
    ) -> Obj:
        with self._open(method, path, body, params, content_type, self.timeout) as response:
            raw = response.read()
        return dict(json.loads(raw)) if raw else {}

    def request_text(self, method: str, path: str, *, params: Mapping[str, Any] | None = None) -> str:
        """A plain-text answer: a pod's log, a node's metrics through the apiserver's proxy."""
        with self._open(method, path, None, params, "application/json", self.timeout) as response:
            return str(response.read().decode(errors="replace"))

    def get(self, path: str, **params: Any) -> Obj:
        return self.request("GET", path, params=params)

    def get_or_none(self, path: str) -> Obj | None:
        try:
            return self.get(path)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def create(self, path: str, body: Obj) -> Obj:
        return self.request("POST", path, body)

    def patch(self, path: str, body: Obj, content_type: str = MERGE_PATCH) -> Obj:
        return self.request("PATCH", path, body, content_type=content_type)

    def delete(self, path: str, body: Obj | None = None, **params: Any) -> Obj:
        return self.request("DELETE", path, body, params=params)

    def watch(self, path: str, resource_version: str, timeout_seconds: int = 10, **params: Any) -> Watch:
        """Watch events (dicts with `type` and `object`) until the server ends the watch after timeout_seconds
        or `close()` is called (from any thread)."""
        query = {
            **params,
            "watch": "1",
            "resourceVersion": resource_version,
            "timeoutSeconds": timeout_seconds,
            "allowWatchBookmarks": "true",
        }
        return Watch(self._open("GET", path, None, query, "", timeout_seconds + 15))


class Watch:
    """An open watch stream; iterate for events. `close()` unblocks a reader in another thread, so a watcher
    can be stopped at once (kube-apiserver otherwise waits for open watches when it shuts down)."""

    def __init__(self, response: Any) -> None:
        self._response = response

    def __iter__(self) -> Iterator[Obj]:
        with self._response:
            for line in self._response:
                if line.strip():
                    yield dict(json.loads(line))

    def close(self) -> None:
        sock = getattr(getattr(getattr(self._response, "fp", None), "raw", None), "_sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(Exception):
            self._response.close()


def namespaced(namespace: str, resource: str, name: str = "", *, group: str = "", version: str = "v1") -> str:
    """URL path of a namespaced resource: `namespaced("ns", "pods", "p")` -> /api/v1/namespaces/ns/pods/p."""
    prefix = f"/apis/{group}/{version}" if group else f"/api/{version}"
    return f"{prefix}/namespaces/{namespace}/{resource}" + (f"/{name}" if name else "")
