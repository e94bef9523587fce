"""Termination messages -> RunSummary; totals arithmetic."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from dreamkeeper.consolidation.report import CycleReport
from dreamkeeper.kube.models import RunSummary, Totals
from dreamkeeper.kube.results import DreamSummary, add_run, add_slots, outcome_of, parse_dream_message

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def job(condition: str, reason: str | None = None) -> dict[str, Any]:
    cond: dict[str, Any] = {"type": condition, "status": "True", "lastTransitionTime": "2026-01-01T00:05:00Z"}
    if reason:
        cond["reason"] = reason
    return {
        "metadata": {"name": "j", "uid": "u", "labels": {"dreamkeeper.io/trigger": "schedule"}, "annotations": {}},
        "status": {"conditions": [cond]},
    }


def pod(exit_code: int, message: str, *, seed: tuple[int, str] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {
        "containerStatuses": [
            {
                "name": "dream",
                "state": {
                    "terminated": {
                        "exitCode": exit_code,
                        "message": message,
                        "startedAt": "2026-01-01T00:00:00Z",
                        "finishedAt": "2026-01-01T00:04:00Z",
                    }
                },
            }
        ]
    }
    if seed:
        status["initContainerStatuses"] = [
            {"name": "seed-vocabulary", "state": {"terminated": {"exitCode": seed[0], "message": seed[1]}}}
        ]
    return {"metadata": {"name": "p", "creationTimestamp": "2026-01-01T00:00:00Z"}, "status": status}


def test_every_count_of_a_real_cycle_report_reaches_the_run_summary() -> None:
    report = CycleReport(
        cycle_id="c1",
        started_at=T0,
        finished_at=T0 + timedelta(seconds=3),
        reviewed=5,
        withheld=6,
        folded=1,
        saved=2,
        archived=7,
        archived_with_replacement=4,
        ephemeral=3,
        rejected=2,
        repaired=1,
        protected=4,
        conflicts=1,
        hard_deletes=0,
        purged=2,
        specifics_lost=1,
        vocabulary_fallback=1,
        input_tokens=10,
        output_tokens=3,
        live_entries=90,
        archived_entries=12,
    )
    summary = parse_dream_message(report.summary_json())
    assert summary is not None
    for field in DreamSummary.model_fields:
        if field in ("result", "cycle_id", "skip_reason", "error", "started_at", "finished_at"):
            continue
        expected = getattr(report, field, None)
        if field == "duration_seconds":
            expected = report.duration_seconds
        assert getattr(summary, field) == expected, field
    out = outcome_of(job("Complete"), [pod(0, report.summary_json())], job_name="j", job_uid="u", trigger="schedule")
    assert out.succeeded and out.run.result == "completed" and out.run.archived == 7 and out.run.live_entries == 90
    assert out.run.duration_seconds == 3.0


def test_engine_skips_are_successful_skips() -> None:
    message = CycleReport(cycle_id="c", started_at=T0, result="skipped", skip_reason="minimum interval").summary_json()
    out = outcome_of(job("Complete"), [pod(0, message)], job_name="j", job_uid="u", trigger="schedule")
    assert (out.run.result, out.run.reason, out.succeeded) == ("skipped", "Skipped", True)
    assert out.run.skip_reason == "minimum interval"


def test_failures_are_classified_by_their_cause() -> None:
    failed_message = json.dumps({"result": "failed", "error": "store unreadable"})
    cases = [
        (job("Failed"), [pod(1, failed_message)], "failed", "CycleFailed", "store unreadable"),
        (job("Failed"), [pod(3, "lock held")], "skipped", "LockHeld", None),
        (job("Failed"), [pod(2, "invalid settings: x")], "failed", "InvalidSettings", "invalid settings: x"),
        (job("Failed", "DeadlineExceeded"), [pod(137, "")], "failed", "DeadlineExceeded", None),
        (job("Failed"), [pod(143, "")], "failed", "Stopped", "SIGTERM"),  # not Paused (4), not LockHeld (3)
        (job("Failed"), [pod(0, "", seed=(1, json.dumps({"result": "failed", "path": "/d", "message": "no dir"})))],
         "failed", "VocabularySeedFailed", "no dir"),
        (job("Failed", "BackoffLimitExceeded"), [], "failed", "PodFailed", "BackoffLimitExceeded"),
        (None, [], "failed", "JobLost", None),
    ]  # fmt: skip
    for body, pods, result, reason, error in cases:
        out = outcome_of(body, pods, job_name="j", job_uid="u", trigger="schedule")
        assert (out.run.result, out.run.reason) == (result, reason), (reason, out.run)
        assert not out.succeeded
        if error:
            assert error in (out.run.error or ""), out.run.error


def test_a_cycle_whose_proposer_failed_is_its_own_outcome_not_a_success() -> None:
    report = CycleReport(
        cycle_id="c",
        started_at=T0,
        result="proposer-failed",
        proposer_failure="no usable reply to any of the 3 batch(es) asked (3 request(s) failed or not sent)",
        batches_failed=3,
        folded=2,
    )
    out = outcome_of(job("Failed"), [pod(5, report.summary_json())], job_name="j", job_uid="u", trigger="schedule")
    assert (out.run.result, out.run.reason, out.succeeded) == ("proposer-failed", "ProposerFailed", False)
    assert "3 request(s) failed" in (out.run.error or "")
    assert (out.run.batches_failed, out.run.folded) == (3, 2)  # what the cycle did still counts
    totals = add_run(Totals(), out.run)
    assert (totals.cycles_proposer_failed, totals.cycles_failed, totals.batches_failed) == (1, 0, 3)
    assert totals.model_dump(by_alias=True)["cyclesProposerFailed"] == 1
    bare = outcome_of(job("Failed"), [pod(5, "")], job_name="j", job_uid="u", trigger="schedule")  # no summary
    assert (bare.run.result, bare.run.reason) == ("proposer-failed", "ProposerFailed")


def test_the_pause_marker_is_a_skip_that_is_not_a_success_and_says_why() -> None:
    why = "paused by the agent's memory audit (memory-audit/consolidation-paused.json: reason 'live entries dropped')"
    message = CycleReport(cycle_id="c", started_at=T0, result="skipped", skip_reason=why, paused=1).summary_json()
    out = outcome_of(job("Failed"), [pod(4, message)], job_name="j", job_uid="u", trigger="schedule")
    assert (out.run.result, out.run.reason, out.succeeded) == ("skipped", "Paused", False)
    assert out.run.skip_reason == why and out.run.model_dump()["paused"] == 1
    bare = outcome_of(job("Failed"), [pod(4, "")], job_name="j", job_uid="u", trigger="schedule")  # no summary
    assert (bare.run.reason, bare.run.skip_reason) == ("Paused", "paused by the agent's pause marker")


def test_the_first_write_reaches_the_run() -> None:
    first = T0 + timedelta(seconds=2)
    message = CycleReport(cycle_id="c", started_at=T0, first_write_at=first, result="completed").summary_json()
    out = outcome_of(job("Complete"), [pod(0, message)], job_name="j", job_uid="u", trigger="schedule")
    assert out.run.first_write_at == first and out.run.started_at == T0


def test_a_lock_held_exit_is_a_skip_even_when_the_container_left_a_summary() -> None:
    # Exit 3 normally writes no message; a JSON one (a stale file, a future CLI) must not break the count.
    message = json.dumps({"result": "failed", "error": "x", "skipReason": "from the summary"})
    out = outcome_of(job("Failed"), [pod(3, message)], job_name="j", job_uid="u", trigger="schedule")
    assert (out.run.result, out.run.reason) == ("skipped", "LockHeld")
    assert out.run.skip_reason == "another process holds the agent's cycle lock" and not out.succeeded


def test_unreadable_times_fall_back_to_the_next_source() -> None:
    body = job("Complete")
    body["metadata"]["annotations"] = {"dreamkeeper.io/slot": "garbled"}
    body["status"]["startTime"] = "2026-01-01T00:00:30Z"
    broken = pod(0, "")
    broken["status"]["containerStatuses"][0]["state"]["terminated"]["startedAt"] = "yesterday"
    out = outcome_of(body, [broken], job_name="j", job_uid="u", trigger="schedule")
    assert out.run.slot is None and out.run.reason == "NoSummary"
    assert out.run.started_at == datetime(2026, 1, 1, 0, 0, 30, tzinfo=UTC)
    assert out.run.duration_seconds == 210.0


def test_log_tail_fallback_is_kept_as_the_error() -> None:
    out = outcome_of(job("Failed"), [pod(1, "Traceback ...\nValueError: boom")], job_name="j", job_uid="u", trigger="x")
    assert out.run.reason == "CycleFailed" and "ValueError: boom" in (out.run.error or "")


def test_totals_add_each_run_and_slots() -> None:
    run = RunSummary.model_validate(
        {"jobName": "j", "jobUID": "u", "trigger": "schedule", "result": "completed", "reason": "Completed",
         "reviewed": 3, "archivedWithReplacement": 2, "ephemeral": 1, "rejected": 4, "inputTokens": 7}
    )  # fmt: skip
    totals = add_run(add_run(Totals(), run), run)
    assert (totals.cycles_completed, totals.reviewed, totals.archived_with_replacement) == (2, 6, 4)
    assert (totals.ephemeral, totals.rejected, totals.input_tokens) == (2, 8, 14)
    wire = totals.model_dump(by_alias=True)  # status.totals keeps its keys
    assert (wire["archivedEphemeral"], wire["mergesRejected"], wire["llmInputTokens"]) == (2, 8, 14)
    totals = add_slots(add_slots(totals, missed=3, skipped_reason="concurrent"), skipped_reason="concurrent")
    assert totals.missed_slots == 3 and totals.skipped_slots == {"concurrent": 2}


def test_an_oom_killed_cycle_is_reported_as_such_with_its_limit() -> None:
    """Issue 26: a real kubelet ends a container over its memory limit with reason OOMKilled and exit code 137 (the
    stand-in node agent never did); that is reported as OOMKilled with the limit and the remedy, not as an anonymous
    "exit code 137" CycleFailed."""
    killed = pod(137, "")
    killed["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] = "OOMKilled"
    killed["spec"] = {"containers": [{"name": "dream", "resources": {"limits": {"memory": "40Mi"}}}]}
    out = outcome_of(job("Failed", "BackoffLimitExceeded"), [killed], job_name="j", job_uid="u", trigger="schedule")
    assert (out.run.result, out.run.reason) == ("failed", "OOMKilled"), out.run
    assert not out.succeeded
    assert "OOM killer at its memory limit 40Mi (exit code 137)" in (out.run.error or "")
    assert "raise spec.resources.limits.memory" in (out.run.error or "")

    # The same exit code without the kubelet's reason (a SIGKILL from elsewhere) stays a plain failure.
    plain = outcome_of(job("Failed"), [pod(137, "")], job_name="j", job_uid="u", trigger="schedule")
    assert plain.run.reason == "CycleFailed"

    # The init container killed: no limit of its own (requests only), so the node ran out; named as such.
    seeded = pod(0, "", seed=(137, ""))
    seeded["status"]["initContainerStatuses"][0]["state"]["terminated"]["reason"] = "OOMKilled"
    out = outcome_of(job("Failed"), [seeded], job_name="j", job_uid="u", trigger="schedule")
    assert out.run.reason == "OOMKilled" and "seed-vocabulary container" in (out.run.error or ""), out.run
