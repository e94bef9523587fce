"""Issue 21, Build 6: what the trial did not reach, on the real control plane. An operator SIGKILLed mid-Stop while
carol rewrites its record; the namespace deleted and the CRDs uninstalled mid-Stop; two schedules taking turns on
one claim and one agent; a storm of run-now tokens from 50 schedules; the claim and the Secret deleted while a
cycle runs; a 1 MiB MemoryVocabulary that a cycle really seeds and reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dreamkeeper.kube import ANNOTATION_AGENT_STOP, GROUP, VERSION
from dreamkeeper.kube.coordinator import CRASH_ENV
from dreamkeeper.kube.vocabulary_reconciler import CONFIG_MAP_LIMIT_BYTES
from dreamkeeper.kube.vocabulary_render import CONFIG_MAP_KEY
from tests.cluster.kubeapi import Obj, namespaced
from tests.kube.agent_support import AgentEnv
from tests.kube.cluster_support import (
    Env,
    condition_of,
    events_of,
    eventually,
    has_reasons,
    install_admission,
    install_crds,
    jobs_of,
    make_agent,
    remove_volume,
    schedule_path,
    settled_events,
    vocabulary_path,
)
from tests.kube.tenancy_support import tenants
from tests.proposers.fake_openai import FakeOpenAIServer, Reply

pytestmark = pytest.mark.cluster

# "Nothing to do" in both request shapes: the default one-cluster question reads `same` (false: distinct, a
# decision), RockBot's batch layout reads toDelete/toSave. {"toDelete": [], "toSave": []} alone is no answer to the
# cluster question, and a cycle whose every reply is no answer is proposer-failed.
NOTHING_TO_DO = {"same": False, "merged": "", "toDelete": [], "toSave": []}


def _ready(status: Obj) -> tuple[str, str] | None:
    ready = condition_of(status, "Ready")
    return None if ready is None else (ready["status"], ready["reason"])


def _healthy(operator: Any) -> None:
    assert operator.tracebacks() == [], operator.log_text()[-3000:]
    assert operator.metric("dreamkeeper_handler_errors_total", handler="schedule") in (None, 0.0)


def _active(job: Obj) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return not any(c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in conditions)


# ---- Stop meets a crash, a forger, a deleted namespace, an uninstall ------------------------------------------------


def test_sigkill_after_the_record_then_a_forged_replica_count_never_reaches_the_agent(agent_env: AgentEnv) -> None:
    """The operator dies right after writing its record on the workload (its status write lost); carol, who may
    patch the Deployment, raises the recorded replicas to 9 before it restarts. Before issue 21 the new operator
    adopted the annotation and "restored" 9 replicas; now the record is not its status's: removed, quoted, and the
    stop begun afresh from what the workload really has."""
    env = agent_env
    agent = env.agent.create(replicas=2, interval=0.1)
    carol = tenants(env.cluster, env.ns)["carol"]
    changes = agent.replica_changes()
    env.operator.env = {CRASH_ENV: "record"}
    env.operator.start()
    env.schedule()
    env.run_now("once")
    proc = env.operator.proc
    assert proc is not None
    eventually(env.cluster, "operator killed after the record", lambda: not proc.alive(), timeout=180)
    record = json.loads(agent.annotations()[ANNOTATION_AGENT_STOP])
    carol.api.patch(
        env.agent.path, {"metadata": {"annotations": {ANNOTATION_AGENT_STOP: json.dumps({**record, "replicas": 9})}}}
    )
    env.operator.env = {}
    env.operator.restart()

    def done(s: Obj) -> bool:
        agent_status = s.get("agent") or {}
        return s.get("lastRunNowToken") == "once" and not agent_status.get("stop") and bool(s.get("lastRun"))

    s = env.wait_status("the cycle done and the agent restored", done, timeout=300)
    assert s["agent"]["lastStop"]["replicas"] == 2 and agent.replicas() == 2
    assert agent.replica_changes() == changes + 2  # down once, up once: never to 9
    assert s["totals"]["cyclesCompleted"] == 1 and len(jobs_of(env.cluster, env.ns)) == 1
    settled = settled_events(env.cluster, env.ns, "nightly", has_reasons("StopRecordIgnored"))
    ignored = [e for e in settled if e["reason"] == "StopRecordIgnored"]
    assert ignored and '"replicas":9' in ignored[0]["message"].replace(" ", "")
    agent.wait_writing(2)
    _healthy(env.operator)


def test_deleting_the_namespace_mid_stop_completes_and_the_operator_says_why(agent_env: AgentEnv) -> None:
    env = agent_env
    agent = env.agent.create(replicas=1, interval=0.1, linger=6.0)  # slow to stop: the stop is caught mid-way
    env.operator.start()
    env.schedule()
    env.run_now("doomed")
    eventually(env.cluster, "agent scaled down", lambda: agent.replicas() == 0, timeout=120)
    env.cluster.delete_namespace(env.ns, wait=True, timeout=300)
    assert env.cluster.api.get_or_none(f"/api/v1/namespaces/{env.ns}") is None
    _healthy(env.operator)


def test_uninstalling_the_crds_mid_stop_restores_the_agent_first(agent_env: AgentEnv) -> None:
    """`kubectl delete crd` (or of manifests/install.yaml, CRDs first) while a Stop holds the agent at 0: every
    schedule is deleted, the Stop's finalizer makes the running operator restore the agent first, and the CRD
    deletion completes. The CRDs and the policy are installed again for the rest of the session."""
    env = agent_env
    agent = env.agent.create(replicas=2, interval=0.1, linger=6.0)
    env.operator.start()
    env.schedule()
    env.run_now("uninstalled")
    eventually(env.cluster, "agent scaled down", lambda: agent.replicas() == 0, timeout=120)
    crd = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/dreamschedules.dreamkeeper.io"
    try:
        env.cluster.api.delete(crd)
        eventually(env.cluster, "the CRD deleted", lambda: env.cluster.api.get_or_none(crd) is None, timeout=300)
        assert agent.replicas() == 2 and ANNOTATION_AGENT_STOP not in agent.annotations()
        agent.wait_writing(2)
        assert env.operator.proc is not None and env.operator.proc.alive()
    finally:
        install_crds(env.cluster)
        install_admission(env.cluster)


def test_two_schedules_on_one_claim_and_one_agent_take_turns(agent_env: AgentEnv) -> None:
    env = agent_env
    agent = env.agent.create(replicas=2, interval=0.1)
    changes = agent.replica_changes()
    env.watcher.start()
    env.operator.start()
    env.schedule()
    second = json.loads(json.dumps(env.cluster.api.get(schedule_path(env.ns, "nightly"))["spec"]))
    env.cluster.api.create(
        schedule_path(env.ns),
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DreamSchedule", "metadata": {"name": "second"}, "spec": second},
    )
    for name in ("nightly", "second"):
        env.cluster.api.patch(schedule_path(env.ns, name), {"spec": {"runNowToken": "both"}})

    def both_done() -> bool:
        for name in ("nightly", "second"):
            s = env.cluster.api.get(schedule_path(env.ns, name)).get("status") or {}
            agent_status = s.get("agent") or {}
            if s.get("lastRunNowToken") != "both" or agent_status.get("stop") or not agent_status.get("lastStop"):
                return False
        return True

    eventually(env.cluster, "both schedules' cycles done", both_done, timeout=420)
    env.watcher.stop()
    assert env.watcher.two_writers() == [] and env.watcher.cycles_seen() == 2
    assert max(len(s.cycles) for s in env.watcher.samples) == 1  # never two cycles on one volume
    assert agent.replicas() == 2 and agent.replica_changes() == changes + 4  # two stops, each down and up once
    assert ANNOTATION_AGENT_STOP not in agent.annotations()
    _healthy(env.operator)


# ---- a storm, a claim and a Secret gone mid-cycle, a 1 MiB vocabulary ------------------------------------------------


def _small_corpus(agent_dir: Path, keep: int = 12) -> None:
    """The storm's agent: a dozen entries, so 50 cycles one after another stay a few minutes."""
    files = sorted((agent_dir / "memory").rglob("*.json"))
    for path in files[keep:]:
        path.unlink()


