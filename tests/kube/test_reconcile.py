"""The reconcile rules against an in-memory API server: slots, counting once per Job UID, restarts, concurrency."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from pydantic.alias_generators import to_camel

from dreamkeeper.consolidation.counts import COUNTS as TABLE
from dreamkeeper.consolidation.report import CycleReport
from dreamkeeper.kube.api import ConflictError
from dreamkeeper.kube.caches import ClaimCache, JobCache, claim_of, project_claim, project_job
from dreamkeeper.kube.informer import Informer, Store
from dreamkeeper.kube.metrics import OperatorMetrics
from dreamkeeper.kube.naming import run_now_job_name, scheduled_job_name
from dreamkeeper.kube.reconcile import ScheduleReconciler
from tests.kube.fakes import FakeCluster

NS = "agents"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def at(self, hours: float = 0, minutes: float = 0, seconds: float = 1) -> None:
        self.now = T0 + timedelta(hours=hours, minutes=minutes, seconds=seconds)


def cluster(*, access: str = "ReadWriteOnce", schedules: tuple[str, ...] = ("nightly",), **spec: Any) -> FakeCluster:
    c = FakeCluster()
    c.now = T0
    c.put(
        "PersistentVolumeClaim",
        {"metadata": {"name": "agent-data", "namespace": NS}, "spec": {"accessModes": [access]}},
    )
    c.put(
        "Pod",
        {
            "metadata": {"name": "agent-0", "namespace": NS, "labels": {"app": "agent"}},
            "spec": {
                "nodeName": "node-a",
                "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "agents", "effect": "NoSchedule"}],
                "securityContext": {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 2000},
                "containers": [{"name": "agent"}],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "agent-data"}}],
            },
            "status": {"phase": "Running"},
        },
    )
    for name in schedules:
        add_schedule(c, name, **spec)
    return c


def add_schedule(c: FakeCluster, name: str, **spec: Any) -> None:
    c.put(
        "DreamSchedule",
        {
            "apiVersion": "dreamkeeper.io/v1alpha1",
            "kind": "DreamSchedule",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"schedule": "0 3 * * *", "claimName": "agent-data", **spec},
        },
    )


SOURCES = ("api", "lagging-watch")
SOURCE = {"reads": "api"}
CLAIM_STORES: dict[int, tuple[Store, FakeCluster]] = {}  # id(reconciler) -> its claim cache and the cluster behind


@pytest.fixture(autouse=True, params=SOURCES)
def reads(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every rule here holds whether a pass asks the API server for its claim's Jobs and its claim, or reads the
    operator's watched caches (issue 27, 5,000 schedules). "lagging-watch" is the worst watch there is for Jobs: it
    lists once, when the reconciler is made, and never delivers an event after; what the pass sees of Jobs since is
    only what it wrote through itself and read back with a GET. Claims are re-listed before each pass (a watch that
    caught up between passes: a claim's event wakes the schedules that name it)."""
    monkeypatch.setitem(SOURCE, "reads", request.param)
    CLAIM_STORES.clear()
    return str(request.param)


class _Listed(Informer):
    """An informer whose first list is in (the test made it) and that never watches."""

    def __init__(self, store: Store) -> None:
        super().__init__(api=None, path="", store=store, what="test")  # type: ignore[arg-type]
        self.synced.set()


def reconciler(c: FakeCluster, clock: Clock) -> ScheduleReconciler:
    metrics = OperatorMetrics(CollectorRegistry())
    if SOURCE["reads"] == "api":
        return ScheduleReconciler(c, metrics, clock=clock)
    job_store, claim_store = Store(project_job, index=claim_of), Store(project_claim)
    job_store.replace([j for j in c.of_kind("Job") if claim_of(j) is not None])
    claim_store.replace(c.of_kind("PersistentVolumeClaim"))
    r = ScheduleReconciler(
        c,
        metrics,
        clock=clock,
        jobs=JobCache(c, job_store, [_Listed(job_store)]),
        claims=ClaimCache(c, claim_store, [_Listed(claim_store)]),
    )
    CLAIM_STORES[id(r)] = (claim_store, c)
    return r


def run(r: ScheduleReconciler, c: FakeCluster, name: str = "nightly") -> float:
    body = c.get_schedule(NS, name)
    assert body is not None
    if id(r) in CLAIM_STORES:
        claims, cluster_ = CLAIM_STORES[id(r)]
        claims.replace(cluster_.of_kind("PersistentVolumeClaim"))
    return r.reconcile(body)


