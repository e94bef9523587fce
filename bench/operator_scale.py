"""Operator scale: N DreamSchedules on a real control plane -> operator RSS and time to reconcile all after a restart.

    python -m bench operator-scale                 # 500 schedules -> bench/results/operator-scale.{json,md}
    python -m bench operator-scale --quick --output /tmp/x.json   # 20 schedules (used by a cluster test)

Each schedule has its own PVC (one agent each). The operator runs as a subprocess (`dreamkeeper operator -n
bench`) authenticated as its ServiceAccount with the generated Role. Phases:

1. cold start: the operator sees N new schedules (finalizers, first status write) -> time until every schedule
   reports ``status.observedGeneration`` and the operator's ``dreamkeeper_schedules_reconciled`` gauge is N;
2. restart: the operator is stopped, every spec is edited while it is down (generation + 1), it is started
   again -> time from process start until every status has caught up with the new generation; the operator's
   RSS (VmRSS) and peak RSS (VmHWM) are read from /proc afterwards and after a quiet period.

Goals (issue 7): RSS < 200 MB, reconcile-all after restart < 60 s at 500 schedules.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.cluster.controlplane import ControlPlane

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
GOAL_RSS_MB = 200.0
GOAL_RESTART_SECONDS = 60.0


def _rss_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) in MB of ``pid``."""
    values: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) / 1024.0
    return values["VmRSS"], values["VmHWM"]


def _all_observed(api: Any, namespace: str, count: int, generation: int) -> bool:
    from dreamkeeper.kube import GROUP, SCHEDULE_PLURAL, VERSION

    items = api.get(f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{SCHEDULE_PLURAL}")["items"]
    done = [
        i
        for i in items
        if i["metadata"].get("generation") == generation
        and (i.get("status") or {}).get("observedGeneration") == generation
    ]
    return len(items) == count and len(done) == count


def measure(plane: ControlPlane, namespace: str, count: int, logs: Path) -> dict[str, Any]:
    """Create ``count`` schedules in ``namespace`` (CRDs installed), run the operator, restart it; the numbers."""
    from tests.cluster.kubeapi import namespaced
    from tests.kube.cluster_support import OperatorProcess, grant_operator_rbac

    from dreamkeeper.kube import GROUP, SCHEDULE_PLURAL, VERSION

    api = plane.api
    schedules = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{SCHEDULE_PLURAL}"
    started = time.monotonic()
    for index in range(count):
        name = f"agent-{index:04d}"
        claim = {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "none",
            "resources": {"requests": {"storage": "1Gi"}},
        }
        api.create(namespaced(namespace, "persistentvolumeclaims"), {"metadata": {"name": name}, "spec": claim})
        api.create(
            schedules,
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "DreamSchedule",
                "metadata": {"name": name},
                "spec": {"schedule": "0 3 1 1 *", "claimName": name},
            },
        )
    setup_seconds = time.monotonic() - started
    kubeconfig = grant_operator_rbac(plane, namespace)
    operator = OperatorProcess(plane, [namespace], kubeconfig, logs)
    try:
        t0 = time.monotonic()
        operator.start()
        plane.wait_for("cold start: every schedule reconciled", lambda: _all_observed(api, namespace, count, 1), 600)
        cold_seconds = time.monotonic() - t0
        assert operator.proc is not None
        cold_rss, cold_peak = _rss_mb(operator.proc.pid)

        operator.stop()
        for index in range(count):  # edited while the operator is down: the restart has real work to do
            api.patch(f"{schedules}/agent-{index:04d}", {"spec": {"successfulJobsHistoryLimit": 4}})
        t1 = time.monotonic()
        operator.start()
        plane.wait_for("restart: every schedule reconciled", lambda: _all_observed(api, namespace, count, 2), 600)
        restart_seconds = time.monotonic() - t1
        gauge = operator.metric("dreamkeeper_schedules_reconciled")
        assert operator.proc is not None
        pid = operator.proc.pid
        restart_rss, restart_peak = _rss_mb(pid)
        time.sleep(20)  # quiet period: nothing is due, the daemons sleep
        idle_rss, idle_peak = _rss_mb(pid)
        errors = operator.metric("dreamkeeper_handler_errors_total", handler="schedule")
        tracebacks = len(operator.tracebacks())
    finally:
        operator.stop()
    peak = max(cold_peak, restart_peak, idle_peak)
    return {
        "benchmark": "operator-scale",
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load_avg_1m": os.getloadavg()[0]},
        "schedules": count,
        "setup_seconds": round(setup_seconds, 1),
        "cold_start_reconcile_seconds": round(cold_seconds, 2),
        "restart_reconcile_seconds": round(restart_seconds, 2),
        "rss_mb": {
            "after_cold_start": round(cold_rss, 1),
            "after_restart": round(restart_rss, 1),
            "idle_20s_later": round(idle_rss, 1),
            "peak": round(peak, 1),
        },
        "schedules_reconciled_gauge": gauge,
        "handler_errors": errors,
        "tracebacks_in_log": tracebacks,
        "goals": {
            "rss_mb_below": GOAL_RSS_MB,
            "restart_seconds_below": GOAL_RESTART_SECONDS,
            "rss_met": peak < GOAL_RSS_MB,
            "restart_met": restart_seconds < GOAL_RESTART_SECONDS,
        },
    }


