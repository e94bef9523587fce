"""Finding 2 of issue 17 on the real control plane: deleting a namespace with schedules never hangs, whether the
operator is running or already gone (kopf put a finalizer on every schedule with a daemon, and only a running
operator removed it). The chart and manifests/install.yaml uninstalls are in tests/packaging.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dreamkeeper.kube import FINALIZER, GROUP, VERSION
from tests.cluster.fixtures import KubeCluster
from tests.cluster.kubeapi import namespaced
from tests.kube.cluster_support import (
    OperatorProcess,
    condition_of,
    eventually,
    grant_operator_rbac,
    jobs_of,
    make_agent,
    remove_volume,
    schedule_path,
    status_of,
    unbound_claim,
    vocabulary_path,
)

pytestmark = pytest.mark.cluster


def _served_schedule_and_vocabulary(cluster: KubeCluster, ns: str, operator: OperatorProcess) -> None:
    """A MemoryVocabulary (rendered into its ConfigMap) and a DreamSchedule using it, both seen by the operator,
    with the run-now cycle's Job created (owned by the schedule: it goes with it)."""
    api = cluster.api
    api.create(
        vocabulary_path(ns),
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "MemoryVocabulary", "metadata": {"name": "words"},
         "spec": {"alwaysSpecificWords": ["Rose"]}},
    )  # fmt: skip
    api.create(
        schedule_path(ns),
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DreamSchedule", "metadata": {"name": "nightly"},
         "spec": {"schedule": "0 3 1 1 *", "claimName": "agent-data", "vocabularyRef": {"name": "words"},
                  "runNowToken": "go", "safeguards": {"minIntervalHours": 0}}},
    )  # fmt: skip

    def served() -> bool:
        ready = condition_of(status_of(cluster, ns, "nightly"), "Ready")
        return ready is not None and ready.get("status") == "True" and bool(jobs_of(cluster, ns))

    eventually(cluster, "schedule served, its Job created", served, timeout=90)
    eventually(cluster, "vocabulary rendered", lambda: api.get_or_none(namespaced(ns, "configmaps", "words-memvocab")))
    for path in (schedule_path(ns, "nightly"), vocabulary_path(ns, "words")):
        assert not api.get(path)["metadata"].get("finalizers"), path  # nothing only a running operator can remove


def _namespace_gone(cluster: KubeCluster, ns: str) -> None:
    cluster.delete_namespace(ns, wait=True, timeout=90)


@pytest.mark.parametrize("operator_running", [True, False], ids=["operator-running", "operator-gone"])
def test_deleting_a_namespace_with_schedules_completes(
    crds: KubeCluster, kube_namespace: str, tmp_path: Path, operator_running: bool
) -> None:
    ns = kube_namespace
    make_agent(crds, ns, tmp_path / "volumes")
    operator = OperatorProcess(crds, [ns], grant_operator_rbac(crds, ns), tmp_path / "logs")
    operator.start()
    try:
        _served_schedule_and_vocabulary(crds, ns, operator)
        if not operator_running:
            operator.stop(kill=True)  # SIGKILL: no shutdown hook gets to clean anything up
        _namespace_gone(crds, ns)
        assert operator.tracebacks() == [], operator.log_text()[-3000:]
    finally:
        operator.stop()
        remove_volume(crds, ns)


def test_an_upgrade_releases_the_finalizer_an_earlier_operator_left(
    crds: KubeCluster, kube_namespace: str, tmp_path: Path
) -> None:
    """Schedules served by an earlier version carry `dreamkeeper.io/finalizer`: the new operator removes it (no
    handler asks for one any more), so the namespace deletion after the upgrade does not wait for anybody."""
    ns, api = kube_namespace, crds.api
    unbound_claim(crds, ns, "agent-data")
    body: dict[str, Any] = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "DreamSchedule",
        "metadata": {"name": "old", "finalizers": [FINALIZER]},
        "spec": {"schedule": "0 3 1 1 *", "claimName": "agent-data"},
    }
    api.create(schedule_path(ns), body)
    operator = OperatorProcess(crds, [ns], grant_operator_rbac(crds, ns), tmp_path / "logs")
    operator.start()
    try:
        eventually(
            crds,
            "the old finalizer removed",
            lambda: not api.get(schedule_path(ns, "old"))["metadata"].get("finalizers"),
            timeout=60,
        )
    finally:
        operator.stop()
    _namespace_gone(crds, ns)