def status(c: FakeCluster, name: str = "nightly") -> dict[str, Any]:
    body = c.get_schedule(NS, name)
    assert body is not None
    return dict(body.get("status") or {})


def condition(c: FakeCluster, type_: str, name: str = "nightly") -> dict[str, Any]:
    return next(x for x in status(c, name)["conditions"] if x["type"] == type_)


def report_message(**counts: Any) -> str:
    report = CycleReport(
        cycle_id="c-1",
        started_at=T0,
        finished_at=T0 + timedelta(seconds=42),
        result=counts.pop("result", "completed"),
        **counts,
    )
    return report.summary_json()


def sample(metrics: OperatorMetrics, name: str, labels: dict[str, str]) -> float | None:
    value = metrics.registry.get_sample_value(name, labels)
    return value


def ident(name: str = "nightly") -> dict[str, str]:
    return {"dreamschedule": name, "dreamschedule_namespace": NS}


def jobs(c: FakeCluster) -> list[str]:
    return sorted(j["metadata"]["name"] for j in c.of_kind("Job", NS))


COUNTS = {
    "reviewed": 40,
    "withheld": 12,
    "archived": 9,
    "archived_with_replacement": 7,
    "ephemeral": 2,
    "rejected": 3,
    "repaired": 1,
    "protected": 2,
    "conflicts": 1,
    "live_entries": 250,
    "archived_entries": 60,
    "input_tokens": 1000,
    "output_tokens": 200,
}


def test_new_schedule_waits_for_its_first_slot() -> None:
    c, clock = cluster(), Clock(T0)
    clock.at(hours=1)
    delay = run(reconciler(c, clock), c)
    assert jobs(c) == []
    s = status(c)
    assert s["nextScheduleTime"] == "2026-01-01T03:00:00Z"
    assert condition(c, "Ready")["status"] == "True"
    assert condition(c, "LastRunSucceeded")["reason"] == "NoRunYet"
    assert 7100 <= delay <= 7200 or delay == 300.0  # sleeps until the slot, bounded by max_sleep


def test_a_slot_runs_once_and_its_results_are_counted_exactly_once() -> None:
    c, clock = cluster(), Clock(T0)
    r = reconciler(c, clock)
    clock.at(hours=3)
    run(r, c)
    slot = datetime(2026, 1, 1, 3, tzinfo=UTC)
    name = scheduled_job_name("nightly", slot)
    assert jobs(c) == [name]
    job = c.get("Job", NS, name)
    assert job is not None
    assert status(c)["activeJob"]["name"] == name
    assert status(c)["lastScheduleTime"] == "2026-01-01T03:00:00Z"
    assert "CycleStarted" in c.reasons()

    c.finish_job(NS, name, message=report_message(**COUNTS))
    clock.at(hours=3, minutes=5)
    run(r, c)
    s = status(c)
    assert "activeJob" not in s
    assert s["totals"]["cyclesCompleted"] == 1
    assert s["totals"]["archivedWithReplacement"] == 7
    assert s["totals"]["archivedEphemeral"] == 2
    assert s["totals"]["mergesRejected"] == 3
    assert s["countedJobUIDs"] == [job["metadata"]["uid"]]
    assert s["lastRun"]["result"] == "completed" and s["lastRun"]["archived"] == 9
    assert condition(c, "LastRunSucceeded")["status"] == "True"
    assert {"CycleCompleted", "MergesRejected", "EntriesProtected", "Conflicts"} <= set(c.reasons())
    counted_job = c.get("Job", NS, name)
    assert counted_job is not None
    assert counted_job["metadata"]["annotations"]["dreamkeeper.io/counted"] == "true"
    m = r.metrics
    assert sample(m, "dreamkeeper_cycles_total", {**ident(), "result": "completed"}) == 1
    assert sample(m, "dreamkeeper_archived_total", {**ident(), "kind": "ephemeral"}) == 2
    assert sample(m, "dreamkeeper_merges_rejected_total", ident()) == 3
    assert sample(m, "dreamkeeper_llm_tokens_total", {**ident(), "direction": "input"}) == 1000
    assert sample(m, "dreamkeeper_live_entries", ident()) == 250
    assert sample(m, "dreamkeeper_cycle_duration_seconds_count", ident()) == 1

    # Replayed passes and an operator restart (new process, new metrics) count nothing twice.
    for _ in range(3):
        run(r, c)
    restarted = reconciler(c, clock)
    run(restarted, c)
    assert status(c)["totals"]["cyclesCompleted"] == 1
    assert sample(m, "dreamkeeper_cycles_total", {**ident(), "result": "completed"}) == 1
    assert sample(restarted.metrics, "dreamkeeper_cycles_total", {**ident(), "result": "completed"}) == 1
    assert sample(restarted.metrics, "dreamkeeper_merges_rejected_total", ident()) == 3
    assert jobs(c) == [name]


