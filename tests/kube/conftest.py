"""Fixtures shared by the operator's cluster tests."""

from __future__ import annotations

import pytest

from tests.cluster.fixtures import KubeCluster
from tests.kube.cluster_support import install_admission, install_crds


@pytest.fixture(scope="session")
def crds(kube_cluster: KubeCluster) -> KubeCluster:
    """The control plane with the generated CRDs and admission policy installed (once per session)."""
    install_crds(kube_cluster)
    install_admission(kube_cluster)
    return kube_cluster
