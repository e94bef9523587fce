"""A real Kubernetes control plane for tests: etcd, kube-apiserver, kube-controller-manager, kube-scheduler.

State (PKI, etcd data, logs, kubeconfigs) lives in one directory on tmpfs. Flags and the reasons for them are in
tests/cluster/README.md. Usable without pytest: `python -m tests.cluster.controlplane` starts one and waits.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import secrets
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from tests.cluster import tools
from tests.cluster.kubeapi import ApiError, KubeApi, Obj
from tests.cluster.pki import Pki, make_pki
from tests.cluster.procs import ManagedProcess

log = logging.getLogger(__name__)

SERVICE_CIDR = "10.0.0.0/24"
SA_ISSUER = "https://kubernetes.default.svc.cluster.local"


class ControlPlaneError(RuntimeError):
    """The control plane could not start or stopped working; the message carries the component's log tail."""


class KubectlError(RuntimeError):
    def __init__(self, argv: Sequence[str], result: subprocess.CompletedProcess[str]) -> None:
        super().__init__(
            f"kubectl {' '.join(argv)} exited {result.returncode}:\n{result.stderr.strip() or result.stdout.strip()}"
        )
        self.result = result


EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
PORT_FLOOR = 20000  # below: well-known and registered services; 30000-32767 are Kubernetes' NodePorts
_handed_out: set[int] = set()  # never the same port twice from one process (a server may not have bound it yet)


def ephemeral_range() -> tuple[int, int]:
    """The kernel's range of source ports for outgoing connections (Linux's default when it cannot be read)."""
    try:
        low, high = (int(v) for v in EPHEMERAL_RANGE_FILE.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def _bindable(port: int) -> bool:
    """Free on every local address (no SO_REUSEADDR: a port in TIME_WAIT counts as taken)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A TCP port a test server can bind a moment later. Not one from ``bind(0)``: that comes from the ephemeral
    range, where every outgoing connection (the apiserver's own to etcd, a health poll) takes its source port, so
    between this check and the server's bind one of them could take it; seen once in a full run: kube-apiserver
    "bind: address already in use" at start. A random free port between ``PORT_FLOOR`` and the ephemeral range (or
    the NodePort range) is taken by no such connection; random so that concurrent test processes rarely meet."""
    low, _ = ephemeral_range()
    top = min(low, 30000) - 1
    if top - PORT_FLOOR >= 1000:
        for _ in range(200):
            port = secrets.randbelow(top - PORT_FLOOR + 1) + PORT_FLOOR
            if port not in _handed_out and _bindable(port):
                _handed_out.add(port)
                return port
    while True:  # a host whose ephemeral range starts low: the old way, never twice the same
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _handed_out:
            _handed_out.add(port)
            return port


def state_root() -> Path:
    """tmpfs when available: etcd and the apiserver write a lot, and nothing here must survive a reboot."""
    explicit = os.environ.get("DREAMKEEPER_CLUSTER_STATE_ROOT")
    if explicit:
        return Path(explicit)
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())


@dataclass
class ControlPlaneConfig:
    bin_dir: Path = field(default_factory=tools.control_plane_bin_dir)
    etcd: Path | None = None  # default: tools.etcd_binary() (honours DREAMKEEPER_ETCD)
    start_timeout: float = 180.0  # generous: 2 cores shared with other work
    with_controller_manager: bool = True
    with_scheduler: bool = True
    extra_apiserver_flags: list[str] = field(default_factory=list)
    # Where kube-apiserver listens (and what clients dial). Loopback for the stand-in node agent; the real node's
    # pods reach it on the node's bridge address (realnode.py), which is then also advertised as the `kubernetes`
    # Service's endpoint (reconciler "lease") and put in the serving certificate.
    bind_address: str = "127.0.0.1"
    # The real node adds the Node authorizer and NodeRestriction: its kubelet authenticates as system:node:<name>.
    # (Repeating these list flags in extra_apiserver_flags would append to them, not replace them.)
    authorization_modes: tuple[str, ...] = ("RBAC",)
    admission_plugins: tuple[str, ...] = ("PodSecurity", "ServiceAccount")