CLAIMS = [f"c{c}" for c in range(5)]  # short: the PV name is the namespace's plus the claim's, cut at 63


def test_a_run_now_storm_from_50_schedules_runs_each_once_and_never_two_at_once(env: Env) -> None:
    """50 schedules, ten on each of five claims, all given a runNowToken at once: every token is handled with one
    cycle, the claims' cycles run side by side, and never two on one claim (one claim alone took 7 minutes here)."""
    for claim in CLAIMS:
        _small_corpus(make_agent(env.cluster, env.ns, env.host, claim=claim, with_pod=False))
    names = [f"storm-{i:02d}" for i in range(50)]
    for i, name in enumerate(names):
        env.schedule(name, claimName=CLAIMS[i % len(CLAIMS)], safeguards={"minIntervalHours": 0})
    env.operator.start()
    try:
        for name in names:
            env.patch_spec(name, runNowToken="storm")
        most_active: dict[str, int] = {}

        def all_done() -> bool:
            for job in jobs_of(env.cluster, env.ns):
                if _active(job):
                    claim = job["metadata"]["labels"]["dreamkeeper.io/claim"]
                    active = [j for j in jobs_of(env.cluster, env.ns) if _active(j)
                              and j["metadata"]["labels"]["dreamkeeper.io/claim"] == claim]  # fmt: skip
                    most_active[claim] = max(most_active.get(claim, 0), len(active))
            items = env.cluster.api.get(schedule_path(env.ns))["items"]
            done = [i for i in items if (i.get("status") or {}).get("lastRunNowToken") == "storm"
                    and ((i.get("status") or {}).get("lastRun") or {}).get("trigger") == "run-now"]  # fmt: skip
            return len(done) == len(names)

        eventually(env.cluster, "50 run-now cycles done", all_done, timeout=1500, interval=0.5)
        assert most_active and max(most_active.values()) == 1, most_active
        for name in names:
            s = env.status(name)
            assert s["totals"]["cyclesCompleted"] + s["totals"]["cyclesSkipped"] == 1, (name, s["totals"])
        _healthy(env.operator)
    finally:
        env.operator.stop()
        for claim in CLAIMS:
            remove_volume(env.cluster, env.ns, claim)


