"""The test node agent: plays the kubelet for one registered Node (test infrastructure, not product code).

It registers a Ready Node, keeps its Lease renewed (so the node lifecycle controller never taints it), watches
the Pods bound to it (by kube-scheduler or `spec.nodeName`) and runs each one *for real*: init containers in
order, then the containers, through a pluggable `ContainerRunner` (local processes by default; `image_runners`
maps an image ref to another runner, e.g. `PodmanRunner` for the project image). It writes
the Pod status back the way a kubelet does: phase, conditions, init/container statuses with running/terminated
states, exit codes and the termination message read from the container's terminationMessagePath file.
Deleted pods are stopped (SIGTERM, grace period, SIGKILL) and then removed from the API with grace 0.

What it does not do (see README): probes (a running container counts as ready), resource limits, securityContext
for local processes (they run as the test user; `PodmanRunner` enforces it), pod networking (no podIP), image
pulls, sidecar init containers, live ConfigMap/Secret updates in volumes, `kubectl logs/exec` (use
`NodeAgent.container_log`).
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import yaml

from tests.cluster import tools
from tests.cluster.kubeapi import ApiError, KubeApi, Obj, Watch, namespaced
from tests.cluster.podspec import (
    PodConfigError,
    Resolver,
    VolumeMaterializer,
    container_env,
    container_mounts,
    expand,
)
from tests.cluster.runners import (
    ContainerLaunch,
    ContainerRunner,
    ContainerStartError,
    LocalProcessRunner,
    Mount,
    RunningContainer,
    SecurityContext,
    wait_any,
)

log = logging.getLogger(__name__)

HOST_IP = "127.0.0.1"
SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
MAX_MESSAGE = 4096  # kubelet: MaxContainerTerminationMessageLength
MAX_LOG_MESSAGE = 2048  # kubelet: MaxContainerTerminationMessageLogLength (FallbackToLogsOnError)
MAX_LOG_LINES = 80  # kubelet: MaxContainerTerminationMessageLogLines
DELETION_GRACE_CAP = 30.0  # tests should not wait minutes for a stubborn process


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class _Interrupted(Exception):
    """The pod is being deleted or the agent is stopping."""


RunnerSelector = Callable[[Obj, Obj], ContainerRunner]  # (pod, container) -> runner


def termination_message(path: Path, log_path: Path, exit_code: int, policy: str) -> str:
    """The kubelet's rule: the last 4096 bytes of the message file; if empty, the exit code is non-zero and the
    policy is FallbackToLogsOnError, the last 80 log lines capped to their last 2048 bytes."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - MAX_MESSAGE))
            data = f.read()
    except FileNotFoundError:
        data = b""
    if not data and exit_code != 0 and policy == "FallbackToLogsOnError":
        try:
            lines = [ln for ln in log_path.read_bytes().splitlines(keepends=True) if not ln.startswith(b"# ")]
        except FileNotFoundError:
            lines = []
        data = b"".join(lines[-MAX_LOG_LINES:])[-MAX_LOG_MESSAGE:]
    return data.decode(errors="replace")


