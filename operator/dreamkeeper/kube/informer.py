"""List-then-watch caches of the objects every pass reads (cycle Jobs by claim, PersistentVolumeClaims), as
client-go's informers keep them, so a pass reads memory instead of the API server.

Why: a pass used to list its claim's Jobs and get its claim every time (plus a second pass for each claim the PVC
watch's initial listing woke). At 5,000 schedules with a few history Jobs each, every label-selected Job list is a
scan of the namespace's 10,000+ Jobs in the API server's cache, once per schedule per pass.

``Store`` is the cache: objects by (namespace, name), projected to the fields the operator reads (a Job's pod
template and managedFields are most of its bytes), indexed by a key (the claim), updated only by a newer
resourceVersion so a late watch event never replaces what this process wrote itself. ``Informer`` fills a store
from one list (in pages) and one watch per namespace scope, in a thread; on 410 Gone or an error it lists again.
Until its first list is in (``synced``), readers fall back to the API server: the cache is never a source of
"absent" before it has seen everything.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, cast

from dreamkeeper.kube.objects import Body

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, name)
Project = Callable[[Body], Body]
OnChange = Callable[[Body | None, Body | None], None]  # (before, after); None: absent

PAGE_SIZE = 500
WATCH_SECONDS = 300  # the server ends a watch after this; it is resumed from the last resourceVersion
BACKOFF_SECONDS = (1.0, 2.0, 5.0, 10.0, 30.0)


def _version(obj: Body | None) -> int | None:
    raw = (obj or {}).get("metadata", {}).get("resourceVersion")
    return int(raw) if isinstance(raw, str) and raw.isdigit() else None


def _newer(candidate: Body, current: Body | None) -> bool:
    """Whether ``candidate`` may replace ``current``. resourceVersions are etcd revisions on every API server this
    runs against, so they order; one that is not a number is taken as newer (the watch's order then decides)."""
    new, old = _version(candidate), _version(current)
    return new is None or old is None or new >= old


def key_of(obj: Body) -> Key:
    meta = obj["metadata"]
    return str(meta.get("namespace") or ""), str(meta["name"])


class Store:
    """Objects by (namespace, name), and by an index key; thread-safe (the watch thread writes, passes read)."""

    def __init__(self, project: Project, index: Callable[[Body], str | None] | None = None) -> None:
        self._project = project
        self._index_of = index
        self._objects: dict[Key, Body] = {}
        self._index: dict[tuple[str, str], set[str]] = {}  # (namespace, index key) -> names
        self._gone: dict[Key, int] = {}  # deleted by this process: the version it last knew
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._objects)

    def get(self, namespace: str, name: str) -> Body | None:
        with self._lock:
            return self._objects.get((namespace, name))

    def indexed(self, namespace: str, index_key: str) -> list[Body]:
        with self._lock:
            names = self._index.get((namespace, index_key), set())
            return [self._objects[(namespace, name)] for name in sorted(names)]

    def put(self, raw: Body, *, by_us: bool = False) -> tuple[Body | None, Body | None]:
        """Store ``raw`` (projected) unless what is stored is newer. Returns (before, after) when it changed.
        ``by_us``: this process just wrote it (the API server's answer), which no earlier deletion can outdate."""
        obj = self._project(raw)
        key = key_of(obj)
        with self._lock:
            before = self._objects.get(key)
            if not _newer(obj, before):
                return before, before
            if key in self._gone:
                version = _version(obj)
                if not by_us and (version is None or version <= self._gone[key]):
                    return None, None  # a late event about an object this process deleted
                del self._gone[key]  # created again since
            self._unindex(key, before)
            self._objects[key] = obj
            self._reindex(key, obj)
            return before, obj

    def remove(self, namespace: str, name: str, *, by_us: bool = False) -> Body | None:
        """Drop the object; ``by_us``: this process deleted it, so late watch events about it (a resourceVersion
        up to the one it last knew) are ignored. An object it never saw leaves nothing to revive: no record."""
        key = (namespace, name)
        with self._lock:
            before = self._objects.pop(key, None)
            self._unindex(key, before)
            version = _version(before)
            if by_us and version is not None:
                self._gone[key] = version
            else:
                self._gone.pop(key, None)
            return before

    def replace(self, raws: list[Body], version: str | None = None) -> list[tuple[Body | None, Body | None]]:
        """A fresh list (taken at resourceVersion ``version``): the store becomes it, except for what this process
        wrote through after that snapshot (a Job created, patched or deleted while the list was being read), which
        the watch from ``version`` will confirm. Returns what changed, as (before, after) pairs."""
        listed = int(version) if version and version.isdigit() else None
        fresh = {key_of(obj): obj for obj in (self._project(raw) for raw in raws)}
        with self._lock:
            old = self._objects
            for key, mine in old.items():
                theirs = fresh.get(key)
                if theirs is None:
                    mine_version = _version(mine)
                    if listed is not None and mine_version is not None and mine_version > listed:
                        fresh[key] = mine  # created here after the snapshot
                elif not _newer(theirs, mine):
                    fresh[key] = mine  # patched here after the snapshot
            gone = {}
            for key, deleted_at in self._gone.items():
                theirs = fresh.get(key)
                theirs_version = _version(theirs)
                if theirs is not None and (theirs_version is None or theirs_version <= deleted_at):
                    del fresh[key]  # deleted here after the snapshot
                    gone[key] = deleted_at
            changes: list[tuple[Body | None, Body | None]] = [
                (old.get(k), v) for k, v in fresh.items() if old.get(k) != v
            ]
            changes += [(v, None) for k, v in old.items() if k not in fresh]
            self._objects = fresh
            self._index = {}
            self._gone = gone
            for key, obj in fresh.items():
                self._reindex(key, obj)
            return changes

    def _reindex(self, key: Key, obj: Body) -> None:
        if self._index_of is not None and (value := self._index_of(obj)) is not None:
            self._index.setdefault((key[0], value), set()).add(key[1])

    def _unindex(self, key: Key, obj: Body | None) -> None:
        if obj is None or self._index_of is None or (value := self._index_of(obj)) is None:
            return
        names = self._index.get((key[0], value))
        if names is not None:
            names.discard(key[1])
            if not names:
                del self._index[(key[0], value)]


