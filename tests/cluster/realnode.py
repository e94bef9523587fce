"""A real node for the test control plane: containerd 2.x, the kubelet and kube-proxy built from Go modules
(tests/cluster/build-node.sh), pods on a bridge inside this machine.

`RealNodeCluster` is a `ControlPlane` (same API as the stand-in's `KubeCluster`: kubeconfig, api, kubectl,
service accounts, namespaces) whose apiserver listens on the node's bridge address, plus one Node `dk-realnode`
that runs pods for real: images from containerd (imported, see tests/tools/node-images.sh), probes, resource
limits and the OOM killer, securityContext and fsGroup, init containers, `kubectl logs/exec`, Services through
kube-proxy's iptables rules. Usable without pytest: `python -m tests.cluster.realnode` starts one and waits.

Why each setting is what it is: realnode_config.py; the machine side (lock, preflight, bridge, cleanup):
realnode_host.py; the measurements and what runs on which node: tests/cluster/README.md.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.cluster import tools
from tests.cluster.controlplane import ControlPlane, ControlPlaneConfig, free_port, serve_until_interrupted
from tests.cluster.kubeapi import namespaced
from tests.cluster.pki import issue_client_cert
from tests.cluster.procs import ManagedProcess
from tests.cluster.realnode_config import cni_config, containerd_config, kube_proxy_config, kubelet_config
from tests.cluster.realnode_host import (
    GATEWAY,
    KUBELET_TUNABLES,
    NODE_NAME,
    MachineLock,
    NodePaths,
    RealNodeError,
    cleanup,
    mount_var,
    preflight,
    record_sysctls,
    restore_sysctls,
    setup_network,
    sh,
)

log = logging.getLogger(__name__)

CHART_APP_VERSION_FILE = Path(__file__).resolve().parents[2] / "charts" / "dreamkeeper" / "Chart.yaml"
NODE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class NodeImages:
    """The images imported into the node's containerd: refs, and the archives they came from."""

    project: str  # localhost/dreamkeeper:src-<hash> (also tagged with the chart's appVersion)
    agent: str  # localhost/dreamkeeper/caching-agent:src-<hash>
    pause: str
    archives: dict[str, Path]


def prepare_images(timeout: float = 3600) -> NodeImages:
    """Build (or reuse) the images and their archives with tests/tools/node-images.sh."""
    script = tools.NODE_IMAGES_SCRIPT
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.splitlines()[-30:])
        raise RealNodeError(f"{script.name} exited {proc.returncode}:\n{tail}")
    refs: dict[str, str] = {}
    archives: dict[str, Path] = {}
    for line in proc.stdout.splitlines():
        role, ref, path = line.split(" ", 2)
        refs[role], archives[role] = ref, Path(path)
    missing = {"project", "agent", "pause"} - set(refs)
    if missing:
        raise RealNodeError(f"{script.name} did not report the images {sorted(missing)}:\n{proc.stdout}")
    return NodeImages(refs["project"], refs["agent"], refs["pause"], archives)


def chart_image() -> str:
    """The image the chart runs with its defaults: image.repository:appVersion."""
    for line in CHART_APP_VERSION_FILE.read_text().splitlines():
        if line.startswith("appVersion:"):
            return "localhost/dreamkeeper:" + line.split(":", 1)[1].strip().strip('"')
    raise RealNodeError(f"no appVersion in {CHART_APP_VERSION_FILE}")