class NodeAgent:
    """One fake-but-working kubelet. `start()` registers the node and begins watching; `stop()` kills all
    containers it started. `api` is an admin JSON client (thread-safe: one connection per request)."""

    def __init__(
        self,
        api: KubeApi,
        work_dir: Path,
        *,
        node_name: str = "dk-node-0",
        api_host: str = HOST_IP,
        api_port: int = 0,
        ca_file: Path | None = None,
        sa_audience: str = "https://kubernetes.default.svc.cluster.local",
        runner_for: RunnerSelector | None = None,
        restart_backoff: tuple[float, float] = (1.0, 30.0),
        lease_seconds: int = 40,
    ) -> None:
        self.api = api
        self.work_dir = work_dir
        self.node_name = node_name
        self.api_host = api_host
        self.api_port = api_port
        self.ca_file = ca_file
        self.sa_audience = sa_audience
        self.local_runner = LocalProcessRunner()
        # image ref -> runner (e.g. a PodmanRunner for the project image); every other image runs locally.
        self.image_runners: dict[str, ContainerRunner] = {}
        self.runner_for: RunnerSelector = runner_for or (
            lambda pod, container: self.image_runners.get(container.get("image", ""), self.local_runner)
        )
        self.restart_backoff = restart_backoff
        self.lease_seconds = lease_seconds
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._workers: dict[str, PodWorker] = {}
        self._watch: Watch | None = None
        self._lock = threading.Lock()

    # ---- node registration and heartbeat ----------------------------------------------------------------------

    def node_manifest(self) -> Obj:
        resources = {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"}
        t = now()
        conditions = [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "test node agent is ready"},
            {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
            {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure"},
            {"type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID"},
        ]
        for c in conditions:
            c.update(lastHeartbeatTime=t, lastTransitionTime=t)
        version = tools.pins()["K8S_VERSION"]
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.node_name,
                "labels": {
                    "kubernetes.io/hostname": self.node_name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "dreamkeeper.test/node-agent": "true",
                },
            },
            "spec": {},
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "conditions": conditions,
                "addresses": [
                    {"type": "InternalIP", "address": HOST_IP},
                    {"type": "Hostname", "address": self.node_name},
                ],
                "nodeInfo": {
                    "machineID": "dreamkeeper-test",
                    "systemUUID": "dreamkeeper-test",
                    "bootID": "dreamkeeper-test",
                    "kernelVersion": "",
                    "osImage": "dreamkeeper test node agent",
                    "containerRuntimeVersion": "local://0",
                    "kubeletVersion": version,
                    "kubeProxyVersion": "",
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                },
            },
        }

    def register(self) -> None:
        try:
            self.api.create("/api/v1/nodes", self.node_manifest())
        except ApiError as exc:
            if exc.status != 409:
                raise
            self.api.patch(f"/api/v1/nodes/{self.node_name}/status", {"status": self.node_manifest()["status"]})
        self._renew_lease()

    def _renew_lease(self) -> None:
        node = self.api.get(f"/api/v1/nodes/{self.node_name}")
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": self.node_name,
                "namespace": "kube-node-lease",
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Node", "name": self.node_name, "uid": node["metadata"]["uid"]}
                ],
            },
            "spec": {
                "holderIdentity": self.node_name,
                "leaseDurationSeconds": self.lease_seconds,
                "renewTime": micro_now(),
            },
        }
        path = namespaced("kube-node-lease", "leases", group="coordination.k8s.io")
        try:
            self.api.patch(f"{path}/{self.node_name}", {"spec": body["spec"]})
        except ApiError as exc:
            if exc.status != 404:
                raise
            self.api.create(path, body)

    def _heartbeat_loop(self) -> None:
        last_status = time.monotonic()
        while not self._stop.wait(10.0):
            try:
                self._renew_lease()
                if time.monotonic() - last_status > 60:  # the Ready condition's heartbeat, as a kubelet would
                    self.api.patch(
                        f"/api/v1/nodes/{self.node_name}/status",
                        {"status": {"conditions": self.node_manifest()["status"]["conditions"]}},
                    )
                    last_status = time.monotonic()
            except Exception as exc:  # keep heartbeating through apiserver hiccups
                log.warning("node heartbeat failed: %s", exc)

    # ---- pod watch --------------------------------------------------------------------------------------------

    def start(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.register()
        for target, name in ((self._heartbeat_loop, "heartbeat"), (self._watch_loop, "pod-watch")):
            thread = threading.Thread(target=target, name=f"nodeagent-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _watch_loop(self) -> None:
        selector = f"spec.nodeName={self.node_name}"
        rv = ""
        while not self._stop.is_set():
            try:
                if not rv:  # (re)list: sync everything, then watch from the list's resourceVersion
                    listing = self.api.get("/api/v1/pods", fieldSelector=selector)
                    for item in listing.get("items") or []:
                        self._sync("ADDED", item)
                    rv = listing["metadata"]["resourceVersion"]
                self._watch = self.api.watch("/api/v1/pods", rv, timeout_seconds=10, fieldSelector=selector)
                if self._stop.is_set():
                    break
                for event in self._watch:
                    if event["type"] == "ERROR":  # typically 410 Gone: the resourceVersion is too old
                        rv = ""
                        break
                    rv = event["object"]["metadata"].get("resourceVersion", rv)
                    if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                        self._sync(event["type"], event["object"])
                    if self._stop.is_set():
                        break
            except Exception as exc:
                if not self._stop.is_set():
                    log.warning("pod watch failed, relisting: %s", exc)
                    rv = ""
                    self._stop.wait(1.0)

    def _sync(self, event_type: str, pod: Obj) -> None:
        uid = pod["metadata"]["uid"]
        with self._lock:
            worker = self._workers.get(uid)
            if worker is not None and not worker.finished.is_set():
                worker.observe(pod, deleted=event_type == "DELETED")
                return
            if event_type == "DELETED":
                self._workers.pop(uid, None)
                self._cleanup_pod_dir(uid)
                return
            phase = (pod.get("status") or {}).get("phase")
            if pod["metadata"].get("deletionTimestamp"):
                threading.Thread(target=self.finalize_deletion, args=(pod,), daemon=True).start()
                return
            if worker is not None or phase in ("Succeeded", "Failed"):
                return  # already ran here (or finished before this agent started): nothing to do
            worker = PodWorker(self, pod)
            self._workers[uid] = worker
        worker.start()

    def finalize_deletion(self, pod: Obj) -> None:
        """The kubelet's last step for a deleted pod whose containers are gone: delete it with grace 0."""
        meta = pod["metadata"]
        options = {"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}}
        try:
            self.api.delete(namespaced(meta["namespace"], "pods", meta["name"]), options)
        except ApiError as exc:
            if exc.status not in (404, 409):
                log.warning("final delete of pod %s/%s failed: %s", meta["namespace"], meta["name"], exc)

    def _cleanup_pod_dir(self, uid: str) -> None:
        """Drop a deleted pod's volume data (tmpfs); its container logs stay for post-mortems."""
        shutil.rmtree(self.work_dir / "pods" / uid / "volumes", ignore_errors=True)

    def stop(self) -> None:
        """Stop watching and kill every container this agent started (used at session teardown)."""
        self._stop.set()
        if self._watch is not None:
            self._watch.close()
        with self._lock:
            workers = list(self._workers.values())
        for worker in workers:
            worker.interrupt()
        for worker in workers:
            worker.join(timeout=15)
        for thread in self._threads:
            thread.join(timeout=5)

    # ---- helpers for tests ------------------------------------------------------------------------------------

    def pod_dir(self, namespace: str, name: str) -> Path | None:
        with self._lock:
            for worker in self._workers.values():
                if worker.namespace == namespace and worker.name == name:
                    return worker.pod_dir
        return None

    def container_log(self, namespace: str, name: str, container: str) -> str:
        """What the container wrote to stdout/stderr (all restarts), since `kubectl logs` needs a real kubelet."""
        pod_dir = self.pod_dir(namespace, name)
        if pod_dir is None:
            raise KeyError(f"pod {namespace}/{name} was not run by node {self.node_name}")
        path = pod_dir / "containers" / container / "output.log"
        return path.read_text(errors="replace") if path.exists() else ""


class PodWorker(threading.Thread):
    """Runs one pod from volumes to terminal phase (or until deleted), publishing status as it goes."""

    def __init__(self, agent: NodeAgent, pod: Obj) -> None:
        meta = pod["metadata"]
        super().__init__(name=f"pod-{meta['namespace']}/{meta['name']}", daemon=True)
        self.agent = agent
        self.pod = pod
        self.namespace: str = meta["namespace"]
        self.name: str = meta["name"]
        self.uid: str = meta["uid"]
        self.spec: Obj = pod["spec"]
        self.restart_policy: str = self.spec.get("restartPolicy", "Always")
        self.pod_dir: Path = agent.work_dir / "pods" / self.uid
        self.finished = threading.Event()
        self._deleting = threading.Event()
        self._interrupt = threading.Event()
        self._lock = threading.Lock()
        self.api = agent.api
        self.phase = "Pending"
        self.reason: str | None = None
        self.message: str | None = None
        self.start_time = now()
        self.conditions: dict[str, Obj] = {}
        self.init_statuses = {c["name"]: self._waiting(c, "PodInitializing") for c in self._init_containers()}
        first = "PodInitializing" if self.init_statuses else "ContainerCreating"
        self.statuses = {c["name"]: self._waiting(c, first) for c in self.spec["containers"]}
        self.running: dict[str, RunningContainer] = {}
        self.kubeconfig: Path | None = None
        self.host_dirs: dict[str, Path] = {}
        self._owned_volumes: list[tuple[Path, bool]] = []
        self._launches: dict[str, ContainerLaunch] = {}

    # ---- event input ------------------------------------------------------------------------------------------

    def observe(self, pod: Obj, *, deleted: bool = False) -> None:
        with self._lock:
            self.pod = pod
        if deleted or pod["metadata"].get("deletionTimestamp"):
            self._deleting.set()

    def interrupt(self) -> None:
        self._interrupt.set()

    def _check(self) -> None:
        if self._deleting.is_set() or self._interrupt.is_set():
            raise _Interrupted

    def _sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self._check()
            time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))

    # ---- status -------------------------------------------------------------------------------------------------

    def _init_containers(self) -> list[Obj]:
        return list(self.spec.get("initContainers") or [])

    @staticmethod
    def _waiting(container: Obj, reason: str, message: str | None = None) -> Obj:
        state: Obj = {"reason": reason}
        if message:
            state["message"] = message
        return {
            "name": container["name"],
            "image": container.get("image", ""),
            "imageID": "",
            "ready": False,
            "restartCount": 0,
            "started": False,
            "state": {"waiting": state},
        }

    def _condition(self, kind: str, status: bool, reason: str | None = None, message: str | None = None) -> None:
        value = "True" if status else "False"
        old = self.conditions.get(kind)
        cond: Obj = {"type": kind, "status": value, "lastProbeTime": None}
        cond["lastTransitionTime"] = old["lastTransitionTime"] if old and old["status"] == value else now()
        if reason:
            cond["reason"] = reason
        if message:
            cond["message"] = message
        self.conditions[kind] = cond

    def _publish(self) -> None:
        """Send the whole status with a JSON merge patch: lists (conditions, container statuses) are replaced
        wholesale, so stale `waiting`/`running` states never linger next to `terminated`."""
        with self._lock:
            observed = {c["type"]: c for c in (self.pod.get("status") or {}).get("conditions") or []}
        observed.setdefault(
            "PodScheduled",
            {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now()},
        )
        conditions = {**observed, **self.conditions}
        status: Obj = {
            "phase": self.phase,
            "conditions": list(conditions.values()),
            "hostIP": HOST_IP,
            "hostIPs": [{"ip": HOST_IP}],
            "startTime": self.start_time,
            "containerStatuses": list(self.statuses.values()),
            "reason": self.reason,
            "message": self.message,
        }
        if self.init_statuses:
            status["initContainerStatuses"] = list(self.init_statuses.values())
        generation = self.pod["metadata"].get("generation")
        if generation is not None:  # PodObservedGenerationTracking: the kubelet reports what it acted on
            status["observedGeneration"] = generation
        for attempt in range(5):
            try:
                self.api.patch(namespaced(self.namespace, "pods", self.name) + "/status", {"status": status})
                return
            except ApiError as exc:
                if exc.status == 404:
                    self._deleting.set()
                    return
                if exc.status == 422 or attempt == 4:
                    log.error("pod %s/%s status rejected: %s\n%s", self.namespace, self.name, exc, status)
                    return
                time.sleep(0.2 * (attempt + 1))

    # ---- lifecycle ----------------------------------------------------------------------------------------------

    def run(self) -> None:
        try:
            self._lifecycle()
        except _Interrupted:
            pass
        except Exception as exc:
            log.exception("node agent failed running pod %s/%s", self.namespace, self.name)
            self.phase, self.reason, self.message = "Failed", "NodeAgentError", f"test node agent error: {exc}"
            self._publish()
        finally:
            self._shutdown()
            self.finished.set()
        if self._deleting.is_set():
            self.agent.finalize_deletion(self.pod)
            self.agent._cleanup_pod_dir(self.uid)

    def _shutdown(self) -> None:
        """Stop whatever still runs; on deletion honour the grace period and publish final states."""
        if not self.running:
            return
        grace = 2.0
        if self._deleting.is_set():
            with self._lock:
                meta_grace = self.pod["metadata"].get("deletionGracePeriodSeconds")
            grace = min(float(meta_grace if meta_grace is not None else 30), DELETION_GRACE_CAP)
        for name, container in list(self.running.items()):
            code = container.terminate(grace)
            self._record_exit(self._container(name), self._table(name), container, code)
        self.running.clear()
        if self._deleting.is_set():
            all_ok = all(s["state"].get("terminated", {}).get("exitCode", 1) == 0 for s in self.statuses.values())
            self.phase = "Succeeded" if all_ok else "Failed"
            self._ready(False, "PodCompleted" if all_ok else "ContainersNotReady")
            self._publish()

    def _container(self, name: str) -> Obj:
        return next(c for c in [*self._init_containers(), *self.spec["containers"]] if c["name"] == name)

    def _ready(self, ready: bool, reason: str | None = None) -> None:
        self._condition("ContainersReady", ready, None if ready else reason)
        self._condition("Ready", ready, None if ready else reason)

    def _lifecycle(self) -> None:
        self._condition("PodReadyToStartContainers", False)
        self._condition(
            "Initialized", not self.init_statuses, None if not self.init_statuses else "ContainersNotInitialized"
        )
        self._ready(False, "ContainersNotReady")
        self._publish()
        self._prepare_volumes()
        self._condition("PodReadyToStartContainers", True)
        self._publish()
        for container in self._init_containers():
            if not self._run_init(container):
                return
        self._condition("Initialized", True)
        self._publish()
        self._run_main()

    def _prepare_volumes(self) -> None:
        resolver = Resolver(self.api, self.namespace)
        materializer = VolumeMaterializer(self.pod, self.pod_dir, resolver, HOST_IP, self.agent.sa_audience)
        last = ""
        while True:
            self._check()
            try:
                self.host_dirs = materializer.materialize()
                break
            except PodConfigError as exc:
                message = f"MountVolume.SetUp failed: {exc}"
                if message != last:
                    log.info("pod %s/%s waiting for volumes: %s", self.namespace, self.name, exc)
                    self.statuses = {
                        c["name"]: self._waiting(c, "ContainerCreating", message) for c in self.spec["containers"]
                    }
                    self._publish()
                    last = message
                if not exc.retry:
                    while True:  # a kubelet would retry forever; this cannot heal, so wait for deletion
                        self._sleep(1.0)
                self._sleep(1.0)
        self._owned_volumes = []
        for volume in self.spec.get("volumes") or []:
            host = self.host_dirs[volume["name"]]
            if "emptyDir" in volume:
                host.chmod(0o777)  # the kubelet creates emptyDirs world-writable: any runAsUser can use them
            if "hostPath" not in volume:  # a kubelet never changes ownership of inline hostPath volumes for fsGroup
                writable = "emptyDir" in volume or "persistentVolumeClaim" in volume
                read_only = not writable or bool((volume.get("persistentVolumeClaim") or {}).get("readOnly"))
                self._owned_volumes.append((host, read_only))
        self._write_kubeconfig()

    def _write_kubeconfig(self) -> None:
        """If a service-account token is projected (ServiceAccount admission adds kube-api-access-*), give local
        processes a kubeconfig with it: in-cluster config reads fixed /var/run/... paths a process can't see."""
        for volume in self.spec.get("volumes") or []:
            for source in (volume.get("projected") or {}).get("sources") or []:
                if "serviceAccountToken" in source:
                    token_file = self.host_dirs[volume["name"]] / source["serviceAccountToken"]["path"]
                    doc = {
                        "apiVersion": "v1",
                        "kind": "Config",
                        "clusters": [
                            {
                                "name": "in-cluster",
                                "cluster": {
                                    "server": f"https://{self.agent.api_host}:{self.agent.api_port}",
                                    "certificate-authority": str(self.agent.ca_file),
                                },
                            }
                        ],
                        "users": [{"name": "sa", "user": {"token": token_file.read_text().strip()}}],
                        "contexts": [
                            {
                                "name": "in-cluster",
                                "context": {"cluster": "in-cluster", "user": "sa", "namespace": self.namespace},
                            }
                        ],
                        "current-context": "in-cluster",
                    }
                    self.kubeconfig = self.pod_dir / "kubeconfig"
                    self.kubeconfig.write_text(yaml.safe_dump(doc))
                    return

    def _launch(self, container: Obj, restart: int) -> ContainerLaunch:
        name = container["name"]
        cdir = self.pod_dir / "containers" / name
        cdir.mkdir(parents=True, exist_ok=True)
        resolver = Resolver(self.api, self.namespace)
        with self._lock:
            pod = self.pod
        env = container_env(pod, container, resolver, HOST_IP)
        mounts = container_mounts(container, self.host_dirs, env)
        # The termination-message file: a fresh empty host file per run, mapped at terminationMessagePath.
        tm_file = cdir / f"termination-log-{restart}"
        tm_file.write_bytes(b"")
        mounts.append(Mount(container.get("terminationMessagePath") or "/dev/termination-log", tm_file))
        return ContainerLaunch(
            pod_namespace=self.namespace,
            pod_name=self.name,
            pod_uid=self.uid,
            container_name=name,
            image=container.get("image", ""),
            command=tuple(expand(a, env) for a in container.get("command") or []),
            args=tuple(expand(a, env) for a in container.get("args") or []),
            env=tuple(env.items()),
            working_dir=container.get("workingDir"),
            mounts=tuple(mounts),
            log_path=cdir / "output.log",
            scratch_dir=cdir,
            api_host=self.agent.api_host,
            api_port=self.agent.api_port,
            kubeconfig=self.kubeconfig,
            security=SecurityContext.of(pod["spec"], container),
            owned_volumes=tuple(self._owned_volumes),
        )

    def _start(self, container: Obj, table: dict[str, Obj]) -> RunningContainer | None:
        """Start one container; on failure record StartError (exit 128) and return None."""
        status = table[container["name"]]
        started = now()
        while True:
            self._check()
            try:
                launch = self._launch(container, status["restartCount"])
                break
            except PodConfigError as exc:
                # CreateContainerConfigError: a kubelet keeps retrying until the Secret/ConfigMap appears.
                status["state"] = {"waiting": {"reason": exc.reason, "message": str(exc)}}
                self._publish()
                if not exc.retry:
                    while True:
                        self._sleep(1.0)
                self._sleep(1.0)
        try:
            running = self.agent.runner_for(self.pod, container).start(launch)
        except ContainerStartError as exc:
            status.update(ready=False, started=False)
            status["state"] = {
                "terminated": {
                    "exitCode": 128,
                    "reason": "StartError",
                    "message": str(exc)[:MAX_MESSAGE],
                    "startedAt": started,
                    "finishedAt": now(),
                }
            }
            self._launches[container["name"]] = launch
            return None
        self._launches[container["name"]] = launch
        status.update(containerID=running.container_id, started=True, ready=True)
        status["state"] = {"running": {"startedAt": running.started_at.strftime("%Y-%m-%dT%H:%M:%SZ")}}
        return running

    def _record_exit(self, container: Obj, table: dict[str, Obj], running: RunningContainer, code: int) -> None:
        status = table[container["name"]]
        launch = self._launches[container["name"]]
        tm_path = next(m.host_path for m in reversed(launch.mounts) if m.host_path.name.startswith("termination-log"))
        policy = container.get("terminationMessagePolicy", "File")
        terminated: Obj = {
            "exitCode": code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": running.started_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "finishedAt": now(),
            "containerID": running.container_id,
        }
        message = termination_message(tm_path, launch.log_path, code, policy)
        if message:
            terminated["message"] = message
        status.update(ready=False, started=False)
        status["state"] = {"terminated": terminated}

    def _backoff(self, restarts: int) -> float:
        initial, cap = self.agent.restart_backoff
        return float(min(cap, initial * (2 ** max(0, restarts - 1))))

    def _restart(self, container: Obj, table: dict[str, Obj]) -> None:
        """Move terminated -> lastState, show CrashLoopBackOff while backing off, bump restartCount."""
        status = table[container["name"]]
        status["lastState"] = status["state"]
        status["restartCount"] += 1
        delay = self._backoff(status["restartCount"])
        status["state"] = {
            "waiting": {
                "reason": "CrashLoopBackOff",
                "message": f"back-off {delay:.0f}s restarting failed container={container['name']} pod={self.name}",
            }
        }
        self._publish()
        self._sleep(delay)

    def _run_init(self, container: Obj) -> bool:
        """Run an init container to success (restarting it unless restartPolicy is Never). False = pod failed."""
        if container.get("restartPolicy") == "Always":
            self.phase, self.reason = "Failed", "Unsupported"
            self.message = "sidecar init containers (restartPolicy: Always) are not supported by the test node agent"
            self._publish()
            return False
        while True:
            running = self._start(container, self.init_statuses)
            self._publish()
            code = 128
            if running is not None:
                self.running[container["name"]] = running
                while (polled := running.wait(0.2)) is None:
                    self._check_deadline()
                    self._check()
                code = polled
                del self.running[container["name"]]
                self._record_exit(container, self.init_statuses, running, code)
            if code == 0:
                self._publish()
                return True
            if self.restart_policy == "Never":
                self.phase = "Failed"
                self._publish()
                return False
            self._restart(container, self.init_statuses)

    def _check_deadline(self) -> None:
        deadline = self.spec.get("activeDeadlineSeconds")
        if deadline is None:
            return
        started = datetime.strptime(self.start_time, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        if (datetime.now(UTC) - started).total_seconds() > float(deadline):
            for name, running in list(self.running.items()):
                self._record_exit(self._container(name), self._table(name), running, running.terminate(2.0))
            self.running.clear()
            self.phase, self.reason = "Failed", "DeadlineExceeded"
            self.message = "Pod was active on the node longer than the specified deadline"
            self._ready(False, "PodFailed")
            self._publish()
            raise _Interrupted

    def _table(self, name: str) -> dict[str, Obj]:
        return self.init_statuses if name in self.init_statuses else self.statuses

    def _run_main(self) -> None:
        containers = {c["name"]: c for c in self.spec["containers"]}
        restart_at: dict[str, float] = {}
        for container in containers.values():
            running = self._start(container, self.statuses)
            if running is not None:
                self.running[container["name"]] = running
            elif self._should_restart(128):
                restart_at[container["name"]] = time.monotonic()
        self.phase = "Running"
        self._update_ready()
        self._publish()
        while True:
            wait_any(self.running, 0.2)
            self._check_deadline()
            self._check()
            changed = False
            for name, running in list(self.running.items()):
                code = running.poll()
                if code is None:
                    continue
                del self.running[name]
                self._record_exit(containers[name], self.statuses, running, code)
                changed = True
                if self._should_restart(code):
                    status = self.statuses[name]
                    status["lastState"] = status["state"]
                    status["restartCount"] += 1
                    delay = self._backoff(status["restartCount"])
                    status["state"] = {
                        "waiting": {
                            "reason": "CrashLoopBackOff",
                            "message": f"back-off {delay:.0f}s restarting failed container={name} pod={self.name}",
                        }
                    }
                    restart_at[name] = time.monotonic() + delay
            for name, when in list(restart_at.items()):
                if time.monotonic() >= when:
                    del restart_at[name]
                    running = self._start(containers[name], self.statuses)
                    changed = True
                    if running is not None:
                        self.running[name] = running
                    elif self._should_restart(128):
                        self.statuses[name]["restartCount"] += 1
                        restart_at[name] = time.monotonic() + self._backoff(self.statuses[name]["restartCount"])
            if not self.running and not restart_at:
                codes = [s["state"]["terminated"]["exitCode"] for s in self.statuses.values()]
                self.phase = "Succeeded" if all(c == 0 for c in codes) else "Failed"
                self._ready(False, "PodCompleted" if self.phase == "Succeeded" else "PodFailed")
                self._publish()
                return
            if changed:
                self._update_ready()
                self._publish()

    def _should_restart(self, code: int) -> bool:
        return self.restart_policy == "Always" or (self.restart_policy == "OnFailure" and code != 0)

    def _update_ready(self) -> None:
        ready = bool(self.running) and len(self.running) == len(self.spec["containers"])
        self._ready(ready, None if ready else "ContainersNotReady")
