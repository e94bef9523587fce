"""The test node agent runs pods with the project image in podman (`PodmanRunner`), cycle Jobs included.

The real control plane (tests/cluster) schedules the operator's cycle Job; the node agent runs its pod's
containers from the image built by `build_image()`: the init container seeds the vocabulary (never overwriting),
the dream container runs the cycle as uid 65532 with an fsGroup, a read-only root and an emptyDir /tmp, and the
operator reads the cycle's counts from the termination message. Every other image (the agent pod) still runs
as a local process.

Fails (never skips) without podman: `make tools` installs it. The image build is cached by content hash.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dreamkeeper.consolidation.journal import incomplete_journals
from dreamkeeper.coverage import VOCABULARY_FILE
from dreamkeeper.kube import DREAM_CONTAINER, GROUP, SCHEDULE_PLURAL, SEED_CONTAINER, VERSION, VOCABULARY_PLURAL
from dreamkeeper.kube.models import MemoryVocabularySpec
from dreamkeeper.kube.vocabulary_render import render
from tests.cluster import tools
from tests.cluster.fixtures import KubeCluster
from tests.cluster.kubeapi import Obj, namespaced
from tests.cluster.runners import ContainerLaunch, ContainerStartError, PodmanRunner, remove_node_containers
from tests.kube.cluster_support import OperatorProcess, grant_operator_rbac, install_crds, read_cycle_report
from tests.packaging import cluster_support as cs
from tests.packaging.podman import NONROOT_UID, PodmanMissingError, build_image, podman
from tests.proposers.fake_openai import FakeOpenAIServer, RecordedRequest, Reply

pytestmark = [pytest.mark.cluster, pytest.mark.podman]

# Not the image's gid: the cycle can write the root-owned volume only through the fsGroup ownership change.
FS_GROUP = 2000
SCHEDULE = "nightly"
WORDS = {"extraCommonWords": ["briefing", "triage"], "alwaysSpecificWords": ["May", "Will", "Rose"]}
COUNTS = (
    "reviewed", "withheld", "archived", "archivedWithReplacement", "ephemeral", "rejected", "protected",
    "purged", "liveEntries", "archivedEntries", "hardDeletes",
)  # fmt: skip


@pytest.fixture(scope="module")
def project_image() -> str:
    started = time.monotonic()
    image = build_image()  # raises PodmanMissingError / ImageBuildError: the tests error, never skip
    print(f"\nproject image {image} ready in {time.monotonic() - started:.1f}s")
    return image


@pytest.fixture
def podman_node(kube_cluster: KubeCluster, project_image: str) -> Iterator[KubeCluster]:
    """The session's node agent, running `project_image` containers in podman for this test."""
    agent = kube_cluster.node_agent
    agent.image_runners[project_image] = PodmanRunner(node_name=agent.node_name)
    try:
        yield kube_cluster
    finally:
        agent.image_runners.pop(project_image, None)
        # Pods still running are stopped by the node agent when their namespace goes; after a crash, nothing of
        # this node may linger in podman.
        remove_node_containers(agent.node_name)


def pod_of_job(cluster: KubeCluster, namespace: str, job: str) -> Obj:
    (pod,) = cluster.api.get(namespaced(namespace, "pods"), labelSelector=f"job-name={job}")["items"]
    return dict(pod)


def statuses(pod: Obj) -> dict[str, Obj]:
    status = pod.get("status") or {}
    return {s["name"]: s for s in [*(status.get("initContainerStatuses") or []), *status["containerStatuses"]]}


def host_stats(agent_dir: Path) -> dict[str, Any]:
    """`dreamkeeper memory stats` on the host's copy of the volume: what is really on disk."""
    out = subprocess.run(
        [str(tools.dreamkeeper_binary()), "memory", "stats", str(agent_dir), "--json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(json.loads(out))


@dataclass
class Cycle:
    cluster: KubeCluster
    ns: str
    image: str
    operator: OperatorProcess
    volumes: Path

    def schedule(self, token: str) -> None:
        api = self.cluster.api
        api.create(
            namespaced(self.ns, VOCABULARY_PLURAL, group=GROUP, version=VERSION),
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "MemoryVocabulary",
                "metadata": {"name": "words"},
                "spec": WORDS,
            },
        )
        api.create(
            namespaced(self.ns, SCHEDULE_PLURAL, group=GROUP, version=VERSION),
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "DreamSchedule",
                "metadata": {"name": SCHEDULE},
                "spec": {
                    "schedule": "0 3 1 1 *",  # once a year: only the run-now token starts a cycle here
                    "claimName": "agent-data",
                    "vocabularyRef": {"name": "words"},
                    "runNowToken": token,
                    "image": self.image,
                    "imagePullPolicy": "Never",
                    "securityContext": {"runAsUser": NONROOT_UID, "runAsGroup": NONROOT_UID, "fsGroup": FS_GROUP},
                    # retention 0 = keep archives forever: no purge, so the host's archive count is exact
                    "safeguards": {"minIntervalHours": 0, "retentionDays": 0},
                    "activeDeadlineSeconds": 600,
                },
            },
        )