def _slow_server() -> FakeOpenAIServer:
    """A model that takes its time (each request answered after 2 s), so a cycle is caught while it runs."""
    return FakeOpenAIServer(responder=lambda _r: Reply.json(NOTHING_TO_DO, delay=2.0))


def _running_cycle_pod(env: Env) -> Obj:
    def running() -> Obj | None:
        pods = env.cluster.api.get(namespaced(env.ns, "pods"), labelSelector="app.kubernetes.io/component=dream-cycle")
        return next((p for p in pods["items"] if (p.get("status") or {}).get("phase") == "Running"), None)

    pod: Obj = eventually(env.cluster, "the cycle pod running", running, timeout=180)
    return pod


def test_the_claim_deleted_mid_cycle_finishes_the_cycle_then_starts_none_on_it(env: Env) -> None:
    make_agent(env.cluster, env.ns, env.host, with_pod=False)
    with _slow_server() as server:
        env.operator.start()
        proposer = {"type": "openai", "model": "m", "baseURL": server.base_url, "allowPlainHTTP": True}
        env.schedule("nightly", proposer=proposer, runNowToken="first", safeguards={"minIntervalHours": 0})
        _running_cycle_pod(env)
        env.cluster.api.delete(namespaced(env.ns, "persistentvolumeclaims", "agent-data"))
        # The claim's protection finalizer keeps it while a pod uses it: the running cycle finishes.
        s = env.wait_status("nightly", "the cycle counted", lambda s: s.get("lastRun"), timeout=300)
        assert s["lastRun"]["result"] == "completed", s["lastRun"]
        s = env.wait_status(
            "nightly",
            "Ready=False for the claim",
            lambda s: _ready(s) in (("False", "ClaimTerminating"), ("False", "ClaimNotFound")),
            timeout=120,
        )
        env.patch_spec("nightly", runNowToken="second")
        eventually(env.cluster, "the second token deferred", lambda: "RunNowDeferred" in
                   [e["reason"] for e in events_of(env.cluster, env.ns, "nightly")], timeout=60)  # fmt: skip
        assert len(jobs_of(env.cluster, env.ns)) == 1  # nothing started without its claim
    _healthy(env.operator)


