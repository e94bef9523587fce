"""The scale benchmark on the session's control plane at 20 schedules: every phase reconciles all, no handler
errors, RSS inside the goal, and a restart reads schedules, claims and cycle Jobs from watched caches."""

from __future__ import annotations

from pathlib import Path

from bench.operator_scale import GOAL_RSS_MB, THIS, measure

from tests.cluster.fixtures import KubeCluster

COUNT = 20


def test_operator_scale_quick(crds: KubeCluster, kube_namespace: str, tmp_path: Path) -> None:
    result = measure(crds, kube_namespace, COUNT, tmp_path / "logs")
    phases = {p["phase"]: p for p in result["phases"] if p["operator"] == THIS}
    assert set(phases) == {"cold", "restart-edited", "restart-unchanged"}
    for phase in phases.values():
        assert phase["schedules_reconciled_gauge"] == COUNT, phase
        assert phase["handler_errors"] == 0 and phase["tracebacks_in_log"] == 0, phase
        assert phase["kopf_handler_failures"] == 0, phase
        # The goal is for 5,000 schedules; 20 must be far inside it (the numbers themselves live in bench/results).
        assert phase["rss_mb"]["peak"] < GOAL_RSS_MB, phase
    # Issue 27 item 4: a pass reads its schedule, its claim's Jobs and its claim from watched caches, not from the
    # API server. Before, every restart cost each schedule at least one GET of it, one LIST of its claim's Jobs and
    # one GET of its claim (1.2-2 of each, bench/results/operator-scale.md); now a restart costs one paged list and
    # one watch of each kind, whatever the number of schedules.
    for name in ("restart-edited", "restart-unchanged"):
        requests = phases[name]["requests"]
        for read in ("GET dreamschedules", "LIST jobs", "GET persistentvolumeclaims"):
            assert requests.get(read, 0) / COUNT < 0.25, (name, read, requests)