@pytest.fixture
def cycle(podman_node: KubeCluster, kube_namespace: str, project_image: str, tmp_path: Path) -> Iterator[Cycle]:
    """A namespace enforcing Pod Security "restricted", the CRDs, and the operator (started by the test)."""
    cluster, ns = podman_node, kube_namespace
    install_crds(cluster)
    cluster.api.patch(
        f"/api/v1/namespaces/{ns}", {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}
    )
    operator = OperatorProcess(cluster, [ns], grant_operator_rbac(cluster, ns), tmp_path / "logs")
    try:
        yield Cycle(cluster, ns, project_image, operator, tmp_path / "volumes")
    finally:
        try:
            if operator.proc is not None:
                cs.delete_schedules(cluster, ns)
        finally:
            operator.stop()
            cs.remove_volume(cluster, ns)
            print(f"\noperator log: {operator.log_path}")


@pytest.mark.parametrize("existing_vocabulary", [False, True], ids=["vocabulary-seeded", "vocabulary-kept"])
def test_cycle_job_runs_in_podman_with_the_project_image(cycle: Cycle, existing_vocabulary: bool) -> None:
    cluster, ns = cycle.cluster, cycle.ns
    agent_dir = cs.make_agent(cluster, ns, cycle.volumes)  # the sample agent on a PVC, its agent pod running
    vocabulary = agent_dir / VOCABULARY_FILE
    if existing_vocabulary:
        kept = vocabulary.read_bytes()
    else:
        vocabulary.unlink()
    before = host_stats(agent_dir)
    assert before["live"] > 0

    started = time.monotonic()
    cycle.operator.start()
    cycle.schedule(token="podman")
    run = cs.wait_run(cluster, ns, SCHEDULE, timeout=600)
    print(f"\nrun-now to counted cycle: {time.monotonic() - started:.1f}s")
    assert run["result"] == "completed", run
    status = cs.schedule_status(cluster, ns, SCHEDULE)

    # The Job's pod ran both containers in podman from the built image (the agent pod stayed a local process).
    (job,) = cluster.api.get(namespaced(ns, "jobs", group="batch"))["items"]
    pod = pod_of_job(cluster, ns, job["metadata"]["name"])
    assert pod["status"]["phase"] == "Succeeded"
    containers = statuses(pod)
    for name in (SEED_CONTAINER, DREAM_CONTAINER):
        terminated = containers[name]["state"]["terminated"]
        assert terminated["exitCode"] == 0, (name, terminated)
        assert terminated["containerID"].startswith("podman://"), terminated
        assert containers[name]["image"] == cycle.image
    agent_pod = cluster.api.get(namespaced(ns, "pods", "agent-0"))
    assert agent_pod["status"]["containerStatuses"][0]["containerID"].startswith("local://")
    security = pod["spec"]["securityContext"]
    assert (security["runAsUser"], security["fsGroup"]) == (NONROOT_UID, FS_GROUP)
    assert pod["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True

    # The status counts are the termination message's, and both equal the report the cycle wrote on the volume.
    message = json.loads(containers[DREAM_CONTAINER]["state"]["terminated"]["message"])
    report = read_cycle_report(agent_dir, run["cycleId"])
    for field in COUNTS:
        assert run[field] == message[field] == report[field], field
    assert run["archived"] > 0 and run["hardDeletes"] == 0 and run["purged"] == 0

    # The volume on the host shows the archives: every archived entry is still on disk, nothing was removed.
    after = host_stats(agent_dir)
    assert after["archived"] == before["archived"] + run["archived"]
    assert after["entries"] >= before["entries"]
    assert after["malformed"] == before["malformed"]  # reported, left exactly where they were
    # Written by the container's user; the group is the fsGroup (setgid directories), as under a kubelet.
    report_file = agent_dir / ".dreamkeeper" / "cycles" / f"{run['cycleId']}.json"
    assert (report_file.stat().st_uid, report_file.stat().st_gid) == (NONROOT_UID, FS_GROUP)

    rendered = render(MemoryVocabularySpec.model_validate(WORDS)).content
    if existing_vocabulary:
        assert vocabulary.read_bytes() == kept  # the init container never overwrites
        assert status["vocabulary"]["result"] == "already-present"
        assert status["vocabulary"]["sha256"] == hashlib.sha256(kept).hexdigest()
    else:
        assert vocabulary.read_bytes() == rendered
        assert status["vocabulary"]["result"] == "created"
        assert vocabulary.stat().st_uid == NONROOT_UID  # created inside the container
    assert cycle.operator.tracebacks() == [], cycle.operator.log_text()[-3000:]


PROBE = r"""
set -u
w() { if (echo x > "$1") 2>/dev/null; then echo ok; else echo refused; fi; }
# Who the apiserver (127.0.0.1, host network) says we are, through the KUBECONFIG the runner mounted.
whoami=$(python3 -c 'from kubernetes import client, config; config.load_kube_config()
review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
print(client.AuthenticationV1Api().create_self_subject_review(review).status.user_info.username)' 2>&1 | tail -1)
fmt='{"uid":"%s","gid":"%s","groups":"%s","pwd":"%s","host":"%s","probe":"%s",'
fmt="$fmt"'"root":"%s","tmp":"%s","data":"%s","config":"%s","words":"%s","whoami":"%s"}'
printf "$fmt" "$(id -u)" "$(id -g)" "$(id -G)" "$(pwd)" "$(hostname)" "$DK_PROBE" \
  "$(w /probe)" "$(w /tmp/probe)" "$(w /data/probe)" "$(w /etc/dk/probe)" "$(cat /etc/dk/words)" "$whoami" \
  > /dev/termination-log
exit 3
"""


def test_pod_spec_reaches_the_podman_container(
    podman_node: KubeCluster, kube_namespace: str, project_image: str, tmp_path: Path
) -> None:
    """What PodmanRunner maps, seen from inside: user, groups, workingDir, env, hostname, a read-only root with a
    writable emptyDir, a PVC and a read-only configMap at their mountPaths, API access with the pod's own
    ServiceAccount token, the termination message, the exit code."""
    cluster, ns = podman_node, kube_namespace
    image = project_image
    data = tmp_path / "pv"
    cluster.create_host_volume(f"pv-{ns}"[:63], data, claim=(ns, "data"))
    try:
        cluster.api.create(
            namespaced(ns, "persistentvolumeclaims"),
            {
                "metadata": {"name": "data"},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "",
                    "volumeName": f"pv-{ns}"[:63],
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            },
        )
        cluster.api.create(
            namespaced(ns, "configmaps"), {"metadata": {"name": "words"}, "data": {"words": "May Will Rose"}}
        )
        cluster.api.create(
            namespaced(ns, "pods"),
            {
                "metadata": {"name": "probe"},
                "spec": {
                    "restartPolicy": "Never",
                    "securityContext": {"runAsUser": 4242, "runAsGroup": 4343, "fsGroup": FS_GROUP},
                    "containers": [
                        {
                            "name": "probe",
                            "image": image,
                            "command": ["sh", "-c"],
                            "args": [PROBE],
                            "workingDir": "/data",
                            "env": [{"name": "DK_PROBE", "value": "hello $(POD)"}, {"name": "POD", "value": "x"}],
                            "securityContext": {
                                "readOnlyRootFilesystem": True,
                                "allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"]},
                            },
                            "volumeMounts": [
                                {"name": "data", "mountPath": "/data"},
                                {"name": "tmp", "mountPath": "/tmp"},
                                {"name": "words", "mountPath": "/etc/dk", "readOnly": True},
                            ],
                        }
                    ],
                    "volumes": [
                        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                        {"name": "tmp", "emptyDir": {}},
                        {"name": "words", "configMap": {"name": "words"}},
                    ],
                },
            },
        )
        pod = wait_pod_phase(cluster, ns, "probe", ("Succeeded", "Failed"))
    finally:
        cluster.api.delete(f"/api/v1/persistentvolumes/pv-{ns}"[:80])
    terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert pod["status"]["phase"] == "Failed"
    assert (terminated["exitCode"], terminated["reason"]) == (3, "Error")
    assert terminated["containerID"].startswith("podman://")
    seen = json.loads(terminated["message"])
    assert (seen["uid"], seen["gid"]) == ("4242", "4343")
    assert str(FS_GROUP) in seen["groups"].split()
    assert seen["pwd"] == "/data" and seen["host"] == "probe"
    assert seen["probe"] == "hello $(POD)"  # a later variable is not expanded, as in Kubernetes
    assert (seen["root"], seen["tmp"], seen["data"], seen["config"]) == ("refused", "ok", "ok", "refused")
    assert seen["words"] == "May Will Rose"
    assert seen["whoami"] == f"system:serviceaccount:{ns}:default"  # the pod's own projected token
    assert (data / "probe").stat().st_uid == 4242
    assert (data / "probe").stat().st_gid == FS_GROUP


