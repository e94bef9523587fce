"""The DreamSchedules' own informer (issue 27 item 4): listed, changed and deleted schedules start, wake and stop
their loops without kopf (whose processing of each watch event cost milliseconds, twice per schedule per pass).

The informer runs for real (its thread, its Store, its list in pages and its watch), fed by a scripted API: the
list answers pages, the watch plays the lines a test queues. The operator's handling runs on a real event loop;
only the reconcile pass is replaced by a recorder (its rules are tests/kube/test_reconcile.py's).
"""

from __future__ import annotations

import asyncio
import copy
import json
import queue
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from prometheus_client import CollectorRegistry

from dreamkeeper.kube import FINALIZER
from dreamkeeper.kube.caches import slim_schedule
from dreamkeeper.kube.handlers import OperatorState, _stop_all
from dreamkeeper.kube.informer import Informer, Store
from dreamkeeper.kube.metrics import OperatorMetrics
from tests.kube.fakes import FakeCluster

NS = "agents"
PATH = f"/apis/dreamkeeper.io/v1alpha1/namespaces/{NS}/dreamschedules"


class ScriptedApi:
    """``WatchApi``: the list is what ``cluster`` holds (in pages of ``page`` items); the watch plays ``lines``."""

    def __init__(self, cluster: FakeCluster, page: int = 2) -> None:
        self.cluster = cluster
        self.page = page
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.lists = 0

    def list_page(self, path: str, query: dict[str, str]) -> dict[str, Any]:
        assert path == PATH
        items = sorted(self.cluster.of_kind("DreamSchedule", NS), key=lambda o: o["metadata"]["name"])
        start = int(query.get("continue") or 0)
        chunk = items[start : start + self.page]
        meta: dict[str, Any] = {"resourceVersion": "1000"}
        if start + self.page < len(items):
            meta["continue"] = str(start + self.page)
        else:
            self.lists += 1
        return {"metadata": meta, "items": chunk}

    def watch_lines(self, path: str, query: dict[str, str], stop: threading.Event) -> Iterator[bytes]:
        while not stop.is_set():
            try:
                yield self.lines.get(timeout=0.05)
            except queue.Empty:
                continue

    def play(self, kind: str, obj: dict[str, Any]) -> None:
        self.lines.put(json.dumps({"type": kind, "object": obj}).encode())


class Recorder:
    """The reconciler's place: which schedule had a pass (and whether full), which were forgotten."""

    def __init__(self) -> None:
        self.passes: list[tuple[str, int, bool]] = []  # (name, generation read, full)
        self.forgotten: list[str] = []

    def reconcile(self, body: dict[str, Any], *, full: bool = False) -> float:
        self.passes.append((body["metadata"]["name"], int(body["metadata"]["generation"]), full))
        return 3600.0  # asleep until woken

    def forget(self, namespace: str, name: str, uid: str | None) -> None:
        self.forgotten.append(name)

    def of(self, name: str) -> list[tuple[int, bool]]:
        return [(generation, full) for n, generation, full in self.passes if n == name]


def schedule(cluster: FakeCluster, name: str, **meta: Any) -> dict[str, Any]:
    return cluster.put(
        "DreamSchedule",
        {
            "apiVersion": "dreamkeeper.io/v1alpha1",
            "kind": "DreamSchedule",
            "metadata": {"name": name, "namespace": NS, **meta},
            "spec": {"schedule": "0 3 * * *", "claimName": f"{name}-data"},
        },
    )


async def until(check: Any, what: str) -> None:
    for _ in range(6000):  # generous: a loaded machine
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never: {what}")


def run(cluster: FakeCluster, scenario: Any) -> tuple[Recorder, OperatorState]:
    """The operator's side of the schedule informer, on a real event loop, through ``scenario(api, state)``."""
    recorder = Recorder()
    metrics = OperatorMetrics(CollectorRegistry())
    state = OperatorState(
        api=cluster,  # type: ignore[arg-type]
        metrics=metrics,
        schedules=recorder,  # type: ignore[arg-type]
        vocabularies=None,  # type: ignore[arg-type]
        executor=ThreadPoolExecutor(max_workers=2),
    )
    api = ScriptedApi(cluster)
    informer = Informer(
        api, PATH, Store(slim_schedule), "schedules", on_change=state.schedule_seen, notify_listing=True
    )

    async def main() -> None:
        state.loop = asyncio.get_running_loop()
        informer.start()
        try:
            await scenario(api, state, recorder)
        finally:
            informer.stop()
            await _stop_all(state)

    try:
        asyncio.run(main())
    finally:
        state.executor.shutdown(wait=True)
    assert metrics.handler_errors.labels("schedule")._value.get() == 0
    return recorder, state