def test_the_secret_deleted_mid_cycle_lets_that_cycle_finish_and_stops_the_next(env: Env) -> None:
    make_agent(env.cluster, env.ns, env.host, with_pod=False)
    env.cluster.api.create(namespaced(env.ns, "secrets"), {"metadata": {"name": "llm"}, "stringData": {"key": "k"}})
    with _slow_server() as server:
        env.operator.start()
        proposer = {"type": "openai", "model": "m", "baseURL": server.base_url, "allowPlainHTTP": True,
                    "apiKeySecretRef": {"name": "llm", "key": "key"}}  # fmt: skip
        env.schedule("keyed", proposer=proposer, runNowToken="first", safeguards={"minIntervalHours": 0})
        _running_cycle_pod(env)
        env.cluster.api.delete(namespaced(env.ns, "secrets", "llm"))
        s = env.wait_status("keyed", "the first cycle counted", lambda s: s.get("lastRun"), timeout=300)
        assert s["lastRun"]["result"] == "completed", s["lastRun"]  # its key was read when it started
        assert all(r.headers.get("authorization") == "Bearer k" for r in server.completions)
        env.patch_spec("keyed", runNowToken="second")
        s = env.wait_status(
            "keyed", "the second cycle stopped", lambda s: (s.get("lastRun") or {}).get("reason") ==
            "SecretUnavailable", timeout=240,
        )  # fmt: skip
        assert _ready(s) == ("False", "SecretUnavailable")
    _healthy(env.operator)


def test_a_one_mebibyte_vocabulary_is_rendered_seeded_and_read_by_a_cycle(env: Env) -> None:
    agent_dir = make_agent(env.cluster, env.ns, env.host, with_pod=False)
    (agent_dir / "merge-coverage-vocabulary.json").unlink(missing_ok=True)  # the sample's own: the CR's is seeded
    words = [f"w{i:05d}{'x' * 110}" for i in range(4096)]
    spec = {"extraCommonWords": words, "alwaysSpecificWords": [w.upper() for w in words]}
    assert len(json.dumps(spec)) > 950_000
    env.cluster.api.create(
        vocabulary_path(env.ns),
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "MemoryVocabulary", "metadata": {"name": "big"}, "spec": spec},
    )
    env.operator.start()

    def rendered() -> Obj | None:
        status = env.cluster.api.get(vocabulary_path(env.ns, "big")).get("status") or {}
        return status if status.get("sha256") and status.get("configMapName") else None

    vocabulary = eventually(env.cluster, "the vocabulary rendered", rendered, timeout=120)
    config_map = env.cluster.api.get(namespaced(env.ns, "configmaps", vocabulary["configMapName"]))
    size = sum(len(v.encode()) for v in config_map["data"].values())
    assert 1_000_000 < size <= CONFIG_MAP_LIMIT_BYTES
    env.schedule("worded", vocabularyRef={"name": "big"}, runNowToken="go", safeguards={"minIntervalHours": 0})
    s = env.wait_status("worded", "the cycle counted", lambda s: s.get("lastRun"), timeout=300)
    assert s["lastRun"]["result"] == "completed", s["lastRun"]
    sync = condition_of(s, "VocabularyInSync")
    assert sync is not None and sync["status"] == "True", sync
    seeded = agent_dir / "merge-coverage-vocabulary.json"
    assert seeded.read_text() == config_map["data"][CONFIG_MAP_KEY]  # the whole render reached the volume
    _healthy(env.operator)