TRAP = 'trap "echo bye > /data/bye; exit 7" TERM; echo ready > /data/ready; while :; do sleep 0.1; done'
STUBBORN = "echo ready > /data/ready; exec sleep 600"  # PID 1 without a handler: SIGTERM is ignored


@pytest.mark.parametrize(("script", "exit_code"), [(TRAP, 7), (STUBBORN, 137)], ids=["sigterm", "sigkill"])
def test_deleting_a_pod_stops_its_podman_container_gracefully(
    podman_node: KubeCluster, kube_namespace: str, project_image: str, tmp_path: Path, script: str, exit_code: int
) -> None:
    """Pod deletion: SIGTERM reaches the container (its exit code is reported); one that ignores it is SIGKILLed
    after the grace period (137). The final status is published before the agent removes the pod."""
    cluster, ns = podman_node, kube_namespace
    image = project_image
    data = tmp_path / "data"
    data.mkdir()
    data.chmod(0o777)
    cluster.api.create(
        namespaced(ns, "pods"),
        {
            "metadata": {"name": "sleeper"},
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 2,
                "containers": [
                    {
                        "name": "sleeper",
                        "image": image,
                        "command": ["sh", "-c", script],
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                    }
                ],
                "volumes": [{"name": "data", "hostPath": {"path": str(data), "type": "Directory"}}],
            },
        },
    )
    cluster.wait_for("container ready", (data / "ready").exists, timeout=120)
    pod = cluster.api.get(namespaced(ns, "pods", "sleeper"))
    watch = cluster.api.watch(
        namespaced(ns, "pods"),
        pod["metadata"]["resourceVersion"],
        timeout_seconds=90,
        fieldSelector="metadata.name=sleeper",
    )
    cluster.api.delete(namespaced(ns, "pods", "sleeper"))
    last: Obj = pod
    try:
        for event in watch:
            if event["type"] == "DELETED":
                break
            last = event["object"]
    finally:
        watch.close()
    terminated = last["status"]["containerStatuses"][0]["state"].get("terminated")
    assert terminated is not None, last["status"]
    assert terminated["exitCode"] == exit_code
    assert (data / "bye").exists() == (exit_code == 7)
    assert not remove_node_containers(cluster.node_agent.node_name)  # podman removed the container itself