def test_every_count_reaches_the_places_its_row_of_the_table_names() -> None:
    """A distinct value for every count: each reaches lastRun, totals, its metric and its Event as the table says."""
    values = {count.name: 11 + i for i, count in enumerate(TABLE)}
    c, clock = cluster(), Clock(T0)
    r = reconciler(c, clock)
    clock.at(hours=3)
    run(r, c)
    name = jobs(c)[0]
    c.finish_job(NS, name, message=report_message(**values))
    clock.at(hours=3, minutes=5)
    run(r, c)
    s = status(c)
    for count in TABLE:
        camel = to_camel(count.name)
        assert (s["lastRun"].get(camel) == values[count.name]) is count.in_run, count.name
        key = count.totals_key or camel
        assert (s["totals"].get(key) == values[count.name]) is count.summed, count.name
    restarted = reconciler(c, clock)  # its counters are seeded from the persisted totals
    run(restarted, c)
    for count in TABLE:
        if count.metric is None:
            continue
        family = count.metric.family
        labels = {**ident(), **({family.label: count.metric.label_value} if family.label else {})}
        metric = family.name + ("_total" if count.summed else "")
        for metrics in (r.metrics, restarted.metrics):
            assert sample(metrics, metric, labels) == values[count.name], count.name
    messages = {e["reason"]: e["message"] for e in c.events}
    fired = {count.event.reason: count for count in TABLE if count.event is not None}
    for reason, count in fired.items():
        assert count.event is not None
        assert messages[reason] == f"cycle {name}: {values[count.name]} {count.event.what}"
    v = values
    assert messages["CycleCompleted"] == (
        f"cycle {name} completed: reviewed {v['reviewed']}, withheld {v['withheld']}, archived {v['archived']} "
        f"({v['archived_with_replacement']} with replacement, {v['ephemeral']} ephemeral), rejected {v['rejected']}, "
        f"repaired {v['repaired']}, protected {v['protected']}, census-refused {v['prunes_refused']}, "
        f"held {v['held']}, live {v['live_entries']}; plan held for approval, over the blast-radius cap: set "
        "spec.approveHold: c-1 (and a new runNowToken) to apply it if the corpus is unchanged"
    )  # a held plan (issue 17): the run's reason is Held, its skip reason says how to approve


def test_a_stale_copy_of_the_schedule_counts_nothing() -> None:
    c, clock = cluster(), Clock(T0)
    r = reconciler(c, clock)
    clock.at(hours=3)
    run(r, c)
    name = jobs(c)[0]
    c.finish_job(NS, name, message=report_message(**COUNTS))
    stale = c.get_schedule(NS, "nightly")
    assert stale is not None
    run(r, c)  # counts it
    r.reconcile(stale)  # a replayed event carrying the old resourceVersion
    assert status(c)["totals"]["cyclesCompleted"] == 1
    assert sample(r.metrics, "dreamkeeper_cycles_total", {**ident(), "result": "completed"}) == 1


def test_counted_uid_list_prevents_a_recount_when_the_job_annotation_was_lost() -> None:
    c, clock = cluster(), Clock(T0)
    r = reconciler(c, clock)
    clock.at(hours=3)
    run(r, c)
    name = jobs(c)[0]
    c.finish_job(NS, name, message=report_message(**COUNTS))
    run(r, c)
    c.patch_job(NS, name, {"metadata": {"annotations": {"dreamkeeper.io/counted": None}}})
    run(reconciler(c, clock), c)
    assert status(c)["totals"]["cyclesCompleted"] == 1
    job = c.get("Job", NS, name)
    assert job is not None and job["metadata"]["annotations"]["dreamkeeper.io/counted"] == "true"


