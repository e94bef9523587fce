"""The operator against the real control plane (tests/cluster): real apiserver, controllers, scheduler, and the
test node agent running the cycle's pod as local processes on a hostPath PersistentVolume.

The operator runs as a subprocess authenticated as its ServiceAccount, bound to exactly the generated Role.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from codegen.rbac import operator_binding, operator_role

from dreamkeeper.coverage import VOCABULARY_FILE
from dreamkeeper.kube import LABEL_CLAIM
from dreamkeeper.kube.models import MemoryVocabularySpec
from dreamkeeper.kube.naming import label_value
from dreamkeeper.kube.slots import CronSchedule
from dreamkeeper.kube.vocabulary_render import render
from tests.cluster.fixtures import KubeCluster
from tests.cluster.kubeapi import ApiError, namespaced
from tests.kube.cluster_support import (
    FAR_AWAY,
    OPERATOR_SA,
    Env,
    OperatorProcess,
    condition_of,
    events_of,
    eventually,
    has_reasons,
    jobs_of,
    make_agent,
    read_cycle_report,
    schedule_path,
    settled_events,
    status_of,
    unbound_claim,
    vocabulary_path,
    wait_seconds,
)

pytestmark = pytest.mark.cluster

WORDS = {"extraCommonWords": ["briefing", "triage"], "alwaysSpecificWords": ["May", "Will", "Rose"]}


def _vocabulary(env: Env) -> bytes:
    env.cluster.api.create(
        vocabulary_path(env.ns, ""),
        {
            "apiVersion": "dreamkeeper.io/v1alpha1",
            "kind": "MemoryVocabulary",
            "metadata": {"name": "words"},
            "spec": WORDS,
        },
    )
    rendered = render(MemoryVocabularySpec.model_validate(WORDS))
    got = eventually(
        env.cluster,
        "MemoryVocabulary rendered",
        lambda: (env.cluster.api.get(vocabulary_path(env.ns, "words")).get("status") or {}).get("sha256"),
        timeout=60,
    )
    assert got == rendered.sha256
    config_map = env.cluster.api.get(namespaced(env.ns, "configmaps", "words-memvocab"))
    assert config_map["data"][VOCABULARY_FILE].encode() == rendered.content
    return rendered.content


def test_end_to_end_run_now_on_the_agents_volume_in_a_restricted_namespace(env: Env) -> None:
    api = env.cluster.api
    api.patch(
        f"/api/v1/namespaces/{env.ns}", {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}
    )
    # The namespace really enforces "restricted": a pod without the restricted securityContext is refused.
    with pytest.raises(ApiError) as refused:
        api.create(
            namespaced(env.ns, "pods"),
            {"metadata": {"name": "lax"}, "spec": {"containers": [{"name": "c", "image": "x", "command": ["true"]}]}},
        )
    assert refused.value.status == 403 and "PodSecurity" in str(refused.value)

    agent_dir = make_agent(env.cluster, env.ns, env.host)
    (agent_dir / VOCABULARY_FILE).unlink()  # the volume has no vocabulary yet: the init container seeds it
    env.operator.start()
    rendered = _vocabulary(env)
    env.schedule(
        "nightly",
        vocabularyRef={"name": "words"},
        runNowToken="first",
        # No blast-radius hold (the sample's backlog is over the cap: tests/kube/test_blast_radius_cluster.py).
        safeguards={"minIntervalHours": 0, "retentionDays": 90, "archiveCap": 1.0},
        activeDeadlineSeconds=600,
    )
    status = env.wait_status("nightly", "first cycle counted", lambda s: s.get("lastRun"))
    run = status["lastRun"]
    assert run["result"] == "completed", run
    assert status["lastRunNowToken"] == "first"

    # The Job's pod was admitted under "restricted", pinned to the agent's node, and really ran the cycle.
    (job,) = jobs_of(env.cluster, env.ns)
    pod_spec = job["spec"]["template"]["spec"]
    node = env.cluster.node_name
    terms = pod_spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0]["matchFields"][0]["values"] == [node]
    assert job["metadata"]["ownerReferences"][0]["kind"] == "DreamSchedule"
    report = read_cycle_report(agent_dir, run["cycleId"])
    for field in (
        "reviewed", "withheld", "archived", "archivedWithReplacement", "ephemeral", "rejected", "protected",
        "purged", "liveEntries", "archivedEntries", "hardDeletes",
    ):  # fmt: skip
        assert run[field] == report[field], field
    assert report["archived"] > 0 and report["hardDeletes"] == 0
    totals = status["totals"]
    assert totals["cyclesCompleted"] == 1 and totals["archivedWithReplacement"] == report["archivedWithReplacement"]

    # The init container created the vocabulary from the CR; the volume now matches it.
    assert (agent_dir / VOCABULARY_FILE).read_bytes() == rendered
    assert status["vocabulary"]["result"] == "created"
    sync = condition_of(status, "VocabularyInSync")
    assert sync is not None and sync["status"] == "True", sync
    ready = condition_of(status, "Ready")
    assert ready is not None and ready["status"] == "True" and ready["observedGeneration"] >= 1

    # Events and /metrics show the cycle's real counts.
    events = settled_events(env.cluster, env.ns, "nightly", has_reasons("CycleStarted", "CycleCompleted"))
    reasons = {e["reason"]: e["message"] for e in events}
    assert "CycleStarted" in reasons
    assert f"archived {report['archived']}" in reasons["CycleCompleted"]
    if report["purged"]:
        assert "Purged" in reasons
    ident = {"dreamschedule": "nightly", "dreamschedule_namespace": env.ns}
    op = env.operator

    def settles(name: str, want: float, **labels: str) -> bool:
        return op.settled_metric(name, want, **labels, **ident) == want

    assert settles("dreamkeeper_cycles_total", 1, result="completed")
    assert settles("dreamkeeper_archived_total", report["archivedWithReplacement"], kind="with_replacement")
    assert settles("dreamkeeper_archived_total", report["ephemeral"], kind="ephemeral")
    assert settles("dreamkeeper_entries_reviewed_total", report["reviewed"])
    assert settles("dreamkeeper_purged_total", report["purged"])
    assert settles("dreamkeeper_hard_deletes_total", 0)
    assert settles("dreamkeeper_live_entries", report["liveEntries"])
    assert settles("dreamkeeper_vocabulary_in_sync", 1)
    assert op.metric("dreamkeeper_last_success_timestamp_seconds", **ident)
    assert op.metric("dreamkeeper_next_run_timestamp_seconds", **ident)
    assert "namespace=" not in op.metrics_text().replace("dreamschedule_namespace=", "")

    # The agent's operator edits the file on the volume; the next cycle leaves it byte-identical and says so.
    edited = b'// edited on the volume\n{ "alwaysSpecificWords": ["May", "Will", "Rose", "Juniper"], }\n'
    (agent_dir / VOCABULARY_FILE).write_bytes(edited)
    env.patch_spec("nightly", runNowToken="second")
    status = env.wait_status(
        "nightly",
        "second cycle counted",
        lambda s: s.get("lastRunNowToken") == "second" and s.get("totals", {}).get("cyclesCompleted", 0) >= 2,
    )
    assert (agent_dir / VOCABULARY_FILE).read_bytes() == edited
    assert status["vocabulary"]["result"] == "already-present"
    assert status["vocabulary"]["sha256"] == hashlib.sha256(edited).hexdigest()
    sync = condition_of(status, "VocabularyInSync")
    assert sync is not None and (sync["status"], sync["reason"]) == ("False", "Differs"), sync
    assert settles("dreamkeeper_vocabulary_in_sync", 0)

    # Deleting the schedule removes its series; its Jobs go with it (owner references).
    api.delete(schedule_path(env.ns, "nightly"))
    eventually(env.cluster, "series removed", lambda: op.metric("dreamkeeper_cycles_total", **ident) is None, 60)
    eventually(env.cluster, "jobs garbage-collected", lambda: not jobs_of(env.cluster, env.ns), 90)
    assert op.tracebacks() == [], op.log_text()[-3000:]


def test_a_dead_model_endpoint_is_a_proposer_failed_cycle_with_a_warning(env: Env) -> None:
    """#18 item 3 end to end: the cycle's pod really runs against a closed port, exits 5, and the operator says so
    (not "completed")."""
    api = env.cluster.api
    agent_dir = make_agent(env.cluster, env.ns, env.host)
    api.create(namespaced(env.ns, "secrets"), {"metadata": {"name": "llm"}, "stringData": {"key": "unused"}})
    env.operator.start()
    env.schedule(
        "nightly",
        runNowToken="first",
        safeguards={"minIntervalHours": 0},
        proposer={
            "type": "openai",
            "model": "m",
            "baseURL": "http://127.0.0.1:9/v1",  # discard: nothing listens, the connection is refused
            "allowPlainHTTP": True,  # loopback: allowed with the opt-in
            "apiKeySecretRef": {"name": "llm", "key": "key"},
            "timeoutSeconds": 5,
        },
        activeDeadlineSeconds=600,
    )
    status = env.wait_status("nightly", "the cycle counted", lambda s: s.get("lastRun"))
    run = status["lastRun"]
    assert (run["result"], run["reason"]) == ("proposer-failed", "ProposerFailed"), run
    assert "no usable reply" in run["error"] and run["batchesFailed"] >= 1 and run["batchesUsable"] == 0
    assert status["totals"]["cyclesProposerFailed"] == 1 and "lastSuccessfulTime" not in status
    last = condition_of(status, "LastRunSucceeded")
    assert last is not None and (last["status"], last["reason"]) == ("False", "ProposerFailed"), last
    report = read_cycle_report(agent_dir, run["cycleId"])
    assert report["result"] == "proposer-failed" and report["hardDeletes"] == 0
    (job,) = jobs_of(env.cluster, env.ns)
    assert any(c["type"] == "Failed" for c in job["status"]["conditions"])  # exit 5: the Job failed
    settled = settled_events(env.cluster, env.ns, "nightly", has_reasons("ProposerFailed"))
    events = [e for e in settled if e["reason"] == "ProposerFailed"]
    assert events and events[0]["type"] == "Warning" and "no usable reply" in events[0]["message"]
    ident = {"dreamschedule": "nightly", "dreamschedule_namespace": env.ns}
    assert env.operator.settled_metric("dreamkeeper_cycles_total", 1, result="proposer-failed", **ident) == 1
    assert env.operator.tracebacks() == [], env.operator.log_text()[-3000:]


def test_restarts_never_double_count_duplicate_a_job_or_replay_a_missed_slot(env: Env) -> None:
    api = env.cluster.api
    make_agent(env.cluster, env.ns, env.host)
    daily = CronSchedule.parse("0 0 * * *", None)
    latest = daily.latest_at_or_before(datetime.now(UTC))
    # As if the operator had been down for three days: the last slot acted on was 3 days before the latest.
    env.schedule("daily", schedule="0 0 * * *", safeguards={"minIntervalHours": 0})
    stale = (latest - timedelta(days=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    api.patch(schedule_path(env.ns, "daily") + "/status", {"status": {"lastScheduleTime": stale}})

    env.operator.start()
    eventually(env.cluster, "the latest slot's Job", lambda: jobs_of(env.cluster, env.ns), timeout=60)
    env.operator.restart(kill=True)  # SIGKILL while the cycle runs
    env.operator.restart(kill=True)
    status = env.wait_status("daily", "cycle counted", lambda s: s.get("lastRun"))
    env.operator.restart()  # and once more after counting
    wait_seconds(5)
    status = env.status("daily")
    jobs = jobs_of(env.cluster, env.ns)
    assert [j["metadata"]["annotations"]["dreamkeeper.io/slot"] for j in jobs] == [
        latest.strftime("%Y-%m-%dT%H:%M:%SZ")
    ]
    assert status["totals"]["cyclesCompleted"] == 1
    assert status["totals"]["missedSlots"] == 2  # the two slots between, counted once, never run
    assert status["lastScheduleTime"] == latest.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert len(status["countedJobUIDs"]) == 1
    completed = [e for e in events_of(env.cluster, env.ns, "daily") if e["reason"] == "CycleCompleted"]
    assert len(completed) == 1
    ident = {"dreamschedule": "daily", "dreamschedule_namespace": env.ns}
    assert env.operator.settled_metric("dreamkeeper_cycles_total", 1, result="completed", **ident) == 1
    assert env.operator.settled_metric("dreamkeeper_missed_slots_total", 2, **ident) == 2


def test_two_schedules_on_one_claim_never_run_two_cycles_at_once(env: Env) -> None:
    make_agent(env.cluster, env.ns, env.host)
    # Another cycle holds the claim when the operator meets both schedules, so both must defer, deterministically
    # (racing two fast cycles against each other sometimes let the first finish before the second was seen). A
    # suspended Job is active and starts no pod.
    jobs = namespaced(env.ns, "jobs", group="batch")
    blocker = "another-cycle"
    env.cluster.api.create(
        jobs,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": blocker, "labels": {LABEL_CLAIM: label_value("agent-data")}},
            "spec": {
                "suspend": True,
                "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}},
            },
        },
    )
    env.schedule("alpha", runNowToken="go", safeguards={"minIntervalHours": 0})
    env.schedule("beta", runNowToken="go", safeguards={"minIntervalHours": 0})
    env.operator.start()

    def reasons(name: str) -> list[str]:
        return [e["reason"] for e in events_of(env.cluster, env.ns, name)]

    eventually(
        env.cluster,
        "both run-now requests deferred",
        lambda: all("RunNowDeferred" in reasons(n) for n in ("alpha", "beta")),
        timeout=120,
    )
    deferred = [e["message"] for e in events_of(env.cluster, env.ns, "alpha") if e["reason"] == "RunNowDeferred"]
    assert f"Job {blocker} is active on the claim" in deferred[0], deferred  # names what it waits for
    assert [j["metadata"]["name"] for j in jobs_of(env.cluster, env.ns)] == [blocker]  # nothing started
    env.cluster.api.delete(f"{jobs}/{blocker}", propagationPolicy="Background")
    most_active = 0

    def both_done() -> bool:
        nonlocal most_active
        ours = [j for j in jobs_of(env.cluster, env.ns) if j["metadata"]["name"] != blocker]
        most_active = max(most_active, len([j for j in ours if not _finished(j)]))
        return all(
            env.status(n).get("lastRunNowToken") == "go" and env.status(n).get("lastRun") for n in ("alpha", "beta")
        )

    eventually(env.cluster, "both run-now cycles done", both_done, timeout=240, interval=0.2)
    assert most_active == 1


def _finished(job: dict[str, Any]) -> bool:
    return any(
        c["status"] == "True" and c["type"] in ("Complete", "Failed")
        for c in job.get("status", {}).get("conditions", [])
    )


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ({"schedule": "every day"}, "spec.schedule"),
        ({"proposer": {"type": "openai"}}, "proposer.model is required"),
        ({"proposer": {"type": "gemini"}}, "spec.proposer.type"),
        ({"securityContext": {"runAsUser": 0}}, "spec.securityContext.runAsUser"),
        ({"agentPath": "../etc"}, "spec.agentPath"),
        ({"safeguards": {"similarityThreshold": 1.5}}, "spec.safeguards.similarityThreshold"),
        ({"claimName": "Not_A_Name"}, "spec.claimName"),
    ],
)
def test_the_api_server_rejects_invalid_specs(
    crds: KubeCluster, kube_namespace: str, spec: dict[str, Any], needle: str
) -> None:
    body = {
        "apiVersion": "dreamkeeper.io/v1alpha1",
        "kind": "DreamSchedule",
        "metadata": {"name": "bad"},
        "spec": {"schedule": "@daily", "claimName": "agent-data", **spec},
    }
    with pytest.raises(ApiError) as rejected:
        crds.api.create(schedule_path(kube_namespace, ""), body)
    assert rejected.value.status == 422
    assert needle in str(rejected.value), str(rejected.value)


def test_operator_marks_unusable_specs_not_ready_and_claim_name_is_immutable(env: Env) -> None:
    unbound_claim(env.cluster, env.ns, "exclusive", mode="ReadWriteOncePod")
    unbound_claim(env.cluster, env.ns, "agent-data")
    env.operator.start()
    cases = {
        "bad-cron": ({"schedule": "61 * * * *"}, "InvalidSchedule"),
        "bad-zone": ({"timeZone": "Mars/Olympus"}, "InvalidTimeZone"),
        "no-claim": ({"claimName": "missing"}, "ClaimNotFound"),
        "rwop": ({"claimName": "exclusive", "runNowToken": "x"}, "ReadWriteOncePodClaim"),
        "no-vocab": ({"vocabularyRef": {"name": "absent"}}, "VocabularyNotFound"),
    }
    for name, (spec, _) in cases.items():
        env.schedule(name, **spec)
    for name, (_, reason) in cases.items():

        def probe(s: dict[str, Any], reason: str = reason) -> bool:
            ready = condition_of(s, "Ready")
            return ready is not None and ready["status"] == "False" and ready["reason"] == reason

        env.wait_status(name, f"Ready=False/{reason}", probe, timeout=60)
    assert jobs_of(env.cluster, env.ns) == []  # RWOP fails fast: no Pending pod waiting forever

    with pytest.raises(ApiError) as immutable:
        env.patch_spec("no-claim", claimName="other")
    assert immutable.value.status == 422 and "claimName is immutable" in str(immutable.value)

    listing = env.cluster.kubectl("get", "dreamkeeper", "-n", env.ns)  # the category lists both kinds
    assert "bad-cron" in listing.stdout
    wide = env.cluster.kubectl("get", "dreamschedules", "-n", env.ns, "-o", "wide").stdout.splitlines()[0]
    for column in ("SCHEDULE", "SUSPENDED", "LAST RUN", "RESULT", "ARCHIVED", "REJECTED", "PROTECTED", "AGE", "READY"):
        assert column in wide, wide


def test_the_operator_service_account_has_least_privilege(env: Env) -> None:
    subject = f"system:serviceaccount:{env.ns}:{OPERATOR_SA}"

    def can(verb: str, resource: str, subresource: str = "") -> bool:
        extra = [f"--subresource={subresource}"] if subresource else []
        result = env.cluster.kubectl(
            "auth", "can-i", verb, resource, *extra, "-n", env.ns, f"--as={subject}", check=False
        )
        return result.stdout.strip() == "yes"

    assert can("create", "jobs.batch") and can("patch", "dreamschedules.dreamkeeper.io")
    # spec.agent: read and annotate the agent's workload, change its replicas only through the scale subresource.
    for kind in ("deployments.apps", "statefulsets.apps"):
        assert can("get", kind) and can("patch", kind)
        assert not can("update", kind) and not can("delete", kind) and not can("create", kind)
        assert not can("list", kind) and not can("watch", kind)
    assert can("patch", "deployments.apps", subresource="scale")
    assert can("patch", "statefulsets.apps", subresource="scale")
    assert not can("update", "deployments.apps", subresource="scale")
    assert not can("patch", "replicasets.apps") and not can("patch", "daemonsets.apps")
    assert not can("get", "secrets")
    assert not can("create", "pods")
    assert not can("delete", "dreamschedules.dreamkeeper.io")
    assert not can("list", "namespaces")
    assert json.loads(env.cluster.kubectl("get", "role", "dreamkeeper-operator", "-n", env.ns, "-o", "json").stdout)


def test_cluster_scope_under_a_cluster_role(crds: KubeCluster, kube_namespace: str, tmp_path: Path) -> None:
    """`--all-namespaces` with the same rules as a ClusterRole: the operator serves any namespace."""
    api, rbac = crds.api, "/apis/rbac.authorization.k8s.io/v1"
    name = f"dreamkeeper-operator-{kube_namespace}"
    role = operator_role(name, None)
    binding = operator_binding(name, role, OPERATOR_SA, kube_namespace)
    api.create(f"{rbac}/clusterroles", role)
    api.create(f"{rbac}/clusterrolebindings", binding)
    # A namespace the operator is told not to serve (as kube-system is by default; the admission policy keeps
    # schedules out of the system namespaces, so an ordinary one stands in for it here).
    excluded = crds.create_namespace(f"{kube_namespace[:50]}-excl")
    operator = OperatorProcess(
        crds, [], crds.service_account_kubeconfig(kube_namespace, OPERATOR_SA, create=True), tmp_path,
        "--exclude-namespace", excluded,
    )  # fmt: skip
    try:
        for ns, extra in ((kube_namespace, {}), (excluded, {"runNowToken": "go"})):
            unbound_claim(crds, ns, "agent-data")
            api.create(
                schedule_path(ns, ""),
                {"apiVersion": "dreamkeeper.io/v1alpha1", "kind": "DreamSchedule", "metadata": {"name": "wide"},
                 "spec": {"schedule": FAR_AWAY, "claimName": "agent-data", **extra}},
            )  # fmt: skip
        operator.start()

        def ready(ns: str, wanted: tuple[str, str]) -> bool:
            condition = condition_of(status_of(crds, ns, "wide"), "Ready")
            return condition is not None and (condition["status"], condition["reason"]) == wanted

        eventually(crds, "Ready under cluster scope", lambda: ready(kube_namespace, ("True", "Scheduled")), 90)
        eventually(crds, "excluded", lambda: ready(excluded, ("False", "NamespaceExcluded")), 90)
        assert jobs_of(crds, excluded) == []  # its runNowToken started nothing
        assert operator.tracebacks() == [], operator.log_text()[-3000:]
    finally:
        operator.stop()
        crds.delete_namespace(excluded)
        api.delete(f"{rbac}/clusterrolebindings/{name}")
        api.delete(f"{rbac}/clusterroles/{name}")
