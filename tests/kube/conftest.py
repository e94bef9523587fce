"""Fixtures shared by the operator's cluster tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.fixtures import KubeCluster
from tests.kube.agent_support import AgentDeployment, AgentEnv, ClaimWatcher
from tests.kube.cluster_support import (
    OperatorProcess,
    grant_operator_rbac,
    install_crds,
    release_finalizers,
    remove_volume,
)


@pytest.fixture(scope="session")
def crds(kube_cluster: KubeCluster) -> KubeCluster:
    """The control plane with the generated CRDs installed (once per session)."""
    install_crds(kube_cluster)
    return kube_cluster


@pytest.fixture
def agent_env(crds: KubeCluster, kube_namespace: str, tmp_path: Path) -> Iterator[AgentEnv]:
    """The spec.agent cluster tests' world (``AgentEnv``); everything it started is stopped afterwards."""
    kubeconfig = grant_operator_rbac(crds, kube_namespace)
    operator = OperatorProcess(crds, [kube_namespace], kubeconfig, tmp_path / "logs")
    agent = AgentDeployment(crds, kube_namespace, tmp_path / "volumes")
    watcher = ClaimWatcher(crds, kube_namespace, agent.claim)
    try:
        yield AgentEnv(crds, kube_namespace, operator, agent, watcher)
    finally:
        watcher.stop()
        operator.stop()
        agent.delete()
        release_finalizers(crds, kube_namespace)
        remove_volume(crds, kube_namespace, agent.claim)
        print(f"\noperator log: {operator.log_path}")