def test_after_downtime_only_the_latest_slot_runs_and_missed_slots_are_counted_once() -> None:
    c, clock = cluster(schedule="0 * * * *"), Clock(T0)
    r = reconciler(c, clock)
    clock.at(hours=10)  # created at 00:00, first seen at 10:00: 01:00..09:00 passed unrun
    run(r, c)
    assert status(c)["totals"]["missedSlots"] == 9
    c.finish_job(NS, jobs(c)[0], message=report_message())
    run(r, c)
    clock.at(hours=14, minutes=10)  # the operator was down for 11:00, 12:00, 13:00 and 14:00
    restarted = reconciler(c, clock)
    run(restarted, c)
    latest = scheduled_job_name("nightly", datetime(2026, 1, 1, 14, tzinfo=UTC))
    assert latest in jobs(c) and len(jobs(c)) == 2
    assert status(c)["totals"]["missedSlots"] == 9 + 3
    assert status(c)["lastScheduleTime"] == "2026-01-01T14:00:00Z"
    assert "MissedSlots" in c.reasons()
    clock.at(hours=14, minutes=20)
    run(reconciler(c, clock), c)
    assert len(jobs(c)) == 2
    assert status(c)["totals"]["missedSlots"] == 12
    assert sample(restarted.metrics, "dreamkeeper_missed_slots_total", ident()) == 12


def test_a_slot_past_the_starting_deadline_is_missed_not_run() -> None:
    c, clock = cluster(schedule="0 * * * *", startingDeadlineSeconds=300), Clock(T0)
    clock.at(hours=4, minutes=30)
    run(reconciler(c, clock), c)
    assert jobs(c) == []
    assert status(c)["totals"]["missedSlots"] == 4  # 01:00..04:00
    assert status(c)["lastScheduleTime"] == "2026-01-01T04:00:00Z"


def test_never_two_cycles_on_one_claim_across_schedules() -> None:
    c, clock = cluster(schedules=("alpha", "beta")), Clock(T0)
    r = reconciler(c, clock)
    clock.at(hours=3)
    run(r, c, "alpha")
    run(r, c, "beta")
    assert jobs(c) == [scheduled_job_name("alpha", datetime(2026, 1, 1, 3, tzinfo=UTC))]
    beta = status(c, "beta")
    assert beta["totals"]["skippedSlots"] == {"concurrent": 1}
    assert beta["lastScheduleTime"] == "2026-01-01T03:00:00Z"
    assert "SlotSkipped" in c.reasons()
    assert sample(r.metrics, "dreamkeeper_skipped_slots_total", {**ident("beta"), "reason": "concurrent"}) == 1
    # The Events name what holds the claim (issue 17), for a slot and for a run-now request alike.
    blocker = scheduled_job_name("alpha", datetime(2026, 1, 1, 3, tzinfo=UTC))
    (skipped,) = [e["message"] for e in c.events if e["reason"] == "SlotSkipped"]
    assert f"Job {blocker} is active on claim agent-data" in skipped
    c.edit_spec("DreamSchedule", NS, "beta", runNowToken="now")
    run(r, c, "beta")
    (deferred,) = [e["message"] for e in c.events if e["reason"] == "RunNowDeferred"]
    assert f"Job {blocker} is active on the claim" in deferred
    assert sample(r.metrics, "dreamkeeper_skipped_slots_total", {**ident("alpha"), "reason": "concurrent"}) == 0


def test_suspended_schedules_skip_slots_but_run_now_still_runs() -> None:
    c, clock = cluster(suspend=True), Clock(T0)
    r = reconciler(c, clock)
    clock.at(hours=3)
    run(r, c)
    assert jobs(c) == []
    assert status(c)["totals"]["skippedSlots"] == {"suspended": 1}
    c.edit_spec("DreamSchedule", NS, "nightly", runNowToken="manual-1")
    run(r, c)
    assert jobs(c) == [run_now_job_name("nightly", "manual-1", 2)]
    assert status(c)["lastRunNowToken"] == "manual-1"


