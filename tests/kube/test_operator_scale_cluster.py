"""The scale benchmark's quick mode on the session's control plane: 20 schedules, restart, RSS."""

from __future__ import annotations

from pathlib import Path

from bench.operator_scale import GOAL_RESTART_SECONDS, GOAL_RSS_MB, measure

from tests.cluster.fixtures import KubeCluster


def test_operator_scale_quick(crds: KubeCluster, kube_namespace: str, tmp_path: Path) -> None:
    result = measure(crds, kube_namespace, 20, tmp_path / "logs")
    assert result["schedules_reconciled_gauge"] == 20
    assert result["handler_errors"] == 0 and result["tracebacks_in_log"] == 0
    # The goals are for 500 schedules; 20 must be far inside them (the numbers themselves live in bench/results).
    assert result["rss_mb"]["peak"] < GOAL_RSS_MB
    assert result["restart_reconcile_seconds"] < GOAL_RESTART_SECONDS
