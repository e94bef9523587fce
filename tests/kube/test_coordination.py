"""The Stop state machine and RestartAfter's decision, as pure functions of what a pass read."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from dreamkeeper.kube import ANNOTATION_AGENT_STOP, LABEL_MANAGED_BY, MANAGED_BY
from dreamkeeper.kube.coordination import (
    DELETE_GRACE_SECONDS,
    ClaimView,
    StopRecord,
    WorkloadView,
    cycle_changed_files,
    decide_stop,
    restart_value,
    stale_window_seconds,
    stop_limits,
)
from dreamkeeper.kube.models import AgentSpec, AgentStop, RunSummary

T0 = datetime(2026, 3, 1, 4, 0, tzinfo=UTC)
UID = "schedule-uid"
LIMITS = AgentSpec.model_validate(
    {
        "workloadRef": {"kind": "Deployment", "name": "rockbot"},
        "scaleDownTimeoutSeconds": 120,
        "maxDowntimeSeconds": 900,
    }
)
DEADLINE = 3600


def record(**changes: Any) -> StopRecord:
    fields: dict[str, Any] = {
        "schedule_uid": UID,
        "schedule": "agents/nightly",
        "job_name": "nightly-now-abc",
        "replicas": 2,
        "stopped_at": T0,
        "trigger": "run-now",
        "slot": T0,
        "run_now_token": "a",
    } | changes
    return StopRecord(**fields)


def stop(phase: str = "Stopping", **changes: Any) -> AgentStop:
    return record().status("Deployment", "rockbot", "Stopping").model_copy(update={"phase": phase, **changes})


def workload(replicas: int = 2, rec: StopRecord | None = None, *, found: bool = True) -> WorkloadView:
    if not found:
        return WorkloadView("Deployment", "rockbot", found=False)
    return WorkloadView("Deployment", "rockbot", found=True, replicas=replicas, resource_version="7", record=rec)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def decide(s: AgentStop | None, w: WorkloadView, c: ClaimView, seconds: float = 5) -> Any:
    return decide_stop(s, w, c, LIMITS, DEADLINE, at(seconds))


AGENT_RUNNING = ClaimView(agent_pods=("rockbot-0",))
FREE = ClaimView()


# ---- beginning and adopting ---------------------------------------------------------------------------------------


def test_nothing_to_do_without_a_record() -> None:
    assert decide(None, workload(), AGENT_RUNNING).step == "none"


def test_a_record_only_on_the_workload_is_adopted_and_nothing_is_scaled_in_that_pass() -> None:
    d = decide(None, workload(rec=record()), AGENT_RUNNING)
    assert d.step == "adopt" and d.adopted is not None
    assert (d.adopted.phase, d.adopted.replicas, d.adopted.job_name) == ("Stopping", 2, "nightly-now-abc")


def test_an_adopted_record_whose_job_exists_resumes_watching_the_cycle() -> None:
    d = decide(None, workload(0, rec=record()), ClaimView(job="active", job_uid="j"))
    assert d.step == "adopt" and d.adopted is not None and d.adopted.phase == "CycleRunning"


# ---- stopping -------------------------------------------------------------------------------------------------------


def test_the_scale_down_comes_once_the_status_holds_the_record() -> None:
    d = decide(stop(), workload(2, record()), AGENT_RUNNING)
    assert d.step == "scale-down"


def test_a_rescale_during_the_stop_is_scaled_down_again() -> None:
    assert decide(stop(), workload(1, record()), AGENT_RUNNING, seconds=30).step == "scale-down"


def test_the_cycle_waits_while_any_pod_mounts_the_claim() -> None:
    for claim in (AGENT_RUNNING, ClaimView(cycle_pods=("other-cycle",))):
        d = decide(stop(), workload(0, record()), claim, seconds=30)
        assert (d.step, d.reason) == ("wait", "WaitingForPods")


def test_the_cycle_starts_when_no_pod_mounts_the_claim_within_the_downtime_budget() -> None:
    d = decide(stop(), workload(0, record()), FREE, seconds=40)
    assert d.step == "start-cycle" and d.deadline_seconds == 900 - 40  # min(activeDeadlineSeconds, what is left)
    short = decide_stop(stop(), workload(0, record()), FREE, LIMITS, 300, at(40))
    assert short.deadline_seconds == 300


def test_a_scale_down_that_takes_too_long_restores_without_a_cycle() -> None:
    d = decide(stop(), workload(0, record()), AGENT_RUNNING, seconds=121)
    assert (d.step, d.reason, d.scale) == ("restore", "ScaleDownTimedOut", True)


def test_an_agent_that_came_back_after_the_timeout_is_not_scaled_twice() -> None:
    d = decide(stop(), workload(2, record()), AGENT_RUNNING, seconds=121)
    assert (d.step, d.reason, d.scale) == ("restore", "ScaleDownTimedOut", False)


def test_another_cycle_on_the_claim_is_waited_for_then_the_stop_gives_up() -> None:
    busy = ClaimView(other_jobs_active=("other-nightly",))
    assert (decide(stop(), workload(0), busy, 30).step, decide(stop(), workload(0), busy, 30).reason) == (
        "wait",
        "ClaimBusy",
    )
    d = decide(stop(), workload(0), busy, 121)
    assert (d.step, d.reason) == ("restore", "ClaimBusy")


def test_no_budget_left_for_a_cycle_restores() -> None:
    limits = LIMITS.model_copy(update={"max_downtime_seconds": 150})
    d = decide_stop(stop(), workload(0), FREE, limits, DEADLINE, at(100))
    assert (d.step, d.reason) == ("restore", "DowntimeExhausted")


def test_a_cycle_that_could_not_be_started_restores() -> None:
    d = decide(stop(reason="CycleNotStarted"), workload(0), FREE)
    assert (d.step, d.reason, d.scale) == ("restore", "CycleNotStarted", True)


def test_a_job_found_while_stopping_is_adopted_never_restored_beside() -> None:
    """The status write of the pass that created the Job was lost: its pod mounts the claim, but it is ours."""
    d = decide(stop(), workload(0), ClaimView(cycle_pods=("c",), job="active", job_uid="j"), seconds=500)
    assert d.step == "adopt" and d.adopted is not None and d.adopted.phase == "CycleRunning"


# ---- the cycle and the restore -------------------------------------------------------------------------------------


def test_never_restore_while_the_cycle_job_is_active() -> None:
    d = decide(stop("CycleRunning"), workload(0), ClaimView(cycle_pods=("c",), job="active", job_uid="j"), 600)
    assert (d.step, d.reason) == ("wait", "CycleRunning")


def test_never_restore_while_a_cycle_pod_still_mounts_the_claim() -> None:
    for claim in (ClaimView(cycle_pods=("c",), job="finished"), ClaimView(cycle_pods=("c",), job="absent")):
        d = decide(stop("CycleRunning"), workload(0), claim, 600)
        assert (d.step, d.reason) == ("wait", "WaitingForCycle")


@pytest.mark.parametrize(("job", "reason"), [("finished", "CycleFinished"), ("absent", "CycleLost")])
def test_a_finished_failed_or_deleted_cycle_restores_the_recorded_replicas(job: Any, reason: str) -> None:
    d = decide(stop("CycleRunning"), workload(0), ClaimView(job=job), 60)
    assert (d.step, d.reason, d.scale) == ("restore", reason, True)


def test_a_restore_whose_status_write_was_lost_does_not_scale_again() -> None:
    d = decide(stop("CycleRunning"), workload(2, record()), ClaimView(job="finished"), 60)
    assert (d.step, d.scale) == ("restore", False) and "already restored" in d.message


def test_a_workload_rescaled_by_someone_during_the_stop_is_left_alone() -> None:
    d = decide(stop("CycleRunning"), workload(5, record()), ClaimView(job="finished"), 60)
    assert (d.step, d.scale) == ("restore", False) and "rescaled to 5" in d.message


def test_a_deleted_workload_has_nothing_to_restore() -> None:
    d = decide(stop("CycleRunning"), workload(found=False), ClaimView(job="finished"), 60)
    assert (d.step, d.scale) == ("restore", False) and "gone" in d.message


def test_a_cycle_outliving_the_downtime_bound_is_deleted_then_restored() -> None:
    running = ClaimView(cycle_pods=("c",), job="active", job_uid="j")
    assert decide(stop("CycleRunning"), workload(0), running, 900 + DELETE_GRACE_SECONDS).step == "wait"
    assert decide(stop("CycleRunning"), workload(0), running, 901 + DELETE_GRACE_SECONDS).step == "delete-cycle"


def test_a_restored_stop_is_released() -> None:
    assert decide(stop("Restored", reason="CycleFinished"), workload(2, record()), FREE).step == "release"


def test_limits_fall_back_to_the_defaults_when_spec_agent_was_removed_mid_stop() -> None:
    limits = stop_limits(None)
    assert (limits.scale_down_timeout_seconds, limits.max_downtime_seconds) == (300, 1800)


# ---- reading the workload and the claim ---------------------------------------------------------------------------


def _deployment(annotation: str | None, replicas: int | None = 2) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "rockbot", "resourceVersion": "9"}
    if annotation is not None:
        meta["annotations"] = {ANNOTATION_AGENT_STOP: annotation}
    spec: dict[str, Any] = {"template": {"spec": {"securityContext": {"runAsUser": 1000}}}}
    if replicas is not None:
        spec["replicas"] = replicas
    return {"metadata": meta, "spec": spec}


def test_the_record_round_trips_through_the_annotation() -> None:
    original = record(trigger="schedule", run_now_token=None)
    view = WorkloadView.of(_deployment(original.annotation()), "Deployment", "rockbot", UID)
    assert view.record == original and view.holder is None and view.replicas == 2


def test_an_absent_replicas_field_is_one() -> None:
    assert WorkloadView.of(_deployment(None, replicas=None), "Deployment", "rockbot", UID).replicas == 1


def test_another_schedules_record_or_garbage_holds_the_workload() -> None:
    other = WorkloadView.of(_deployment(record(schedule_uid="x").annotation()), "Deployment", "rockbot", UID)
    assert other.record is None and other.holder == "agents/nightly"
    garbage = WorkloadView.of(_deployment("{not json"), "Deployment", "rockbot", UID)
    assert garbage.record is None and garbage.holder == "unreadable"
    assert StopRecord.parse('{"replicas": -1}') is None


def _pod(name: str, phase: str, *, ours: bool = False, claim: str = "agent-data", deleting: bool = False) -> Any:
    meta: dict[str, Any] = {"name": name, "labels": {LABEL_MANAGED_BY: MANAGED_BY} if ours else {"app": "agent"}}
    if deleting:
        meta["deletionTimestamp"] = "2026-03-01T04:00:00Z"
    return {
        "metadata": meta,
        "spec": {"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": claim}}]},
        "status": {"phase": phase},
    }


def test_claim_users_are_pods_that_mount_it_and_have_not_finished() -> None:
    pods = [
        _pod("agent-a", "Running"),
        _pod("agent-b", "Running", deleting=True),  # terminating: it may still write
        _pod("agent-c", "Succeeded"),
        _pod("other", "Running", claim="elsewhere"),
        _pod("cycle", "Pending", ours=True),
    ]
    job = {
        "metadata": {"name": "j", "uid": "ju", "ownerReferences": [{"uid": UID}]},
        "status": {"active": 1},
    }
    view = ClaimView.of(pods, [job], "agent-data", "j", UID)
    assert view.agent_pods == ("agent-a", "agent-b") and view.cycle_pods == ("cycle",)
    assert (view.job, view.job_uid, view.other_jobs_active) == ("active", "ju", ())
    foreign = ClaimView.of([], [job], "agent-data", "j", "another-uid")
    assert foreign.job == "absent" and foreign.other_jobs_active == ("j",)


# ---- RestartAfter ---------------------------------------------------------------------------------------------------


def run(result: str = "completed", reason: str = "Completed", **counts: int) -> RunSummary:
    return RunSummary.model_validate(
        {"jobName": "j", "jobUID": "u", "trigger": "schedule", "result": result, "reason": reason, **counts}
    )


@pytest.mark.parametrize(
    ("summary", "changed"),
    [
        (run(archived=3, saved=1), True),
        (run(reviewed=4), True),  # reviewed entries are stamped: files changed
        (run(purged=1), True),
        (run(), False),  # nothing eligible, nothing written
        (run("skipped", "Skipped"), False),
        (run("skipped", "LockHeld"), False),
        (run("skipped", "Paused"), False),  # the pause marker: nothing written, nothing to reload
        (run(staleWriteBacks=2), True),  # only stale copies repaired: written all the same
        (run("failed", "CycleFailed"), True),  # it may have applied part of its journal
        (run("failed", "DeadlineExceeded"), True),
        (run("failed", "JobLost"), True),
        (run("completed", "NoSummary"), True),
        (run("failed", "VocabularySeedFailed"), False),
        (run("failed", "InvalidSettings"), False),
        (run("failed", "PodFailed"), False),
    ],
)
def test_a_restart_follows_every_run_that_may_have_changed_files(summary: RunSummary, changed: bool) -> None:
    assert cycle_changed_files(summary) is changed


def test_the_restart_value_is_fixed_per_restart_and_the_window_is_measured_from_when_it_went_stale() -> None:
    requested = T0 + timedelta(seconds=3, microseconds=250_000)
    assert restart_value(requested) == "2026-03-01T04:00:03Z" == restart_value(requested)
    assert stale_window_seconds(T0, requested) == 3.25
    assert stale_window_seconds(None, requested) is None