def _wait_until(
    what: str, check: Callable[[], bool], timeout: float, procs: Sequence[ManagedProcess], interval: float = 0.25
) -> float:
    """Poll `check` until true; fail fast with the log tail if a watched process dies. Returns seconds waited."""
    start = time.monotonic()
    last_error = ""
    while True:
        for proc in procs:
            if not proc.alive():
                raise ControlPlaneError(
                    f"{proc.name} exited with {proc.returncode()} while waiting for {what}; "
                    f"log {proc.log_path}:\n{proc.log_tail()}"
                )
        try:
            if check():
                return time.monotonic() - start
        except Exception as exc:
            last_error = f"{type(exc).__name__}: {exc}"
        if time.monotonic() - start > timeout:
            tails = "\n".join(f"--- {p.name} ({p.log_path}):\n{p.log_tail(20)}" for p in procs)
            raise ControlPlaneError(f"timed out after {timeout:.0f}s waiting for {what} ({last_error})\n{tails}")
        time.sleep(interval)


class ControlPlane:
    """Starts and stops the processes; hands out kubeconfigs and API clients. See fixtures.py for pytest use."""

    def __init__(self, config: ControlPlaneConfig | None = None, state_dir: Path | None = None) -> None:
        self.config = config or ControlPlaneConfig()
        self.state_dir = state_dir or Path(tempfile.mkdtemp(prefix="dk-k8s-", dir=state_root()))
        self.logs_dir = self.state_dir / "logs"
        self.pki: Pki | None = None
        self.processes: list[ManagedProcess] = []
        self.api_port = 0
        self.etcd_port = 0
        self.timings: dict[str, float] = {}
        self._api: KubeApi | None = None

    # ---- paths and URLs -------------------------------------------------------------------------------------

    @property
    def api_url(self) -> str:
        return f"https://{self.config.bind_address}:{self.api_port}"

    @property
    def kubeconfig(self) -> Path:
        """Admin kubeconfig (client certificate in group system:masters), absolute paths only."""
        return self.state_dir / "kubeconfig"

    @property
    def ca_file(self) -> Path:
        assert self.pki is not None
        return self.pki.ca_crt

    # ---- lifecycle -----------------------------------------------------------------------------------------

    def start(self) -> None:
        t0 = time.monotonic()
        cfg = self.config
        binaries = {name: tools.control_plane_binary(name) for name in tools.CONTROL_PLANE_BINARIES}
        if cfg.bin_dir != tools.control_plane_bin_dir():
            binaries = {name: cfg.bin_dir / name for name in tools.CONTROL_PLANE_BINARIES}
        etcd_bin = cfg.etcd or tools.etcd_binary()
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        loopback = cfg.bind_address == "127.0.0.1"
        self.pki = pki = make_pki(self.state_dir / "pki", server_ips=() if loopback else (cfg.bind_address,))
        self.timings["pki"] = time.monotonic() - t0
        self.etcd_port, etcd_peer, self.api_port = free_port(), free_port(), free_port()
        self._write_kubeconfig(
            self.kubeconfig, {"client-certificate": str(pki.admin_crt), "client-key": str(pki.admin_key)}
        )

        etcd = self._spawn(
            "etcd",
            [
                str(etcd_bin),
                "--name=t",
                f"--data-dir={self.state_dir / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{self.etcd_port}",
                f"--advertise-client-urls=http://127.0.0.1:{self.etcd_port}",
                f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
                f"--initial-cluster=t=http://127.0.0.1:{etcd_peer}",
                "--unsafe-no-fsync",
                "--log-level=warn",
                "--quota-backend-bytes=2147483648",
            ],
        )
        self.timings["etcd"] = _wait_until("etcd /health", self._etcd_healthy, cfg.start_timeout, [etcd])

        apiserver = self._spawn(
            "kube-apiserver",
            [
                str(binaries["kube-apiserver"]),
                f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
                f"--bind-address={cfg.bind_address}",
                f"--secure-port={self.api_port}",
                f"--tls-cert-file={pki.apiserver_crt}",
                f"--tls-private-key-file={pki.apiserver_key}",
                f"--client-ca-file={pki.ca_crt}",
                f"--service-account-issuer={SA_ISSUER}",
                f"--service-account-key-file={pki.sa_pub}",
                f"--service-account-signing-key-file={pki.sa_key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                f"--authorization-mode={','.join(cfg.authorization_modes)}",
                # PodSecurity and ServiceAccount are in the default set already; named here so the intent is explicit.
                # ServiceAccount admission stays on (unlike envtest) because kube-controller-manager creates the
                # `default` SA; kube_namespace waits for it.
                f"--enable-admission-plugins={','.join(cfg.admission_plugins)}",
                # Loopback: no "kubernetes" Endpoints pointing at it. Elsewhere the address pods can reach.
                *(
                    ["--endpoint-reconciler-type=none"]
                    if loopback
                    else ["--endpoint-reconciler-type=lease", f"--advertise-address={cfg.bind_address}"]
                ),
                "--allow-privileged=true",
                "--profiling=false",
                "--enable-priority-and-fairness=false",  # saves CPU on 2 cores; no fairness needed in tests
                f"--cert-dir={self.state_dir / 'apiserver-certs'}",
                *cfg.extra_apiserver_flags,
            ],
        )
        self.timings["kube-apiserver"] = _wait_until(
            "kube-apiserver /readyz", lambda: self._get("/readyz") == "ok", cfg.start_timeout, [etcd, apiserver]
        )

        watched = [etcd, apiserver]
        common = [
            f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            "--profiling=false",
        ]
        health: list[tuple[str, int, ManagedProcess]] = []
        if cfg.with_controller_manager:
            port = free_port()
            kcm = self._spawn(
                "kube-controller-manager",
                [
                    str(binaries["kube-controller-manager"]),
                    *common,
                    f"--secure-port={port}",
                    f"--service-account-private-key-file={pki.sa_key}",
                    f"--root-ca-file={pki.ca_crt}",
                    f"--cluster-signing-cert-file={pki.ca_crt}",
                    f"--cluster-signing-key-file={pki.ca_key}",
                ],
            )
            health.append(("kube-controller-manager", port, kcm))
        if cfg.with_scheduler:
            port = free_port()
            sched = self._spawn("kube-scheduler", [str(binaries["kube-scheduler"]), *common, f"--secure-port={port}"])
            health.append(("kube-scheduler", port, sched))
        for name, port, proc in health:
            watched.append(proc)
            self.timings[name] = _wait_until(
                f"{name} /healthz",
                functools.partial(_healthz_ok, port),
                cfg.start_timeout,
                watched,
            )
        if cfg.with_controller_manager:
            # The service-account controller creating `default/default` proves KCM's controllers really run.
            self.timings["default-sa"] = _wait_until(
                "the `default` ServiceAccount (kube-controller-manager)",
                lambda: self.api.get_or_none("/api/v1/namespaces/default/serviceaccounts/default") is not None,
                cfg.start_timeout,
                watched,
            )
        self.timings["total"] = time.monotonic() - t0
        log.info("control plane up at %s in %.1fs: %s", self.api_url, self.timings["total"], self.timings)

    def stop(self) -> None:
        """Stop in reverse order: SIGTERM each process group, SIGKILL after a grace period."""
        for proc in reversed(self.processes):
            proc.stop(grace=10.0)
        self.processes.clear()

    def remove_state(self) -> None:
        shutil.rmtree(self.state_dir, ignore_errors=True)

    def has_logs(self) -> bool:
        return self.logs_dir.is_dir() and any(self.logs_dir.iterdir())

    def keep_logs(self, destination: Path) -> Path:
        """Copy the component logs out of tmpfs (called when a test failed) and return where they went."""
        destination.mkdir(parents=True, exist_ok=True)
        for item in self.logs_dir.iterdir() if self.logs_dir.is_dir() else ():
            if item.is_dir():
                shutil.copytree(item, destination / item.name, dirs_exist_ok=True)
            else:
                shutil.copy2(item, destination / item.name)
        return destination

    def check_alive(self) -> None:
        """Raise with the log tail if a component died (e.g. apiserver lost etcd)."""
        for proc in self.processes:
            if not proc.alive():
                raise ControlPlaneError(
                    f"{proc.name} died with {proc.returncode()}; log {proc.log_path}:\n{proc.log_tail()}"
                )

    def _spawn(self, name: str, argv: list[str]) -> ManagedProcess:
        proc = ManagedProcess(name, argv, self.logs_dir / f"{name}.log", die_with_parent=True)
        self.processes.append(proc)
        return proc

    # ---- health helpers ------------------------------------------------------------------------------------

    def _etcd_healthy(self) -> bool:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.etcd_port}/health", timeout=2) as r:
            return bool(json.loads(r.read()).get("health") == "true")

    def _ssl_context(self) -> ssl.SSLContext:
        assert self.pki is not None
        ctx = ssl.create_default_context(cafile=str(self.pki.ca_crt))
        ctx.load_cert_chain(str(self.pki.admin_crt), str(self.pki.admin_key))
        return ctx

    def _get(self, path: str) -> str:
        try:
            with urllib.request.urlopen(self.api_url + path, context=self._ssl_context(), timeout=5) as r:
                return str(r.read().decode())
        except urllib.error.HTTPError as exc:
            return f"HTTP {exc.code}"

    # ---- kubeconfigs and clients ----------------------------------------------------------------------------

    def _write_kubeconfig(self, path: Path, user: dict[str, Any], namespace: str = "default") -> Path:
        assert self.pki is not None
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "dreamkeeper-test",
                    "cluster": {
                        "server": self.api_url if self.api_port else "https://127.0.0.1:0",
                        "certificate-authority": str(self.pki.ca_crt),
                    },
                }
            ],
            "users": [{"name": "user", "user": user}],
            "contexts": [
                {
                    "name": "dreamkeeper-test",
                    "context": {"cluster": "dreamkeeper-test", "user": "user", "namespace": namespace},
                }
            ],
            "current-context": "dreamkeeper-test",
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        path.chmod(0o600)
        return path

    @property
    def api(self) -> KubeApi:
        """The admin JSON client (raw dicts, see kubeapi.py); one shared, thread-safe instance."""
        if self._api is None:
            assert self.pki is not None, "the control plane has not been started"
            self._api = KubeApi(self.api_url, self.pki.ca_crt, client_cert=(self.pki.admin_crt, self.pki.admin_key))
        return self._api

    def api_client(self, kubeconfig: Path | None = None) -> k8s.ApiClient:
        """A fresh `kubernetes.client.ApiClient` for the admin kubeconfig (or the given one)."""
        configuration = k8s.Configuration()
        k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(kubeconfig or self.kubeconfig), client_configuration=configuration
        )
        return k8s.ApiClient(configuration)

    def impersonating_client(self, user: str, groups: Sequence[str] = ()) -> k8s.ApiClient:
        """Admin credentials + `Impersonate-User` header: requests are authorised as `user`.

        For a ServiceAccount use user=`system:serviceaccount:<ns>:<name>`; the apiserver adds the SA groups.
        Only one extra group is supported (the python client keeps one value per header).
        """
        client = self.api_client()
        client.set_default_header("Impersonate-User", user)  # type: ignore[no-untyped-call]
        if len(groups) > 1:
            raise ValueError("the python client can send only one Impersonate-Group header; use a token kubeconfig")
        for group in groups:
            client.set_default_header("Impersonate-Group", group)  # type: ignore[no-untyped-call]
        return client

    def service_account_token(self, namespace: str, name: str, expiration_seconds: int = 3600) -> str:
        """A real token for the ServiceAccount (TokenRequest API); the SA must exist."""
        request = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"audiences": [SA_ISSUER], "expirationSeconds": expiration_seconds},
        }
        result = self.api.create(f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", request)
        return str(result["status"]["token"])

    def service_account_kubeconfig(self, namespace: str, name: str, *, create: bool = False) -> Path:
        """A kubeconfig that authenticates *as* the ServiceAccount with a real token: least-privilege RBAC checks
        see exactly what the operator would see in-cluster. `create=True` creates the SA if it is missing."""
        if create:
            try:
                self.api.create(f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": name}})
            except ApiError as exc:
                if exc.status != 409:
                    raise
        token = self.service_account_token(namespace, name)
        path = self.state_dir / "kubeconfigs" / f"sa-{namespace}-{name}.yaml"
        return self._write_kubeconfig(path, {"token": token}, namespace=namespace)

    def service_account_client(self, namespace: str, name: str, *, create: bool = False) -> k8s.ApiClient:
        return self.api_client(self.service_account_kubeconfig(namespace, name, create=create))

    def kubectl(
        self,
        *args: str,
        input: str | None = None,
        check: bool = True,
        kubeconfig: Path | None = None,
        timeout: float = 120.0,
    ) -> subprocess.CompletedProcess[str]:
        """Run the cached kubectl against this cluster; raises KubectlError (with stderr) when `check` fails."""
        # A discovery cache of this cluster's own: the shared ~/.kube/cache may predate CRDs installed since (or
        # belong to an earlier cluster on the same port), and kubectl does not refresh it for category names.
        cache = self.state_dir / "kubectl-cache"
        argv = [
            str(tools.kubectl_binary()),
            f"--kubeconfig={kubeconfig or self.kubeconfig}",
            f"--cache-dir={cache}",
            *args,
        ]
        env = {**os.environ, "KUBECONFIG": str(kubeconfig or self.kubeconfig)}
        result = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout, env=env)
        if result.returncode != 0 and "the server doesn't have a resource type" in result.stderr:
            shutil.rmtree(cache, ignore_errors=True)  # stale discovery: refresh once, as a user would
            result = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout, env=env)
        if check and result.returncode != 0:
            raise KubectlError(args, result)
        return result

    # ---- convenience ----------------------------------------------------------------------------------------

    def wait_for(self, what: str, check: Callable[[], bool], timeout: float = 60.0, interval: float = 0.25) -> float:
        """Poll `check` until it returns True; fails with component log tails if a control-plane process dies
        or the timeout passes. Exceptions raised by `check` count as "not yet". Returns the seconds waited."""
        return _wait_until(what, check, timeout, self.processes, interval)

    def create_namespace(self, name: str, labels: dict[str, str] | None = None, timeout: float = 60.0) -> str:
        """Create a namespace and wait for its `default` ServiceAccount (pods need it: SA admission is on)."""
        self.api.create("/api/v1/namespaces", {"metadata": {"name": name, "labels": labels or {}}})
        if self.config.with_controller_manager:
            self.wait_for(
                f"ServiceAccount {name}/default",
                lambda: self.api.get_or_none(f"/api/v1/namespaces/{name}/serviceaccounts/default") is not None,
                timeout,
            )
        return name

    def delete_namespace(self, name: str, *, wait: bool = False, timeout: float = 120.0) -> None:
        try:
            self.api.delete(f"/api/v1/namespaces/{name}")
        except ApiError as exc:
            if exc.status != 404:
                raise
        if wait:
            self.wait_for(
                f"namespace {name} to be gone",
                lambda: self.api.get_or_none(f"/api/v1/namespaces/{name}") is None,
                timeout,
            )

    def create_host_volume(
        self,
        name: str,
        host_dir: Path,
        *,
        capacity: str = "1Gi",
        storage_class: str = "",
        access_modes: Sequence[str] = ("ReadWriteOnce",),
        claim: tuple[str, str] | None = None,
    ) -> Obj:
        """A static hostPath PersistentVolume on `host_dir`; `claim=(namespace, pvc_name)` pre-binds it.

        The node agent then maps any PVC bound to it to `host_dir`. The PV is cluster-scoped: delete it yourself.
        """
        host_dir.mkdir(parents=True, exist_ok=True)
        spec: Obj = {
            "capacity": {"storage": capacity},
            "accessModes": list(access_modes),
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": storage_class,
            "hostPath": {"path": str(host_dir.resolve()), "type": "Directory"},
        }
        if claim:
            spec["claimRef"] = {"namespace": claim[0], "name": claim[1]}
        body = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec}
        return self.api.create("/api/v1/persistentvolumes", body)


def _healthz_ok(port: int) -> bool:
    return _insecure_get(port, "/healthz") == "ok"


def _insecure_get(port: int, path: str) -> str:
    """GET on KCM/scheduler's self-signed endpoint; /healthz is in their always-allowed paths."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with urllib.request.urlopen(f"https://127.0.0.1:{port}{path}", context=ctx, timeout=3) as r:
        return str(r.read().decode())


def serve_until_interrupted(start: Callable[[], None], stop: Callable[[], None], banner: Callable[[], str]) -> None:
    """Manual debugging aid: start, print how to reach it, wait for Ctrl-C, stop (also when start fails)."""
    logging.basicConfig(level=logging.INFO)
    try:
        start()
        print(f"{banner()}  (Ctrl-C to stop)", flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        stop()


def main() -> None:  # pragma: no cover - manual debugging aid
    plane = ControlPlane()

    def stop() -> None:
        plane.stop()
        plane.remove_state()

    serve_until_interrupted(plane.start, stop, lambda: f"KUBECONFIG={plane.kubeconfig}")


if __name__ == "__main__":  # pragma: no cover
    main()