class WatchApi(Protocol):
    """What an informer needs of the API client (``KubeApi`` implements it)."""

    def list_page(self, path: str, query: dict[str, str]) -> Body: ...

    def watch_lines(self, path: str, query: dict[str, str], stop: threading.Event) -> Iterator[bytes]: ...


class GoneError(Exception):
    """The watch's resourceVersion is too old (410): list again."""


@dataclass
class Informer:
    """One list + watch of ``path`` (a collection URL) into ``store``; ``on_change`` hears every change."""

    api: WatchApi
    path: str
    store: Store
    what: str  # for the logs: "cycle Jobs in namespace ns"
    label_selector: str | None = None
    on_change: OnChange | None = None
    # The first list reported to ``on_change`` as well (every object as created): for a store whose objects each
    # start something (the DreamSchedules: a loop each), not one that passes read once it is synced.
    notify_listing: bool = False

    def __post_init__(self) -> None:
        self.synced = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"informer {self.what}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def wait_synced(self, timeout: float) -> bool:
        return self.synced.wait(timeout)

    def _query(self) -> dict[str, str]:
        return {"labelSelector": self.label_selector} if self.label_selector else {}

    def _run(self) -> None:
        failures = 0
        version: str | None = None
        while not self._stop.is_set():
            try:
                if version is None:
                    version = self._list()
                    failures = 0
                version = self._watch(version)
            except GoneError:
                version = None  # too old: a fresh list (and every change it shows is reported)
            except Exception as exc:
                delay = BACKOFF_SECONDS[min(failures, len(BACKOFF_SECONDS) - 1)]
                failures += 1
                log.warning("watching %s failed (%s); listing again in %.0fs", self.what, exc, delay)
                version = None
                self._stop.wait(delay)

    def _list(self) -> str:
        items: list[Body] = []
        query = {**self._query(), "limit": str(PAGE_SIZE)}
        while True:
            page = self.api.list_page(self.path, query)
            items.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                break
            query = {**query, "continue": token}
        version = str((page.get("metadata") or {}).get("resourceVersion") or "")
        changes = self.store.replace(items, version)
        first = not self.synced.is_set()
        self.synced.set()
        log.info("%s: %d listed%s", self.what, len(items), "" if first else f", {len(changes)} changed since")
        if not first or self.notify_listing:  # else a pass waits for the first list: nobody to wake for it
            self._notify(changes)
        return version

    def _watch(self, version: str) -> str:
        query = {
            **self._query(),
            "watch": "1",
            "resourceVersion": version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(WATCH_SECONDS),
        }
        for line in self.api.watch_lines(self.path, query, self._stop):
            event = json.loads(line)
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                if obj.get("code") == 410:
                    raise GoneError(obj.get("message"))
                raise RuntimeError(f"watch error: {obj.get('message')}")
            version = str(obj.get("metadata", {}).get("resourceVersion") or version)
            if kind == "BOOKMARK":
                continue
            if kind == "DELETED":
                before = self.store.remove(*key_of(obj))
                self._notify([(before, None)] if before is not None else [])
            else:
                before, after = self.store.put(obj)
                self._notify([(before, after)] if after is not before else [])
        return version

    def _notify(self, changes: list[tuple[Body | None, Body | None]]) -> None:
        if self.on_change is None:
            return
        for before, after in changes:
            try:
                self.on_change(before, after)
            except Exception:
                log.exception("%s: handling a change failed", self.what)


def wait_all(informers: list[Informer], timeout: float) -> bool:
    """True when every informer has its first list in within ``timeout``."""
    deadline = time.monotonic() + timeout
    return all(i.wait_synced(max(0.0, deadline - time.monotonic())) for i in informers)


def projection(*, spec: tuple[str, ...] = (), status: tuple[str, ...] = ()) -> Project:
    """Keep metadata (without managedFields) and the named fields of spec and status: what the operator reads."""

    def project(raw: Body) -> Body:
        meta = {k: v for k, v in (raw.get("metadata") or {}).items() if k != "managedFields"}
        out: dict[str, Any] = {"metadata": meta}
        for part, fields in (("spec", spec), ("status", status)):
            source = raw.get(part) or {}
            kept = {k: source[k] for k in fields if k in source}
            if kept:
                out[part] = kept
        return cast(Body, compact(out))

    return project


SHORT = 40  # strings up to this length are shared: keys, label values, condition types and reasons, uids


def compact(value: Any) -> Any:
    """A deep copy whose keys and short strings are interned: the stores hold every cycle Job and claim for the
    operator's lifetime, and each parsed copy of "lastTransitionTime", "dreamkeeper.io/claim" or "True" is its own
    string (JSON decoding shares keys within one response only). Halves a cached Job (4.3 -> 1.9 KB measured)."""
    if isinstance(value, dict):
        return {sys.intern(k): compact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [compact(v) for v in value]
    if isinstance(value, str) and len(value) <= SHORT:
        return sys.intern(value)
    return value
