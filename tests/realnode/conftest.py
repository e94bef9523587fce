"""Fixtures of the real-node end-to-end tests: the chart's release (installed once, re-installed when a test
uninstalled it) and a namespace under Pod Security `restricted`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cluster.realnode import RealNodeCluster
from tests.realnode.support import Release, remove_volumes, restrict


@pytest.fixture(scope="session")
def real_release(real_cluster: RealNodeCluster) -> Iterator[Release]:
    release = Release(real_cluster)
    try:
        yield release
    finally:
        if release.installed():
            release.uninstall()


@pytest.fixture
def release(real_release: Release) -> Release:
    """The chart installed with its defaults and its operator Ready (installed again if a test uninstalled it)."""
    return real_release.ensure()


@pytest.fixture
def restricted_namespace(real_cluster: RealNodeCluster, real_namespace: str) -> Iterator[str]:
    restrict(real_cluster, real_namespace)
    try:
        yield real_namespace
    finally:
        remove_volumes(real_cluster, real_namespace)
