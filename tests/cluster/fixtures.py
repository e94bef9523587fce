"""pytest plugin: a real control plane per session, a namespace per test (registered in tests/conftest.py).

Fixtures:
- `kube_cluster` (session): a started `KubeCluster` (etcd, kube-apiserver, kube-controller-manager,
  kube-scheduler, and the test node agent with one Ready node). If it cannot start, every test using it
  *errors* with the reason; nothing is skipped. Deselect explicitly with `-m 'not cluster'`.
- `kube_namespace` (function): the name of a fresh namespace (its `default` ServiceAccount exists), deleted
  after the test.

Tests that use either fixture are marked `cluster` automatically.

The real node (realnode.py: kubelet, containerd, kube-proxy from `make tools`) has its own pair:
- `real_cluster` (session): a started `RealNodeCluster` whose one node `dk-realnode` runs pods for real.
- `real_namespace` (function): a fresh namespace on it, deleted (and waited for) after the test.
Tests that use them are marked `realnode` (and `cluster`); `pytest -m realnode` runs exactly them.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol, TypeVar

import pytest

from tests.cluster.controlplane import ControlPlane, ControlPlaneConfig
from tests.cluster.nodeagent import NodeAgent
from tests.cluster.procs import live_processes
from tests.cluster.realnode import RealNodeCluster

log = logging.getLogger(__name__)

CLUSTER_FIXTURES = {"kube_cluster", "kube_namespace"}
REALNODE_FIXTURES = {"real_cluster", "real_namespace"}
KEEP_ENV = "DREAMKEEPER_KEEP_CLUSTER_STATE"  # =1: keep the state dir (PKI, logs, etcd data) after the session


class KubeCluster(ControlPlane):
    """A running control plane plus its node agent. Besides ControlPlane's API (kubeconfig, api_url,
    api_client(), kubectl(), service_account_kubeconfig(), service_account_client(), impersonating_client(),
    create_namespace(), delete_namespace(), create_host_volume()) it offers the node agent's views."""

    node_agent: NodeAgent

    @property
    def node_name(self) -> str:
        return self.node_agent.node_name

    def container_log(self, namespace: str, pod: str, container: str) -> str:
        return self.node_agent.container_log(namespace, pod, container)

    def start_all(self) -> None:
        self.start()
        self.node_agent = NodeAgent(
            self.api,
            self.state_dir / "node",
            api_port=self.api_port,
            ca_file=self.ca_file,
        )
        self.node_agent.start()
        self._wait_node_schedulable()

    def _wait_node_schedulable(self, timeout: float = 90.0) -> None:
        """The node lifecycle controller removes the not-ready taint once it has seen the node Ready."""

        def schedulable() -> bool:
            return not self.api.get(f"/api/v1/nodes/{self.node_agent.node_name}")["spec"].get("taints")

        self.timings["node-ready"] = self.wait_for("the test node to lose its taints", schedulable, timeout)

    def keep_logs(self, destination: Path) -> Path:
        """Component logs plus every container's output and termination-message files (not volume data)."""
        super().keep_logs(destination)
        pods = self.state_dir / "node" / "pods"
        if pods.is_dir():
            shutil.copytree(
                pods,
                destination / "pods",
                ignore=shutil.ignore_patterns("volumes", "home", "rootfs"),
                dirs_exist_ok=True,
            )
        return destination

    def stop_all(self) -> None:
        agent = getattr(self, "node_agent", None)
        if agent is not None:
            agent.stop()
        self.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if REALNODE_FIXTURES & names:
            item.add_marker(pytest.mark.realnode)
        if (CLUSTER_FIXTURES | REALNODE_FIXTURES) & names:
            item.add_marker(pytest.mark.cluster)


# Marks must be added before `-m` deselection (which also runs in pytest_collection_modifyitems).
pytest_collection_modifyitems = pytest.hookimpl(tryfirst=True)(pytest_collection_modifyitems)


class _SessionCluster(Protocol):
    state_dir: Path

    def start_all(self) -> None: ...
    def stop_all(self) -> None: ...
    def has_logs(self) -> bool: ...
    def keep_logs(self, into: Path) -> Path: ...
    def remove_state(self) -> None: ...


C = TypeVar("C", bound=_SessionCluster)


def _session_cluster(
    cluster: C, request: pytest.FixtureRequest, *, name: str, logs_prefix: str, logs_are: str
) -> Iterator[C]:
    """Start ``cluster`` for the session; on failure or teardown keep its logs where a failed run can be read.

    Errors (never skips) with the reason when it cannot start: a test that needs a real component runs it.
    """
    try:
        cluster.start_all()
    except BaseException:
        try:
            cluster.stop_all()
            if cluster.has_logs():
                kept = cluster.keep_logs(Path(tempfile.mkdtemp(prefix=logs_prefix)))
                log.error("%s failed to start; logs kept in %s", name, kept)
        finally:
            cluster.remove_state()
        raise
    os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")
    try:
        yield cluster
    finally:
        cluster.stop_all()
        if os.environ.get(KEEP_ENV) == "1":
            print(f"\n[{name}] state kept in {cluster.state_dir}")
        else:
            if request.session.testsfailed > 0:
                kept = cluster.keep_logs(Path(tempfile.mkdtemp(prefix=logs_prefix)))
                print(f"\n[{name}] tests failed; {logs_are} logs kept in {kept}")
            cluster.remove_state()


@pytest.fixture(scope="session")
def kube_cluster(request: pytest.FixtureRequest) -> Iterator[KubeCluster]:
    yield from _session_cluster(
        KubeCluster(ControlPlaneConfig()),
        request,
        name="kube_cluster",
        logs_prefix="dk-k8s-logs-",
        logs_are="control-plane and container",
    )
    leftovers = live_processes()
    if leftovers:  # stop_all must have reaped everything; say so loudly if not
        log.error("processes still alive after teardown: %s", leftovers)


@pytest.fixture(scope="session")
def real_cluster(request: pytest.FixtureRequest) -> Iterator[RealNodeCluster]:
    """The control plane with the real node; errors (never skips) with the reason when it cannot start."""
    yield from _session_cluster(
        RealNodeCluster(),
        request,
        name="real_cluster",
        logs_prefix="dk-realnode-logs-",
        logs_are="control-plane, node and pod",
    )


@pytest.fixture
def real_namespace(real_cluster: RealNodeCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    name = real_cluster.create_namespace(_namespace_name(request.node.nodeid), labels={"dreamkeeper.test/ns": "1"})
    try:
        yield name
    finally:
        # Waited for: the kubelet really stops the pods (SIGTERM, grace), and the next test should not share
        # the node's two cores with them.
        real_cluster.delete_namespace(name, wait=True, timeout=300)


def _namespace_name(nodeid: str) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", nodeid.split("::")[-1].lower()).strip("-")[:40].strip("-")
    return f"t-{base}-{uuid.uuid4().hex[:5]}"


@pytest.fixture
def kube_namespace(kube_cluster: KubeCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    name = kube_cluster.create_namespace(_namespace_name(request.node.nodeid), labels={"dreamkeeper.test/ns": "1"})
    try:
        yield name
    finally:
        kube_cluster.delete_namespace(name)