def test_run_now_runs_once_per_token_and_waits_while_a_cycle_is_active() -> None:
    c, clock = cluster(runNowToken="t1"), Clock(T0)
    r = reconciler(c, clock)
    clock.at(hours=1)
    run(r, c)
    first = run_now_job_name("nightly", "t1", 1)
    assert jobs(c) == [first]
    job = c.get("Job", NS, first)
    assert job is not None
    dream = job["spec"]["template"]["spec"]["containers"][0]
    assert "--force" in dream["args"]
    c.edit_spec("DreamSchedule", NS, "nightly", runNowToken="t2")
    delay = run(r, c)  # t1 is still running: t2 waits, announced once
    assert jobs(c) == [first]
    assert delay == r.settings.poll_seconds
    run(r, c)
    assert c.reasons().count("RunNowDeferred") == 1
    c.finish_job(NS, first, message=report_message())
    run(r, c)
    assert jobs(c) == sorted([first, run_now_job_name("nightly", "t2", 2)])
    run(r, c)
    assert len(jobs(c)) == 2
    # Reusing an earlier token later is a new request: it runs again (A, B, A).
    c.finish_job(NS, run_now_job_name("nightly", "t2", 2), message=report_message())
    run(r, c)
    c.edit_spec("DreamSchedule", NS, "nightly", runNowToken="t1")
    run(r, c)
    assert run_now_job_name("nightly", "t1", 3) in jobs(c) and len(jobs(c)) == 3