def wait_pod_phase(cluster: KubeCluster, namespace: str, name: str, phases: tuple[str, ...]) -> Obj:
    box: list[Obj] = []

    def done() -> bool:
        pod = cluster.api.get(namespaced(namespace, "pods", name))
        box.append(pod)
        return pod.get("status", {}).get("phase") in phases

    cluster.wait_for(f"pod {name} in {phases}", done, timeout=180, interval=0.5)
    return box[-1]


def test_missing_podman_fails_instead_of_skipping(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without podman the image cannot be built (the module's tests error) and a pod's container fails to start
    with the reason, as StartError, never silently as a local process."""
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(PodmanMissingError, match="make tools"):
        podman()
    with pytest.raises(PodmanMissingError):
        build_image()
    launch = ContainerLaunch(
        pod_namespace="ns", pod_name="p", pod_uid="u" * 8, container_name="c", image="localhost/dreamkeeper:dev",
        command=(), args=(), env=(), working_dir=None, mounts=(), log_path=Path("/nonexistent/log"),
        scratch_dir=Path("/nonexistent"),
    )  # fmt: skip
    with pytest.raises(ContainerStartError, match="podman is not installed"):
        PodmanRunner().start(launch)


AGENT_UID = 1000  # the agent's own uid/gid: the files on the volume are its


def _own_as_the_agent(root: Path) -> None:
    """The volume as an agent running as 1000:1000 leaves it: its files, 0755 directories, 0644 files, including
    the .dreamkeeper state directory (the trial's failure: 65532 could not write there)."""
    (root / "agent" / ".dreamkeeper").mkdir(exist_ok=True)
    for path in [root, *root.rglob("*")]:
        os.chown(path, AGENT_UID, AGENT_UID, follow_symlinks=False)
        path.chmod(0o755 if path.is_dir() else 0o644)


def test_a_cycle_with_no_agent_pod_runs_on_the_agents_files(cycle: Cycle) -> None:
    """Issue 17 finding 4: nobody to copy an identity from (the agent is down), no securityContext in the spec.
    The cycle runs as the image's user with an fsGroup of the same id; the kubelet (here PodmanRunner, as the
    kubelet does) gives the volume to that group, group-writable, and the cycle's own files stay group-writable."""
    cluster, ns = cycle.cluster, cycle.ns
    agent_dir = cs.make_agent(cluster, ns, cycle.volumes, with_pod=False)
    _own_as_the_agent(agent_dir.parent)
    before = host_stats(agent_dir)
    cycle.operator.start()
    cluster.api.create(
        namespaced(ns, SCHEDULE_PLURAL, group=GROUP, version=VERSION),
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DreamSchedule", "metadata": {"name": SCHEDULE},
         "spec": {"schedule": "0 3 1 1 *", "claimName": "agent-data", "runNowToken": "alone", "image": cycle.image,
                  "imagePullPolicy": "Never", "safeguards": {"minIntervalHours": 0, "retentionDays": 0},
                  "activeDeadlineSeconds": 600}},
    )  # fmt: skip
    run = cs.wait_run(cluster, ns, SCHEDULE, timeout=600)
    assert run["result"] == "completed", run
    (job,) = cluster.api.get(namespaced(ns, "jobs", group="batch"))["items"]
    security = pod_of_job(cluster, ns, job["metadata"]["name"])["spec"]["securityContext"]
    assert (security["runAsUser"], security["runAsGroup"], security["fsGroup"]) == (NONROOT_UID,) * 3
    assert host_stats(agent_dir)["archived"] == before["archived"] + run["archived"] and run["archived"] > 0
    report = agent_dir / ".dreamkeeper" / "cycles" / f"{run['cycleId']}.json"
    assert (report.stat().st_uid, report.stat().st_gid) == (NONROOT_UID, NONROOT_UID)
    assert report.stat().st_mode & 0o020, oct(report.stat().st_mode)  # group-writable: umask 002 (--shared-group)
    assert (agent_dir / "memory").stat().st_uid == AGENT_UID  # the agent still owns what it owned


def test_deleting_the_schedule_mid_cycle_stops_the_cycle_cleanly(cycle: Cycle) -> None:
    """Issue 17 finding 4: the schedule is deleted while its cycle waits for the model. The Job goes with it
    (owner reference), the pod gets SIGTERM, and the cycle stops at its next stage boundary: its report on the
    volume says what the fold archived, no journal is left half-applied, nothing is lost."""
    cluster, ns = cycle.cluster, cycle.ns
    agent_dir = cs.make_agent(cluster, ns, cycle.volumes)
    _own_as_the_agent(agent_dir.parent)
    before = host_stats(agent_dir)
    in_flight = threading.Event()

    def slow_model(request: RecordedRequest) -> Reply:
        in_flight.set()
        return Reply.json({"toSave": [], "toDelete": []}, delay=8.0)

    with FakeOpenAIServer(slow_model) as server:
        cycle.operator.start()
        proposer = {"type": "openai", "model": "m", "baseURL": server.base_url, "allowPlainHTTP": True}
        cluster.api.create(
            namespaced(ns, SCHEDULE_PLURAL, group=GROUP, version=VERSION),
            {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DreamSchedule", "metadata": {"name": SCHEDULE},
             "spec": {"schedule": "0 3 1 1 *", "claimName": "agent-data", "runNowToken": "doomed",
                      "image": cycle.image, "imagePullPolicy": "Never", "proposer": proposer,
                      "safeguards": {"minIntervalHours": 0, "retentionDays": 0}, "activeDeadlineSeconds": 600}},
        )  # fmt: skip
        cluster.wait_for("the cycle asking the model", in_flight.is_set, timeout=600)
        cluster.api.delete(namespaced(ns, SCHEDULE_PLURAL, SCHEDULE, group=GROUP, version=VERSION))
        cluster.wait_for(
            "the Job and its pod gone",
            lambda: (
                not cluster.api.get(namespaced(ns, "pods"), labelSelector="app.kubernetes.io/component=dream-cycle")[
                    "items"
                ]
            ),
            timeout=120,
        )
    (report_file,) = (agent_dir / ".dreamkeeper" / "cycles").glob("*.json")
    report = json.loads(report_file.read_text())
    assert report["result"] == "failed" and "stopped by SIGTERM before validation" in report["error"], report
    assert report["folded"] > 0 and report["hardDeletes"] == 0
    assert list(incomplete_journals(agent_dir)) == []  # nothing half-applied for a recovery to finish
    after = host_stats(agent_dir)
    assert after["entries"] >= before["entries"] and after["archived"] == before["archived"] + report["folded"]
    assert "nightly: deleted; its Jobs go with it" in cycle.operator.log_text()
