"""What the operator-scale bench measures besides wall time: who spends the CPU, which API calls are made, progress.

* ``ScheduleProgress``: one watch on the namespace's DreamSchedules (not a list every 0.25 s: at 5,000 schedules a
  list is ~10 MB of JSON, and polling it would load the very API server being measured); it notes the moment the
  last schedule's ``status.observedGeneration`` caught up with its generation.
* ``CpuMeter``: CPU seconds (user + system, from /proc) of the operator, kube-apiserver, etcd and the controller
  manager over a phase: which process is the limit on a shared machine.
* ``request_counts``: the API server's own ``apiserver_request_total`` by verb, resource and subresource, so the calls
  a phase made are counted by the server that served them (the operator's, the bench's and the controller manager's
  together; the resource says whose: only the operator lists Jobs by claim or patches schedule status).
* ``PySpy``: optional sampling profile of the operator during a phase (``py-spy record``, not a dependency of the
  project: pass its path), summarised by where the samples fall.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client.parser import text_string_to_metric_families

if TYPE_CHECKING:
    from tests.cluster.controlplane import ControlPlane

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (fields 14 and 15 of proc(5))


def rss_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) in MB of ``pid``."""
    values: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) / 1024.0
    return values["VmRSS"], values["VmHWM"]


@dataclass
class CpuMeter:
    """CPU seconds per named process between ``start()`` and ``stop()``."""

    pids: dict[str, int]
    _start: dict[str, float] = field(default_factory=dict)
    _t0: float = 0.0

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._start = {name: cpu_seconds(pid) for name, pid in self.pids.items()}

    def stop(self) -> dict[str, float]:
        wall = time.monotonic() - self._t0
        used = {name: round(cpu_seconds(pid) - self._start.get(name, 0.0), 1) for name, pid in self.pids.items()}
        return {**used, "wall": round(wall, 1)}


def plane_pids(plane: ControlPlane) -> dict[str, int]:
    return {proc.name: proc.pid for proc in plane.processes}


def request_counts(plane: ControlPlane) -> Counter[str]:
    """``apiserver_request_total`` summed by "VERB resource[/subresource]" (watches included, as WATCH)."""
    text = plane._get("/metrics")
    counts: Counter[str] = Counter()
    for family in text_string_to_metric_families(text):
        if family.name != "apiserver_request":
            continue
        for sample in family.samples:
            if not sample.name.endswith("_total"):
                continue
            labels = sample.labels
            resource = labels.get("resource", "")
            if labels.get("subresource"):
                resource += "/" + labels["subresource"]
            counts[f"{labels.get('verb', '?')} {resource}"] += int(sample.value)
    return counts


def request_delta(before: Counter[str], after: Counter[str]) -> dict[str, int]:
    delta = {key: after[key] - before.get(key, 0) for key in after}
    return dict(sorted(((k, v) for k, v in delta.items() if v), key=lambda kv: -kv[1]))