def test_a_job_created_before_a_lost_status_write_is_adopted_not_duplicated(monkeypatch: pytest.MonkeyPatch) -> None:
    c, clock = cluster(), Clock(T0)
    r = reconciler(c, clock)
    clock.at(hours=3)
    original = c.patch_schedule_status

    def lost(namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        raise ConflictError(409, "Conflict", "simulated: the write was lost")

    monkeypatch.setattr(c, "patch_schedule_status", lost)
    run(r, c)
    assert len(jobs(c)) == 1 and "activeJob" not in status(c)
    monkeypatch.setattr(c, "patch_schedule_status", original)
    run(reconciler(c, clock), c)  # as after a crash: a new process
    assert len(jobs(c)) == 1
    assert status(c)["activeJob"]["name"] == jobs(c)[0]
    assert status(c)["lastScheduleTime"] == "2026-01-01T03:00:00Z"
    assert status(c).get("totals", {}).get("skippedSlots", {}) == {}  # adopted, not mistaken for a concurrent cycle
    assert c.reasons().count("CycleStarted") == 1  # posted when the Job was created, not again


def test_a_run_now_job_created_before_a_lost_status_write_is_adopted(monkeypatch: pytest.MonkeyPatch) -> None:
    c, clock = cluster(runNowToken="once"), Clock(T0)
    clock.at(hours=1)

    def lost(namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        raise ConflictError(409, "Conflict", "simulated: the write was lost")

    original = c.patch_schedule_status
    monkeypatch.setattr(c, "patch_schedule_status", lost)
    run(reconciler(c, clock), c)
    monkeypatch.setattr(c, "patch_schedule_status", original)
    run(reconciler(c, clock), c)
    assert jobs(c) == [run_now_job_name("nightly", "once", 1)]
    assert status(c)["lastRunNowToken"] == "once"
    assert "RunNowDeferred" not in c.reasons()


def test_a_foreign_object_holding_the_job_name_skips_the_slot() -> None:
    c, clock = cluster(), Clock(T0)
    name = scheduled_job_name("nightly", datetime(2026, 1, 1, 3, tzinfo=UTC))
    c.put("Job", {"metadata": {"name": name, "namespace": NS, "labels": {}}, "spec": {}, "status": {}})
    clock.at(hours=3)
    run(reconciler(c, clock), c)
    assert status(c)["totals"]["skippedSlots"] == {"name_conflict": 1}
    assert "NameConflict" in c.reasons()


def test_read_write_once_pod_claims_fail_fast_with_a_condition() -> None:
    c, clock = cluster(access="ReadWriteOncePod"), Clock(T0)
    clock.at(hours=3)
    run(reconciler(c, clock), c)
    assert jobs(c) == []
    ready = condition(c, "Ready")
    assert ready["status"] == "False" and ready["reason"] == "ReadWriteOncePodClaim"
    assert status(c)["totals"]["skippedSlots"] == {"not_ready": 1}


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ({"schedule": "61 * * * *"}, "InvalidSchedule"),
        ({"timeZone": "Mars/Olympus"}, "InvalidTimeZone"),
        ({"claimName": "missing"}, "ClaimNotFound"),
        ({"vocabularyRef": {"name": "absent"}}, "VocabularyNotFound"),
    ],
)
def test_unusable_specs_are_marked_not_ready_with_a_reason(spec: dict[str, Any], reason: str) -> None:
    c, clock = cluster(**spec), Clock(T0)
    r = reconciler(c, clock)
    clock.at(hours=3)
    run(r, c)
    ready = condition(c, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", reason)
    assert ready["observedGeneration"] == 1
    assert jobs(c) == []
    assert sample(r.metrics, "dreamkeeper_schedule_ready", ident()) == 0


def test_the_vocabulary_condition_compares_the_volume_with_the_cr() -> None:
    c, clock = cluster(vocabularyRef={"name": "words"}), Clock(T0)
    c.put("ConfigMap", {"metadata": {"name": "words-memvocab", "namespace": NS}, "data": {}})
    c.put(
        "MemoryVocabulary",
        {
            "metadata": {"name": "words", "namespace": NS},
            "spec": {},
            "status": {"sha256": "a" * 64, "configMapName": "words-memvocab"},
        },
    )
    r = reconciler(c, clock)
    clock.at(hours=3)
    run(r, c)
    name = jobs(c)[0]
    job = c.get("Job", NS, name)
    assert job is not None
    assert job["spec"]["template"]["spec"]["initContainers"][0]["name"] == "seed-vocabulary"
    seed = {"result": "already-present", "path": "/data/agent/x", "sha256": "b" * 64, "sourceSha256": "a" * 64}
    c.finish_job(NS, name, message=report_message(), seed_message=json.dumps(seed))
    run(r, c)
    sync = condition(c, "VocabularyInSync")
    assert (sync["status"], sync["reason"]) == ("False", "Differs")
    assert "never overwritten" in sync["message"]
    assert status(c)["vocabulary"]["sha256"] == "b" * 64
    assert sample(r.metrics, "dreamkeeper_vocabulary_in_sync", ident()) == 0
    # The user adopts the CR's version on the volume; the next run reports it in sync.
    clock.at(hours=27)
    run(r, c)
    second = next(j for j in jobs(c) if j != name)
    seed["sha256"] = "a" * 64
    c.finish_job(NS, second, message=report_message(), seed_message=json.dumps(seed))
    run(r, c)
    assert condition(c, "VocabularyInSync")["status"] == "True"


def test_a_job_that_vanishes_before_it_is_counted_is_a_failed_cycle_counted_once() -> None:
    c, clock = cluster(), Clock(T0)
    r = reconciler(c, clock)
    clock.at(hours=3)
    run(r, c)
    name = jobs(c)[0]
    uid = c.objects[("Job", NS, name)]["metadata"]["uid"]
    c.delete_job(NS, name, uid)
    run(r, c)
    run(r, c)
    s = status(c)
    assert s["totals"]["cyclesFailed"] == 1
    assert s["lastRun"]["reason"] == "JobLost"
    assert condition(c, "LastRunSucceeded")["status"] == "False"


def test_a_cycle_whose_proposer_failed_sets_the_condition_and_a_warning_event() -> None:
    c, clock = cluster(), Clock(T0)
    r = reconciler(c, clock)
    clock.at(hours=3)
    run(r, c)
    why = "no usable reply to any of the 2 batch(es) asked (2 request(s) failed or not sent)"
    message = report_message(result="proposer-failed", proposer_failure=why, batches_failed=2, reviewed=9)
    c.finish_job(NS, jobs(c)[0], succeeded=False, exit_code=4, message=message)
    run(r, c)
    s = status(c)
    assert (s["totals"]["cyclesProposerFailed"], s["totals"]["cyclesFailed"], s["totals"]["batchesFailed"]) == (1, 0, 2)
    assert (s["lastRun"]["result"], s["lastRun"]["reason"]) == ("proposer-failed", "ProposerFailed")
    assert "lastSuccessfulTime" not in s
    last = condition(c, "LastRunSucceeded")
    assert (last["status"], last["reason"]) == ("False", "ProposerFailed") and why in last["message"]
    warnings = {e["reason"]: e["message"] for e in c.events if e["type"] == "Warning"}
    assert why in warnings["ProposerFailed"] and "2 proposer batch(es) failed" in warnings["ProposerRequestsFailed"]
    assert "CycleFailed" not in warnings
    metrics = r.metrics
    assert sample(metrics, "dreamkeeper_cycles_total", {**ident(), "result": "proposer-failed"}) == 1
    assert sample(metrics, "dreamkeeper_proposer_batches_total", {**ident(), "outcome": "failed"}) == 2


def test_lock_held_is_a_skip_not_a_success() -> None:
    c, clock = cluster(), Clock(T0)
    r = reconciler(c, clock)
    clock.at(hours=3)
    run(r, c)
    c.finish_job(NS, jobs(c)[0], succeeded=False, exit_code=3, message="skipped: lock held")
    run(r, c)
    s = status(c)
    assert s["totals"]["cyclesSkipped"] == 1
    assert s["lastRun"]["reason"] == "LockHeld"
    assert "lastSuccessfulTime" not in s
    assert condition(c, "LastRunSucceeded")["status"] == "False"


def test_the_agents_pause_marker_is_a_warning_skip_on_the_schedule() -> None:
    c, clock = cluster(), Clock(T0)
    r = reconciler(c, clock)
    clock.at(hours=3)
    run(r, c)
    why = "paused by the agent's memory audit (memory-audit/consolidation-paused.json: reason 'test')"
    c.finish_job(
        NS,
        jobs(c)[0],
        succeeded=False,
        exit_code=4,
        message=report_message(result="skipped", skip_reason=why, paused=1),
    )
    run(r, c)
    s = status(c)
    assert s["totals"]["cyclesSkipped"] == 1 and s["totals"]["paused"] == 1 and "lastSuccessfulTime" not in s
    assert s["lastRun"]["reason"] == "Paused" and s["lastRun"]["skipReason"] == why
    succeeded = condition(c, "LastRunSucceeded")
    assert (succeeded["status"], succeeded["reason"]) == ("False", "Paused") and why in succeeded["message"]
    (event,) = [e for e in c.events if e["reason"] == "CyclePaused"]
    assert event["type"] == "Warning" and why in event["message"]
    assert sample(r.metrics, "dreamkeeper_paused_cycles_total", ident()) == 1


def start_hourly_slot(r: ScheduleReconciler, c: FakeCluster, clock: Clock, hour: int) -> str:
    """Run the pass at ``hour`` (the Job is created then); returns the Job's name."""
    clock.at(hours=hour)
    c.now = clock.now
    run(r, c)
    return scheduled_job_name("nightly", T0 + timedelta(hours=hour))


def test_history_limits_prune_counted_jobs_only() -> None:
    c, clock = cluster(schedule="0 * * * *", successfulJobsHistoryLimit=1, failedJobsHistoryLimit=1), Clock(T0)
    r = reconciler(c, clock)
    for hour in (1, 2, 3):
        c.finish_job(NS, start_hourly_slot(r, c, clock, hour), message=report_message())
        run(r, c)
    c.finish_job(NS, start_hourly_slot(r, c, clock, 4), succeeded=False, message="boom")
    run(r, c)
    assert jobs(c) == sorted(
        [scheduled_job_name("nightly", T0 + timedelta(hours=3)), scheduled_job_name("nightly", T0 + timedelta(hours=4))]
    )
    assert status(c)["totals"]["cyclesCompleted"] == 3 and status(c)["totals"]["cyclesFailed"] == 1


def test_the_job_is_pinned_to_the_agents_node_with_its_tolerations_and_identity() -> None:
    c, clock = cluster(), Clock(T0)
    clock.at(hours=3)
    run(reconciler(c, clock), c)
    job = c.get("Job", NS, jobs(c)[0])
    assert job is not None
    pod = job["spec"]["template"]["spec"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}]
    assert pod["tolerations"][0]["key"] == "dedicated"
    assert (pod["securityContext"]["runAsUser"], pod["securityContext"]["fsGroup"]) == (1000, 2000)
    assert job["metadata"]["ownerReferences"][0]["kind"] == "DreamSchedule"