def test_every_listed_schedule_gets_its_loop_and_one_full_pass() -> None:
    """The first list (three pages here) starts a loop per schedule, as kopf's listing did."""
    cluster = FakeCluster()
    uids = {schedule(cluster, f"s{i}")["metadata"]["uid"] for i in range(5)}

    async def scenario(api: ScriptedApi, state: OperatorState, recorder: Recorder) -> None:
        await until(lambda: len(recorder.passes) == 5, "a pass for each of the five listed schedules")
        assert set(state.loops) == uids
        assert sorted(recorder.passes) == [(f"s{i}", 1, True) for i in range(5)]
        assert api.lists == 1

    run(cluster, scenario)


def test_a_spec_edit_wakes_the_loop_and_a_status_write_does_not() -> None:
    cluster = FakeCluster()
    schedule(cluster, "nightly")

    async def scenario(api: ScriptedApi, state: OperatorState, recorder: Recorder) -> None:
        await until(lambda: len(recorder.passes) == 1, "the first pass")
        uid = next(iter(state.loops))
        # The echo of the pass's own status write: a new resourceVersion, the same generation.
        written = cluster.patch_schedule_status(NS, "nightly", {"status": {"observedGeneration": 1}})
        api.play("MODIFIED", written)
        kept_version = written["metadata"]["resourceVersion"]
        await until(
            lambda: (state.bodies.get(uid) or {}).get("metadata", {}).get("resourceVersion") == kept_version, "kept"
        )
        edited = cluster.edit_spec("DreamSchedule", NS, "nightly", schedule="0 4 * * *")
        api.play("MODIFIED", edited)
        await until(lambda: len(recorder.passes) == 2, "the pass the edit woke")
        kept = state.bodies.get(uid)
        assert kept is not None and kept["spec"]["schedule"] == "0 4 * * *" and "managedFields" not in kept["metadata"]
        # A late event older than what is kept changes nothing (the Store orders by resourceVersion).
        api.play("MODIFIED", written)
        api.play("MODIFIED", cluster.edit_spec("DreamSchedule", NS, "nightly", schedule="0 5 * * *"))
        await until(lambda: len(recorder.passes) == 3, "the pass the second edit woke")
        assert state.bodies.get(uid)["spec"]["schedule"] == "0 5 * * *"  # type: ignore[index]

    recorder, _ = run(cluster, scenario)
    assert recorder.of("nightly") == [(1, True), (2, True), (3, True)]


def test_a_deleted_schedule_s_loop_ends_and_its_series_are_forgotten() -> None:
    cluster = FakeCluster()
    gone = schedule(cluster, "gone")
    schedule(cluster, "stays")

    async def scenario(api: ScriptedApi, state: OperatorState, recorder: Recorder) -> None:
        await until(lambda: len(recorder.passes) == 2, "both first passes")
        task = state.loops[gone["metadata"]["uid"]]
        deleted = copy.deepcopy(gone)
        deleted["metadata"]["resourceVersion"] = str(int(gone["metadata"]["resourceVersion"]) + 100)
        api.play("DELETED", deleted)
        await until(lambda: recorder.forgotten == ["gone"], "the deleted schedule forgotten")
        await asyncio.wait_for(task, timeout=60)
        assert gone["metadata"]["uid"] not in state.loops and len(state.loops) == 1
        assert state.bodies.get(gone["metadata"]["uid"]) is None

    run(cluster, scenario)


def test_the_finalizer_earlier_versions_added_is_removed_on_sight_and_other_finalizers_are_kept() -> None:
    """kopf removed its finalizer when no handler asked for it; without kopf watching schedules, the operator does:
    left there, it hangs the schedule's (and its namespace's) deletion while no operator runs."""
    cluster = FakeCluster()
    schedule(cluster, "old", finalizers=[FINALIZER, "example.com/keep"])

    async def scenario(api: ScriptedApi, state: OperatorState, recorder: Recorder) -> None:
        await until(
            lambda: cluster.get("DreamSchedule", NS, "old")["metadata"]["finalizers"] == ["example.com/keep"],  # type: ignore[index]
            "the old finalizer removed",
        )
        await until(lambda: len(recorder.passes) == 1, "the schedule's pass")

    run(cluster, scenario)