def run(count: int, output: Path, command: str) -> dict[str, Any]:
    """On a control plane of its own (no scheduler: no pod ever runs here)."""
    from tests.cluster.controlplane import ControlPlane, ControlPlaneConfig
    from tests.kube.cluster_support import install_crds

    plane = ControlPlane(ControlPlaneConfig(with_scheduler=False))
    plane.start()
    try:
        install_crds(plane)
        namespace = plane.create_namespace("bench")
        logs = Path(tempfile.mkdtemp(prefix="dk-operator-scale-"))  # the operator's log, outside the repo
        result = measure(plane, namespace, count, logs)
        result["operator_log"] = str(logs / "operator.log")
    finally:
        plane.stop()
        plane.remove_state()
    return {"command": command, **result}


def markdown(result: dict[str, Any]) -> str:
    rss = result["rss_mb"]
    goals = result["goals"]
    return "\n".join(
        [
            "# Operator scale",
            "",
            f"Command: `{result['command']}`  ",
            f"Date: {result['date']}; {result['machine']['cpus']} CPUs (shared with other work; 1-min load "
            f"{result['machine']['load_avg_1m']:.1f} at the end); real kube-apiserver + etcd from tests/cluster.",
            "",
            f"{result['schedules']} DreamSchedules, each with its own PVC; the operator runs as its ServiceAccount "
            "with the generated Role.",
            "",
            "| measure | value | goal |",
            "|---|---|---|",
            f"| reconcile all after a restart (specs edited while down) | {result['restart_reconcile_seconds']} s | "
            f"< {goals['restart_seconds_below']:.0f} s ({'met' if goals['restart_met'] else 'NOT met'}) |",
            "| reconcile all on a cold start (finalizers + first status) | "
            f"{result['cold_start_reconcile_seconds']} s | |",
            f"| operator peak RSS (VmHWM) | {rss['peak']} MB | < {goals['rss_mb_below']:.0f} MB "
            f"({'met' if goals['rss_met'] else 'NOT met'}) |",
            f"| RSS after cold start / after restart / idle 20 s later | {rss['after_cold_start']} / "
            f"{rss['after_restart']} / {rss['idle_20s_later']} MB | |",
            f"| handler errors / tracebacks in the log | {result['handler_errors']} / "
            f"{result['tracebacks_in_log']} | 0 |",
            "",
            "Reconciled = every schedule's `status.observedGeneration` equals its `metadata.generation`, polled every "
            "0.25 s from the test side (the time includes kopf's initial list, finalizer patches on the cold start, "
            "and one full pass per schedule: GET, Job list on its claim, PVC check, status patch).",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench operator-scale", description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=500)
    parser.add_argument("--quick", action="store_true", help="20 schedules (a smoke run for the test suite).")
    parser.add_argument("--output", type=Path, default=RESULTS / "operator-scale.json")
    args = parser.parse_args(argv)
    count = 20 if args.quick else args.schedules
    shown = ["python -m bench operator-scale", *(argv if argv is not None else sys.argv[1:])]
    result = run(count, args.output, " ".join(shown))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    args.output.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))
    goals = result["goals"]
    return 0 if goals["rss_met"] and goals["restart_met"] and not result["handler_errors"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