def test_deleting_a_schedule_removes_its_series() -> None:
    c, clock = cluster(), Clock(T0)
    r = reconciler(c, clock)
    run(r, c)
    assert sample(r.metrics, "dreamkeeper_cycles_total", {**ident(), "result": "failed"}) == 0
    uid = c.objects[("DreamSchedule", NS, "nightly")]["metadata"]["uid"]
    r.forget(NS, "nightly", uid)
    exposition = "\n".join(f"{s.name}{s.labels}" for family in r.metrics.registry.collect() for s in family.samples)
    assert "nightly" not in exposition


def test_a_hand_corrupted_status_field_is_rebuilt_not_a_crash_loop() -> None:
    c, clock = cluster(), Clock(T0)
    c.objects[("DreamSchedule", NS, "nightly")]["status"] = {"lastScheduleTime": "not a time", "lastRunNowToken": "x"}
    clock.at(hours=3)
    run(reconciler(c, clock), c)
    assert len(jobs(c)) == 1 and status(c)["lastRunNowToken"] == "x"


def test_a_deferral_lost_with_its_status_write_is_announced_on_the_next_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    c, clock = cluster(schedules=("alpha", "beta")), Clock(T0)
    r = reconciler(c, clock)
    clock.at(hours=1)
    c.edit_spec("DreamSchedule", NS, "alpha", runNowToken="go")
    c.edit_spec("DreamSchedule", NS, "beta", runNowToken="go")
    run(r, c, "alpha")
    original = c.patch_schedule_status

    def lost(namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        raise ConflictError(409, "Conflict", "simulated: the write was lost")

    monkeypatch.setattr(c, "patch_schedule_status", lost)
    run(r, c, "beta")
    monkeypatch.setattr(c, "patch_schedule_status", original)
    run(r, c, "beta")
    run(r, c, "beta")
    assert c.reasons().count("RunNowDeferred") == 1


def test_fixing_an_invalid_spec_makes_the_schedule_ready_again() -> None:
    c, clock = cluster(schedule="61 * * * *"), Clock(T0)
    r = reconciler(c, clock)
    clock.at(hours=1)
    run(r, c)
    assert condition(c, "Ready")["reason"] == "InvalidSchedule" and "nextScheduleTime" not in status(c)
    c.edit_spec("DreamSchedule", NS, "nightly", schedule="0 3 * * *")
    run(r, c)
    ready = condition(c, "Ready")
    assert (ready["status"], ready["reason"], ready["observedGeneration"]) == ("True", "Scheduled", 2)
    assert status(c)["nextScheduleTime"] == "2026-01-01T03:00:00Z"
    assert sample(r.metrics, "dreamkeeper_schedule_ready", ident()) == 1


def test_the_interval_gauge_is_absent_while_the_schedule_is_invalid() -> None:
    """The no-success alert divides by this cadence: no series while there is no next slot to measure from."""
    c, clock = cluster(schedule="61 * * * *"), Clock(T0)
    r = reconciler(c, clock)
    run(r, c)
    assert sample(r.metrics, "dreamkeeper_schedule_interval_seconds", ident()) is None
    c.edit_spec("DreamSchedule", NS, "nightly", schedule="0 * * * *")
    run(r, c)
    assert sample(r.metrics, "dreamkeeper_schedule_interval_seconds", ident()) == 3600
    c.edit_spec("DreamSchedule", NS, "nightly", timeZone="Mars/Olympus")
    run(r, c)
    assert sample(r.metrics, "dreamkeeper_schedule_interval_seconds", ident()) is None


def test_a_hand_edited_slot_annotation_on_a_running_job_does_not_stop_the_schedule() -> None:
    c, clock = cluster(), Clock(T0)
    r = reconciler(c, clock)
    clock.at(hours=3)
    run(r, c)
    name = jobs(c)[0]
    c.patch_job(NS, name, {"metadata": {"annotations": {"dreamkeeper.io/slot": "3am-ish"}}})
    clock.at(hours=3, minutes=1)
    assert run(reconciler(c, clock), c) == r.settings.poll_seconds  # a new process adopts it from the list
    active = status(c)["activeJob"]
    assert active["name"] == name and active["slot"] == "2026-01-01T00:00:00Z"  # the Job's creation time
    c.finish_job(NS, name, message=report_message())
    run(r, c)
    assert status(c)["totals"]["cyclesCompleted"] == 1


def test_an_invalid_spec_still_counts_its_jobs_but_prunes_no_history() -> None:
    c, clock = cluster(schedule="0 * * * *", successfulJobsHistoryLimit=1), Clock(T0)
    r = reconciler(c, clock)
    for hour in (1, 2):
        c.finish_job(NS, start_hourly_slot(r, c, clock, hour), message=report_message())
        run(r, c)
    last = start_hourly_slot(r, c, clock, 3)
    c.edit_spec("DreamSchedule", NS, "nightly", activeDeadlineSeconds=10)  # below the model's bound
    c.finish_job(NS, last, message=report_message())
    run(r, c)
    assert condition(c, "Ready")["reason"] == "InvalidSpec"
    assert status(c)["totals"]["cyclesCompleted"] == 3  # the claim's Jobs are still counted, once
    assert len(jobs(c)) == 2  # the limits cannot be read: nothing pruned until the spec is fixed
    c.edit_spec("DreamSchedule", NS, "nightly", activeDeadlineSeconds=600)
    run(r, c)
    assert jobs(c) == [last]