class ScheduleProgress:
    """Watches the namespace's DreamSchedules; knows how many have caught up with a generation, and since when."""

    def __init__(self, plane: ControlPlane, path: str) -> None:
        self.plane = plane
        self.path = path
        self.objects: dict[str, tuple[int, int]] = {}  # name -> (generation, observedGeneration)
        self.changed_at = time.monotonic()  # when the last object caught up (or fell behind)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._watch: Any = None
        self._thread = threading.Thread(target=self._run, name="schedule-progress", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._watch is not None:
            self._watch.close()
        self._thread.join(timeout=30)

    def _relist(self) -> str:
        listing = self.plane.api.get(self.path)
        with self._lock:
            self.objects = {item["metadata"]["name"]: _generations(item) for item in listing["items"]}
            self.changed_at = time.monotonic()
        return str(listing["metadata"]["resourceVersion"])

    def _run(self) -> None:
        version = self._relist()
        while not self._stop.is_set():
            try:
                self._watch = self.plane.api.watch(self.path, version, timeout_seconds=300)
                for event in self._watch:
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":  # 410 Gone: the version is too old, list again
                        version = self._relist()
                        break
                    version = obj.get("metadata", {}).get("resourceVersion", version)
                    if event.get("type") == "BOOKMARK":
                        continue
                    name = obj["metadata"]["name"]
                    with self._lock:
                        if event.get("type") == "DELETED":
                            self.objects.pop(name, None)
                        else:
                            before = self.objects.get(name)
                            self.objects[name] = _generations(obj)
                            if before != self.objects[name]:
                                self.changed_at = time.monotonic()
            except Exception:
                if self._stop.is_set():
                    return
                time.sleep(1)
                with contextlib.suppress(Exception):
                    version = self._relist()

    def caught_up(self, generation: int) -> int:
        with self._lock:
            return sum(1 for g, o in self.objects.values() if g == generation and o == generation)

    def wait(self, count: int, generation: int, timeout: float) -> float:
        """Block until ``count`` schedules are at ``generation`` and observed; the monotonic time that happened."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                done = sum(1 for g, o in self.objects.values() if g == generation and o == generation)
                if done >= count and len(self.objects) == count:
                    return self.changed_at
            time.sleep(0.25)
        raise TimeoutError(f"only {self.caught_up(generation)} of {count} schedules reached generation {generation}")


def _generations(item: dict[str, Any]) -> tuple[int, int]:
    status = item.get("status") or {}
    return int(item["metadata"].get("generation") or 0), int(status.get("observedGeneration") or 0)


# ---- py-spy -----------------------------------------------------------------------------------------------------

# Where a sample's innermost frames are decides its bucket (first match from the leaf up).
BUCKETS = (
    ("idle (event loop waiting)", ("select.py", "selectors.py:select", "base_events.py:_run_once")),
    ("TLS / sockets", ("ssl.py", "socket.py")),
    ("JSON", ("json/",)),
    ("HTTP client (urllib3 / aiohttp)", ("urllib3/", "aiohttp/", "http/client.py")),
    ("kubernetes client", ("kubernetes/",)),
    ("pydantic", ("pydantic",)),
    ("prometheus_client", ("prometheus_client/",)),
    ("dreamkeeper", ("dreamkeeper/",)),
    ("kopf", ("kopf/",)),
    ("asyncio", ("asyncio/",)),
    ("threads (waiting)", ("threading.py",)),
)


class PySpy:
    """``py-spy record`` of one process for the length of a phase (raw collapsed stacks)."""

    def __init__(self, binary: Path | None, pid: int, output: Path) -> None:
        self.output = output
        self.proc: subprocess.Popen[bytes] | None = None
        if binary is not None:
            argv = [str(binary), "record", "--pid", str(pid), "--rate", "50", "--nonblocking", "--gil"]
            argv += ["--format", "raw", "--output", str(output)]
            self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self) -> dict[str, Any] | None:
        if self.proc is None:
            return None
        self.proc.send_signal(2)  # SIGINT: py-spy writes its output and exits
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=60)
        return summarise(self.output) if self.output.exists() else None


def summarise(raw: Path) -> dict[str, Any]:
    """Samples by bucket (the first one a frame of the stack falls in, from the leaf) and the top self frames."""
    buckets: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    total = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        frames = stack.split(";")
        leaves[frames[-1]] += count
        bucket = "other"
        for frame in reversed(frames):
            hit = next((name for name, marks in BUCKETS if any(m in frame for m in marks)), None)
            if hit is not None:
                bucket = hit
                break
        buckets[bucket] += count
    return {
        "samples": total,
        "share": {name: round(n / total, 3) for name, n in buckets.most_common()} if total else {},
        "top_self": [[frame, round(n / total, 3)] for frame, n in leaves.most_common(15)] if total else [],
        "raw": str(raw),
    }