class RealNodeCluster(ControlPlane):
    """The control plane plus the real node. `start_all()` / `stop_all()` as the stand-in's KubeCluster."""

    def __init__(self, paths: NodePaths | None = None, lock_timeout: float = 2700.0) -> None:
        super().__init__(
            ControlPlaneConfig(
                bind_address=GATEWAY,
                authorization_modes=("Node", "RBAC"),
                admission_plugins=("PodSecurity", "ServiceAccount", "NodeRestriction"),
            )
        )
        self.paths = paths or NodePaths()
        self.lock = MachineLock(self.paths.lock)
        self.lock_timeout = lock_timeout
        self.node_processes: list[ManagedProcess] = []
        self.images: NodeImages | None = None
        self.kube_proxy_healthz = 0
        self._binaries = {name: tools.node_bin_dir() / name for name in tools.NODE_BINARIES}
        self._locked = False
        # The kubelet (system:node:<name>) is authorised by the Node authorizer; the apiserver reaches the
        # kubelet with the admin certificate (the kubelet asks the apiserver whether that user may).
        pki = self.state_dir / "pki"
        self.config.extra_apiserver_flags += [
            f"--kubelet-client-certificate={pki / 'admin.crt'}",
            f"--kubelet-client-key={pki / 'admin.key'}",
            "--kubelet-preferred-address-types=InternalIP",
        ]

    node_name = NODE_NAME

    # ---- lifecycle -------------------------------------------------------------------------------------------

    def start_all(self) -> None:
        t0 = time.monotonic()
        preflight(self._binaries)
        self.images = prepare_images()
        self.timings["images"] = time.monotonic() - t0
        t = time.monotonic()
        self.lock.acquire(self.lock_timeout)
        self._locked = True
        self.timings["machine-lock"] = time.monotonic() - t
        cleanup(self.paths, self._binaries["kube-proxy"])  # whatever an earlier node left (a crash, a kill -9)
        record_sysctls(self.paths, KUBELET_TUNABLES)
        mount_var(self.paths)
        setup_network()
        self.start()  # the control plane, on the bridge address
        self._start_containerd()
        self._import_images()
        self._start_kubelet()
        self._start_kube_proxy()
        self._wait_node_ready()
        # The kubelet changed kernel tunables at start (once, in setupNode); put the machine's back right away.
        restore_sysctls(self.paths)
        self.timings["node-total"] = time.monotonic() - t0
        log.info("real node %s up in %.1fs: %s", NODE_NAME, self.timings["node-total"], self.timings)

    def stop_all(self) -> None:
        try:
            for proc in reversed(self.node_processes):
                if proc.name != "containerd":
                    proc.stop(grace=10.0)
            self._save_pod_logs()
            for proc in self.node_processes:
                proc.stop(grace=5.0)
            self.node_processes.clear()
            self.stop()
        finally:
            if self._locked:
                try:
                    cleanup(self.paths, self._binaries["kube-proxy"])
                finally:
                    self.lock.release()
                    self._locked = False

    # ---- the node's processes --------------------------------------------------------------------------------

    def _spawn_node(self, name: str, argv: list[str]) -> ManagedProcess:
        env = {"PATH": f"{tools.node_bin_dir()}:{NODE_PATH}", "HOME": "/root", "LANG": "C.UTF-8"}
        proc = ManagedProcess(name, argv, self.logs_dir / f"{name}.log", env=env, die_with_parent=True)
        self.node_processes.append(proc)
        return proc

    def _wait(self, what: str, check: Callable[[], bool], timeout: float = 180.0) -> float:
        return self.wait_for_node(what, check, timeout)

    def wait_for_node(self, what: str, check: Callable[[], bool], timeout: float = 180.0) -> float:
        """Like wait_for, also failing at once (with its log tail) when a node process died. Exceptions raised by
        `check` count as "not yet"."""
        start = time.monotonic()
        last = ""
        while True:
            for proc in self.node_processes:
                if not proc.alive():
                    raise RealNodeError(
                        f"{proc.name} exited {proc.returncode()} while waiting for {what}; "
                        f"log {proc.log_path}:\n{proc.log_tail(40)}"
                    )
            try:
                if check():
                    return time.monotonic() - start
            except Exception as exc:
                last = f"{type(exc).__name__}: {exc}"
            if time.monotonic() - start > timeout:
                tails = "\n".join(f"--- {p.name}:\n{p.log_tail(15)}" for p in self.node_processes)
                raise RealNodeError(f"timed out after {timeout:.0f}s waiting for {what} ({last})\n{tails}")
            time.sleep(0.5)

    def _start_containerd(self) -> None:
        assert self.images is not None
        paths = self.paths
        for d in (paths.containerd_root, paths.containerd_state, paths.cni_conf_dir, paths.cni_ipam_dir):
            d.mkdir(parents=True, exist_ok=True)
        (paths.cni_conf_dir / "10-dreamkeeper.conflist").write_text(cni_config(paths))
        config = self.state_dir / "node" / "containerd.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(containerd_config(paths, self.images.pause))
        self._spawn_node("containerd", [str(self._binaries["containerd"]), "--config", str(config)])
        self.timings["containerd"] = self._wait("containerd's socket", lambda: self.ctr("version") != "", 60)

    def ctr(self, *args: str, namespace: str = "k8s.io", timeout: float = 600) -> str:
        """The node's containerd through `ctr` (namespace k8s.io: the kubelet's)."""
        argv = [str(self._binaries["ctr"]), "--address", str(self.paths.socket), "--namespace", namespace, *args]
        return sh(*argv, timeout=timeout)

    def _import_images(self) -> None:
        assert self.images is not None
        t = time.monotonic()
        for role in ("pause", "project", "agent"):
            self.ctr("images", "import", "--no-unpack=false", str(self.images.archives[role]))
        # The chart's default image (repository:appVersion) is the project image, as a user tags their build.
        self.ctr("images", "tag", "--force", self.images.project, chart_image())
        have = self.ctr("images", "ls", "--quiet").split()
        wanted = {self.images.pause, self.images.project, self.images.agent, chart_image()}
        if not wanted <= set(have):
            raise RealNodeError(f"images missing after import: {sorted(wanted - set(have))}; containerd has {have}")
        self.timings["image-import"] = time.monotonic() - t

    def _node_kubeconfig(self, name: str, subject: str) -> Path:
        assert self.pki is not None
        crt, key = issue_client_cert(self.pki, name, subject)
        path = self.state_dir / "node" / f"{name}.kubeconfig"
        return self._write_kubeconfig(path, {"client-certificate": str(crt), "client-key": str(key)})

    def _start_kubelet(self) -> None:
        assert self.pki is not None
        kubeconfig = self._node_kubeconfig("kubelet", f"/O=system:nodes/CN=system:node:{NODE_NAME}")
        self.kubelet_port, self.kubelet_healthz = free_port(), free_port()
        config = self.state_dir / "node" / "kubelet.yaml"
        config.write_text(kubelet_config(self.paths, self.pki.ca_crt, self.kubelet_port, self.kubelet_healthz))
        for d in (self.paths.kubelet_root, self.paths.pod_logs):
            d.mkdir(parents=True, exist_ok=True)
        self._spawn_node(
            "kubelet",
            [
                str(self._binaries["kubelet"]),
                f"--config={config}",
                f"--kubeconfig={kubeconfig}",
                f"--hostname-override={NODE_NAME}",
                f"--node-ip={GATEWAY}",
                f"--root-dir={self.paths.kubelet_root}",
                f"--cert-dir={self.state_dir / 'node' / 'kubelet-pki'}",
                "--v=1",
            ],
        )

    def _start_kube_proxy(self) -> None:
        kubeconfig = self._node_kubeconfig("kube-proxy", "/CN=system:kube-proxy")
        metrics, self.kube_proxy_healthz = free_port(), free_port()
        config = self.state_dir / "node" / "kube-proxy.yaml"
        config.write_text(kube_proxy_config(kubeconfig, metrics, self.kube_proxy_healthz))
        self._spawn_node("kube-proxy", [str(self._binaries["kube-proxy"]), f"--config={config}", "--v=1"])

    def _wait_node_ready(self) -> None:
        def ready() -> bool:
            node = self.api.get_or_none(f"/api/v1/nodes/{NODE_NAME}")
            if node is None:
                return False
            conditions = {c["type"]: c["status"] for c in node.get("status", {}).get("conditions", [])}
            return conditions.get("Ready") == "True" and not node["spec"].get("taints")

        self.timings["node-ready"] = self._wait(f"node {NODE_NAME} Ready and untainted", ready, 240)

        def service_programmed() -> bool:
            rules = sh("iptables", "-t", "nat", "-S", "KUBE-SERVICES", check=False)
            return "default/kubernetes:https" in rules

        what = "kube-proxy's rule for the `kubernetes` Service"
        self.timings["kube-proxy"] = self._wait(what, service_programmed, 120)

    # ---- views -----------------------------------------------------------------------------------------------

    def container_log(self, namespace: str, pod: str, container: str, previous: bool = False) -> str:
        """The container's log through the apiserver and the kubelet (what `kubectl logs` reads)."""
        params = {"container": container, **({"previous": "true"} if previous else {})}
        return self.api.request_text("GET", namespaced(namespace, "pods", pod) + "/log", params=params)

    def kubelet_metrics(self, path: str = "/metrics") -> str:
        """The kubelet's metrics through the apiserver's node proxy (as a monitoring stack scrapes them);
        `/metrics/probes` has the probers' counters."""
        return self.api.request_text("GET", f"/api/v1/nodes/{NODE_NAME}/proxy{path}")

    def keep_logs(self, destination: Path) -> Path:
        super().keep_logs(destination)
        if self.paths.pod_logs.is_dir():
            shutil.copytree(self.paths.pod_logs, destination / "pods", dirs_exist_ok=True, symlinks=False)
        return destination

    def _save_pod_logs(self) -> None:
        """Copy the pods' logs into the state dir before cleanup removes the node's directories."""
        if self.paths.pod_logs.is_dir():
            shutil.copytree(self.paths.pod_logs, self.logs_dir / "pods", dirs_exist_ok=True, symlinks=False)


def main() -> None:  # pragma: no cover - manual debugging aid
    cluster = RealNodeCluster()

    def stop() -> None:
        cluster.stop_all()
        if os.environ.get("DREAMKEEPER_KEEP_CLUSTER_STATE") != "1":
            cluster.remove_state()

    serve_until_interrupted(cluster.start_all, stop, lambda: f"KUBECONFIG={cluster.kubeconfig}  node {NODE_NAME}")


if __name__ == "__main__":  # pragma: no cover
    main()
