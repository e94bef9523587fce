"""Issue 17's rules against the in-memory API server and as pure functions: the truth in status and Events,
stuck pods, stopped cycles, wake-ups, the vocabulary size limit, the operator's listening address.
The same behaviours on the real control plane: test_status_cluster.py, test_admission_cluster.py,
test_uninstall_cluster.py."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from typer.testing import CliRunner

from dreamkeeper.cli import _register, app
from dreamkeeper.kube import ANNOTATION_STOPPED
from dreamkeeper.kube.models import ProposerSpec
from dreamkeeper.kube.naming import run_now_job_name
from dreamkeeper.kube.results import outcome_of
from dreamkeeper.kube.slots import CronSchedule, ScheduleError
from dreamkeeper.kube.stuck import stuck_reason
from dreamkeeper.kube.vocabulary_reconciler import CONFIG_MAP_LIMIT_BYTES, VocabularyReconciler
from dreamkeeper.kube.wakeups import Wakeups
from tests.kube.fakes import FakeCluster, stamp
from tests.kube.test_reconcile import NS, T0, Clock, add_schedule, cluster, condition, jobs, reconciler, run, status


def test_an_impossible_cron_is_a_schedule_error_not_a_loop_of_exceptions() -> None:
    with pytest.raises(ScheduleError) as impossible:
        CronSchedule.parse("0 0 30 2 *", None)
    assert impossible.value.reason == "ImpossibleSchedule"
    CronSchedule.parse("0 0 29 2 *", None)  # leap days exist


def test_an_impossible_schedule_is_ready_false_with_one_event() -> None:
    c, clock = cluster(schedule="0 0 30 2 *"), Clock(T0)
    r = reconciler(c, clock)
    for hours in (1, 2, 3):
        clock.at(hours=hours)
        run(r, c)
    ready = condition(c, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "ImpossibleSchedule")
    assert c.reasons().count("ImpossibleSchedule") == 1  # on the transition, not on every pass


def test_cycle_started_says_where_in_plain_words() -> None:
    c, clock = cluster(runNowToken="go"), Clock(T0)
    del c.objects[("Pod", NS, "agent-0")]  # the agent is down
    r = reconciler(c, clock)
    run(r, c)
    (started,) = [e["message"] for e in c.events if e["reason"] == "CycleStarted"]
    assert "not pinned to a node: no running pod mounts the claim" in started and "on unpinned" not in started


def _waiting_pod(c: FakeCluster, job_name: str, reason: str, message: str, age: float) -> None:
    job = c.get("Job", NS, job_name)
    assert job is not None
    c.put(
        "Pod",
        {
            "metadata": {
                "name": f"{job_name}-pod",
                "namespace": NS,
                "labels": {"batch.kubernetes.io/controller-uid": job["metadata"]["uid"]},
                "creationTimestamp": stamp(c.now - timedelta(seconds=age)),
            },
            "status": {
                "phase": "Pending",
                "containerStatuses": [{"name": "dream", "state": {"waiting": {"reason": reason, "message": message}}}],
            },
        },
    )


def test_a_pod_that_can_never_start_is_stopped_after_the_grace_and_counted_with_its_reason() -> None:
    c, clock = cluster(runNowToken="go"), Clock(T0)
    r = reconciler(c, clock)
    clock.at(hours=1)
    run(r, c)
    name = run_now_job_name("nightly", "go", 1)
    c.now = clock.now
    _waiting_pod(c, name, "CreateContainerConfigError", 'secret "llm" not found', age=5)
    run(r, c)  # inside the grace: the Secret may be created a moment later
    assert ANNOTATION_STOPPED not in (c.get("Job", NS, name) or {})["metadata"].get("annotations", {})
    _waiting_pod(c, name, "CreateContainerConfigError", 'secret "llm" not found', age=60)
    run(r, c)
    job = c.get("Job", NS, name)
    assert job is not None and job["spec"]["activeDeadlineSeconds"] == 1
    assert job["metadata"]["annotations"][ANNOTATION_STOPPED].startswith("SecretUnavailable: container dream")
    assert (condition(c, "Ready")["status"], condition(c, "Ready")["reason"]) == ("False", "SecretUnavailable")
    assert "SecretUnavailable" in c.reasons()
    c.finish_job(NS, name, succeeded=False, reason="DeadlineExceeded")  # the Job controller's answer
    run(r, c)
    last = status(c)["lastRun"]
    assert (last["result"], last["reason"]) == ("failed", "SecretUnavailable")
    assert 'secret "llm" not found' in last["error"]
    # Ready stays False (the claim is fine, the Secret still is not) until a cycle is tried again.
    assert condition(c, "Ready")["reason"] == "SecretUnavailable"
    c.edit_spec("DreamSchedule", NS, "nightly", runNowToken="again")
    run(r, c)
    assert condition(c, "Ready")["reason"] == "Scheduled"


def test_only_permanent_waiting_reasons_are_stuck() -> None:
    now = T0
    pod: dict[str, Any] = {
        "metadata": {"name": "p", "creationTimestamp": stamp(now - timedelta(minutes=5))},
        "status": {"containerStatuses": [{"name": "dream", "state": {"waiting": {"reason": "ImagePullBackOff"}}}]},
    }
    assert stuck_reason([pod], now, 15) is None  # a registry blip clears; left to the deadline
    pod["status"]["initContainerStatuses"] = [
        {"name": "seed-vocabulary", "state": {"waiting": {"reason": "CreateContainerConfigError",
                                                          "message": 'configmap "w" not found'}}}
    ]  # fmt: skip
    stuck = stuck_reason([pod], now, 15)
    assert stuck is not None and (stuck.reason, stuck.container) == ("ConfigUnavailable", "seed-vocabulary")


def test_a_cycle_stopped_by_sigterm_is_counted_as_stopped() -> None:
    job: dict[str, Any] = {
        "metadata": {"name": "j", "uid": "u", "annotations": {}},
        "status": {"conditions": [{"type": "Failed", "status": "True", "reason": "PodFailed"}]},
    }
    pod: dict[str, Any] = {
        "metadata": {"name": "p", "creationTimestamp": stamp(T0)},
        "status": {"containerStatuses": [{"name": "dream", "state": {"terminated": {
            "exitCode": 143, "message": '{"result": "failed", "error": "CycleStopped: before gating", "folded": 24}'
        }}}]},
    }  # fmt: skip
    run = outcome_of(job, [pod], job_name="j", job_uid="u", trigger="schedule").run
    assert (run.result, run.reason, run.folded) == ("failed", "Stopped", 24)


def test_messages_are_one_line() -> None:
    job: dict[str, Any] = {"metadata": {"name": "j", "uid": "u"}, "status": {"conditions": [
        {"type": "Failed", "status": "True"}]}}  # fmt: skip
    pod: dict[str, Any] = {
        "metadata": {"name": "p", "creationTimestamp": stamp(T0)},
        "status": {"containerStatuses": [{"name": "dream", "state": {"terminated": {
            "exitCode": 1, "message": "invalid settings: 1 validation error\n  retention_days\n    must be >= 0"}}}]},
    }  # fmt: skip
    run = outcome_of(job, [pod], job_name="j", job_uid="u", trigger="schedule").run
    assert run.error is not None and "\n" not in run.error and "retention_days must be >= 0" in run.error


def test_excluded_namespaces_are_refused_in_status_with_nothing_started() -> None:
    c, clock = FakeCluster(), Clock(T0)
    add_schedule(c, "sneaky", runNowToken="go")
    r = reconciler(c, clock)
    body = c.get_schedule(NS, "sneaky")
    assert body is not None
    r.refuse_namespace(body)
    assert condition(c, "Ready", "sneaky")["reason"] == "NamespaceExcluded"
    assert jobs(c) == [] and "NamespaceExcluded" in c.reasons()


def test_wakeups_follow_the_references_of_each_schedule() -> None:
    w = Wakeups()
    a = w.track("a", NS, {"claimName": "data", "vocabularyRef": {"name": "words"}})
    b = w.track("b", NS, {"claimName": "data"})
    w.track("c", "elsewhere", {"claimName": "data"})
    assert w.wake_claim_users(NS, "data") == ["a", "b"] and a.is_set() and b.is_set()
    assert w.users_of_vocabulary(NS, "words") == ["a"]
    w.track("a", NS, {"claimName": "other"})  # the spec changed: the old references no longer wake it
    assert w.users_of_vocabulary(NS, "words") == [] and w.users_of_claim(NS, "data") == ["b"]
    w.forget("b")
    assert w.users_of_claim(NS, "data") == [] and "b" not in w.events
    assert isinstance(a, asyncio.Event)


def test_a_vocabulary_over_the_config_map_limit_is_refused_with_a_condition() -> None:
    c = FakeCluster()
    words = [f"w{i:05d}{'x' * 122}" for i in range(4096)]
    body = c.put(
        "MemoryVocabulary",
        {"metadata": {"name": "huge", "namespace": NS},
         "spec": {"extraCommonWords": words, "alwaysSpecificWords": [w.upper() for w in words]}},
    )  # fmt: skip
    VocabularyReconciler(c, clock=lambda: T0).reconcile(body)
    got = c.get("MemoryVocabulary", NS, "huge")
    assert got is not None
    (ready,) = got["status"]["conditions"]
    assert (ready["status"], ready["reason"]) == ("False", "TooLarge")
    assert f"at most {CONFIG_MAP_LIMIT_BYTES}" in ready["message"]
    assert "sha256" not in got["status"] and c.get("ConfigMap", NS, "huge-memvocab") is None


@pytest.mark.parametrize(
    ("url", "fine"),
    [("http://127.0.0.1:18099/v1", True), ("http://llm.ai.svc.cluster.local/v1", True), ("http://llm", True),
     ("http://llm.example/v1", False), ("http://localhost:80@evil.example/", False),
     ("http://127.0.0.1.evil.example/", False)],
)  # fmt: skip
def test_plain_http_only_with_the_opt_in_and_only_inside_the_cluster(url: str, fine: bool) -> None:
    spec = {"type": "openai", "model": "m", "baseURL": url, "apiKeySecretRef": {"name": "k", "key": "k"}}
    with pytest.raises(ValueError, match="allowPlainHTTP"):
        ProposerSpec.model_validate(spec)
    if fine:
        ProposerSpec.model_validate({**spec, "allowPlainHTTP": True})
        ProposerSpec.model_validate({**spec, "allowPlainHTTP": True, "apiKeySecretRef": None})  # a local server
    else:
        with pytest.raises(ValueError, match="only to loopback"):
            ProposerSpec.model_validate({**spec, "allowPlainHTTP": True})


@pytest.mark.parametrize(
    ("env", "expected"), [({}, "127.0.0.1"), ({"DREAMKEEPER_BIND": ""}, "127.0.0.1"), ({"DREAMKEEPER_BIND": "10.1.2.3"},
                                                                                       "10.1.2.3")]
)  # fmt: skip
def test_metrics_and_health_listen_on_loopback_unless_given_the_pod_ip(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], expected: str
) -> None:
    seen: list[Any] = []
    monkeypatch.setattr("dreamkeeper.kube.runner.run_operator", lambda options: seen.append(options))
    monkeypatch.delenv("DREAMKEEPER_BIND", raising=False)
    _register()
    result = CliRunner().invoke(app, ["operator", "-A"], env=env)
    assert result.exit_code == 0, result.output
    (options,) = seen
    assert (options.metrics_host, options.health_host) == (expected, expected)
    assert options.excluded == {"kube-system", "kube-public", "kube-node-lease"}
