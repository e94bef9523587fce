"""Operator scale: N DreamSchedules on a real control plane -> time to reconcile all after a restart, RSS, API calls.

    python -m bench operator-scale --schedules 500 1000 2000 5000        # -> bench/results/operator-scale.{json,md}
    python -m bench operator-scale --schedules 5000 --baseline /work/wt/base/.venv/bin/dreamkeeper
    python -m bench operator-scale --quick --output /tmp/x.json          # 20 schedules (a smoke run)

Each schedule has its own PVC (one agent each), created already bound to its own PersistentVolume by a bounded pool
of keep-alive connections (``operator_setup.py``: O(N) requests; the controller manager's binder, limited to 20
requests/s, took > 600 s for 5,000 claims). The operator runs as a subprocess (`dreamkeeper operator -n
bench`) authenticated as its ServiceAccount with the generated Role. One control plane per size (no scheduler: no
pod ever runs here; the controller manager runs, as in a cluster). Phases:

1. cold start: the operator sees N new schedules -> time until every schedule reports ``status.observedGeneration``;
2. restart, specs edited: the operator is stopped, every spec is edited while it is down (generation + 1), it is
   started again -> time from process start until every status has caught up with the new generation (the goal);
3. restart, nothing edited: stopped and started again -> time until its ``dreamkeeper_schedules_reconciled`` gauge is
   N (every schedule had a pass; nothing to write).

With ``--baseline DREAMKEEPER`` (another checkout's executable, e.g. today's main) phases 2 and 3 run for both
operators, alternately, on the same control plane and the same schedules, so the ratios are from one run. Each phase
records the wall time, the CPU seconds of the operator, kube-apiserver, etcd and the controller manager, the API
requests the server counted (by verb and resource), the operator's RSS and peak RSS, its handler errors and the load
average (2 cores shared with other work). ``--py-spy PATH`` adds a sampling profile of the operator per phase.

Goals (issue 27): at 5,000 schedules, reconcile-all after a restart < 120 s, peak RSS < 500 MB, 0 handler errors.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client.parser import text_string_to_metric_families

from bench.operator_probe import (
    CpuMeter,
    PySpy,
    ScheduleProgress,
    plane_pids,
    request_counts,
    request_delta,
    rss_mb,
)
from bench.operator_setup import MERGE, VOLUME_LABEL, WORKERS, Connections, create_objects

if TYPE_CHECKING:
    from tests.cluster.controlplane import ControlPlane
    from tests.kube.cluster_support import OperatorProcess

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
GOAL_SCHEDULES = 5000
GOAL_RSS_MB = 500.0
GOAL_RESTART_SECONDS = 120.0
QUIET_SECONDS = 20.0  # after a phase: nothing is due, the loops sleep; RSS then is the steady state
THIS = "this"


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _history_job(name: str, claim: str, owner: dict[str, Any], index: int) -> dict[str, Any]:
    """A finished, counted cycle Job of ``owner``, as the operator leaves them for the history limits. ``managedBy``
    keeps the Job controller away (no pod ever runs here); the bench writes its finished status itself."""
    from dreamkeeper.kube import ANNOTATION_COUNTED, ANNOTATION_SLOT, LABEL_CLAIM, LABEL_TRIGGER

    meta = owner["metadata"]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"{name}-{29000000 + index}",
            "labels": {LABEL_CLAIM: claim, LABEL_TRIGGER: "schedule"},
            "annotations": {ANNOTATION_COUNTED: "true", ANNOTATION_SLOT: f"2025-01-0{1 + index}T03:00:00Z"},
            "ownerReferences": [
                {"apiVersion": owner["apiVersion"], "kind": "DreamSchedule", "name": meta["name"], "uid": meta["uid"]}
            ],
        },
        "spec": {
            "managedBy": "bench.dreamkeeper.io/history",
            "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "dream", "image": "x"}]}},
        },
    }


FINISHED = {
    "status": {
        "startTime": "2025-01-01T03:00:00Z",
        "completionTime": "2025-01-01T03:01:00Z",
        "succeeded": 1,
        "conditions": [
            {"type": kind, "status": "True", "lastTransitionTime": "2025-01-01T03:01:00Z"}
            for kind in ("SuccessCriteriaMet", "Complete")
        ],
    }
}


def _edit_all(plane: ControlPlane, schedules: str, count: int, generation: int) -> None:
    """Edit every spec (generation + 1) while the operator is down: the restart has real work to do."""

    conns = Connections(plane)

    def edit(index: int) -> None:
        body = {"spec": {"successfulJobsHistoryLimit": 10 + generation}}
        conns.request("PATCH", f"{schedules}/agent-{index:04d}", body, MERGE)

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        list(pool.map(edit, range(count)))


class Phase:
    """What one phase of one operator costs: wall, CPU per process, API requests, RSS, load."""

    def __init__(
        self, plane: ControlPlane, operator: OperatorProcess, label: str, phase: str, logs: Path, py_spy: Path | None
    ) -> None:
        self.plane, self.operator, self.label, self.phase, self.logs = plane, operator, label, phase, logs
        self.py_spy = py_spy
        self.result: dict[str, Any] = {"operator": label, "phase": phase, "load_avg_1m_before": _load()}

    def begin(self) -> float:
        self.log_offset = len(self.operator.log_text())  # the log is appended to by every start
        self.requests = request_counts(self.plane)
        self.cpu = CpuMeter(plane_pids(self.plane))
        self.cpu.start()
        t0 = time.monotonic()
        self.operator.start()
        assert self.operator.proc is not None
        pid = self.operator.proc.pid
        self.cpu.pids["operator"] = pid
        self.cpu._start["operator"] = 0.0  # a fresh process: all its CPU is this phase's
        self.spy = PySpy(self.py_spy, pid, self.logs / f"py-spy-{self.label}-{self.phase}.txt")
        return t0

    def end(self, t0: float, done_at: float, count: int) -> dict[str, Any]:
        self.result["seconds"] = round(done_at - t0, 2)
        self.result["cpu_seconds"] = self.cpu.stop()
        requests = request_delta(self.requests, request_counts(self.plane))
        self.result["requests"] = requests
        self.result["requests_per_schedule"] = round(sum(requests.values()) / count, 2)
        profile = self.spy.stop()
        if profile is not None:
            self.result["profile"] = profile
        assert self.operator.proc is not None
        pid = self.operator.proc.pid
        rss, _ = rss_mb(pid)
        time.sleep(QUIET_SECONDS)
        idle, peak = rss_mb(pid)
        # One scrape, as Prometheus would make: its cost grows with the schedules (a series set per schedule).
        scrape_started = time.monotonic()
        text = _scrape(self.operator)
        scrape_seconds = round(time.monotonic() - scrape_started, 2)
        self.result["scrape"] = {"seconds": scrape_seconds, "mb": round(len(text) / 1e6, 2)}
        _, peak = rss_mb(pid)
        self.result["rss_mb"] = {"after": round(rss, 1), "idle": round(idle, 1), "peak": round(peak, 1)}
        self.result["schedules_reconciled_gauge"] = _sample(text, "dreamkeeper_schedules_reconciled")
        self.result["handler_errors"] = sum(
            _sample(text, "dreamkeeper_handler_errors_total", handler=h) or 0
            for h in ("schedule", "vocabulary", "schedule_deleted", "startup")
        )
        log = self.operator.log_text()[self.log_offset :]
        self.result["tracebacks_in_log"] = log.count("Traceback")
        # kopf's own handler failures (an exception in a watching handler) are not in our counter: count them.
        self.result["kopf_handler_failures"] = log.count("failed with an exception")
        self.result["load_avg_1m_after"] = _load()
        self.operator.stop()
        return self.result


def _scrape(operator: OperatorProcess) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{operator.metrics_port}/metrics", timeout=300) as response:
        return str(response.read().decode())


def _sample(text: str, name: str, **labels: str) -> float | None:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return None


def _reconciled(operator: OperatorProcess) -> int:
    """The operator's ``schedules`` liveness probe: schedules that finished a pass (cheap, unlike a scrape; kopf
    caches a probe's value for 10 s, so the time of an unchanged restart is known to within 10 s)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{operator.health_port}/healthz", timeout=30) as response:
        return int(json.loads(response.read()).get("schedules", 0))


def _gauge_at(operator: OperatorProcess, count: int, timeout: float) -> float:
    """Wait until every schedule had a pass; the monotonic time that was first seen."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if _reconciled(operator) >= count:
                return time.monotonic()
        except (OSError, ValueError):
            pass
        time.sleep(0.25)
    raise TimeoutError(f"the operator did not reconcile {count} schedules")


def measure(
    plane: ControlPlane,
    namespace: str,
    count: int,
    logs: Path,
    *,
    baseline: Path | None = None,
    py_spy: Path | None = None,
    jobs_per_schedule: int = 2,
    timeout: float = 1800.0,
) -> dict[str, Any]:
    """Create ``count`` schedules in ``namespace`` (CRDs installed), run the operator(s) through the phases."""
    from tests.kube.cluster_support import OperatorProcess, grant_operator_rbac

    from dreamkeeper.kube import GROUP, SCHEDULE_PLURAL, VERSION

    schedules = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{SCHEDULE_PLURAL}"
    before = request_counts(plane)
    setup = create_objects(plane, namespace, schedules, count, _history_job, FINISHED, jobs_per_schedule)
    # Every request the setup caused, the controller manager's included: O(N), nothing left for the binder.
    setup["server_requests"] = dict(request_delta(before, request_counts(plane)))
    kubeconfig = grant_operator_rbac(plane, namespace)
    operators = {THIS: OperatorProcess(plane, [namespace], kubeconfig, logs / THIS)}
    if baseline is not None:
        operators["baseline"] = OperatorProcess(plane, [namespace], kubeconfig, logs / "baseline", binary=baseline)
    progress = ScheduleProgress(plane, schedules)
    progress.start()
    phases: list[dict[str, Any]] = []
    try:
        generation = 1
        phase = Phase(plane, operators[THIS], THIS, "cold", logs, py_spy)
        t0 = phase.begin()
        phases.append(phase.end(t0, progress.wait(count, generation, timeout), count))
        order = ["baseline", THIS] if baseline is not None else [THIS]
        for label in order:
            _edit_all(plane, schedules, count, generation)
            generation += 1
            phase = Phase(plane, operators[label], label, "restart-edited", logs, py_spy)
            t0 = phase.begin()
            phases.append(phase.end(t0, progress.wait(count, generation, timeout), count))
        for label in order:
            phase = Phase(plane, operators[label], label, "restart-unchanged", logs, py_spy)
            t0 = phase.begin()
            phases.append(phase.end(t0, _gauge_at(operators[label], count, timeout), count))
    finally:
        progress.close()
        for operator in operators.values():
            operator.stop()
        plane.api.delete("/api/v1/persistentvolumes", labelSelector=f"{VOLUME_LABEL}={namespace}")
    return {
        "benchmark": "operator-scale",
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "schedules": count,
        "setup_seconds": setup["seconds"],
        "setup": setup,
        "phases": phases,
        "operator_logs": str(logs),
    }


def goals(result: dict[str, Any]) -> dict[str, Any]:
    """The issue's goals, judged on this operator's edited restart (and its peak RSS over every phase)."""
    mine = [p for p in result["phases"] if p["operator"] == THIS]
    restart = next(p for p in mine if p["phase"] == "restart-edited")
    peak = max(p["rss_mb"]["peak"] for p in mine)
    errors = sum(p["handler_errors"] + p["tracebacks_in_log"] + p["kopf_handler_failures"] for p in mine)
    return {
        "at_schedules": GOAL_SCHEDULES,
        "restart_seconds_below": GOAL_RESTART_SECONDS,
        "rss_mb_below": GOAL_RSS_MB,
        "restart_met": restart["seconds"] < GOAL_RESTART_SECONDS,
        "rss_met": peak < GOAL_RSS_MB,
        "errors_met": errors == 0,
    }


def run(count: int, logs_root: Path, *, baseline: Path | None, py_spy: Path | None, jobs: int) -> dict[str, Any]:
    """On a control plane of its own."""
    from tests.cluster.controlplane import ControlPlane, ControlPlaneConfig
    from tests.kube.cluster_support import install_crds

    plane = ControlPlane(ControlPlaneConfig(with_scheduler=False))
    plane.start()
    try:
        install_crds(plane)
        namespace = plane.create_namespace("bench")
        logs = logs_root / f"n{count}"
        result = measure(plane, namespace, count, logs, baseline=baseline, py_spy=py_spy, jobs_per_schedule=jobs)
    finally:
        plane.stop()
        plane.remove_state()
    result["goals"] = goals(result)
    return result


def _cpu(p: dict[str, Any]) -> str:
    cpu = p["cpu_seconds"]
    return f"{cpu.get('operator', 0)} / {cpu.get('kube-apiserver', 0)} / {cpu.get('etcd', 0)} / " + str(
        cpu.get("kube-controller-manager", 0)
    )


def _top_requests(p: dict[str, Any], count: int, n: int = 5) -> str:
    return ", ".join(f"{k} {v / count:.2f}" for k, v in list(p["requests"].items())[:n])


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "# Operator scale",
        "",
        f"Command: `{report['command']}`  ",
        f"Date: {report['date']}; {report['machine']['cpus']} CPUs shared with other work (1-min load average "
        "beside each phase); real kube-apiserver + etcd + controller manager from tests/cluster.",
        "",
        "Each size: N DreamSchedules, each with its own PVC (bound) and "
        f"{report['jobs_per_schedule']} finished history Jobs, on a fresh control plane; the operator runs as its "
        "ServiceAccount with the generated Role. `this` is this checkout's operator"
        + (f"; `baseline` is `{report['baseline']}`" if report.get("baseline") else "")
        + ".",
        "",
        "| N | operator | phase | seconds | CPU s: operator / apiserver / etcd / KCM | API requests per schedule "
        "(top) | RSS after / idle / peak MB | one scrape s / MB | errors | load before → after |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for result in report["results"]:
        count = result["schedules"]
        for p in result["phases"]:
            rss = p["rss_mb"]
            lines.append(
                f"| {count} | {p['operator']} | {p['phase']} | {p['seconds']} | {_cpu(p)} | "
                f"{p['requests_per_schedule']}: {_top_requests(p, count)} | {rss['after']} / {rss['idle']} / "
                f"{rss['peak']} | {p['scrape']['seconds']} / {p['scrape']['mb']} | "
                f"{int(p['handler_errors'])} + {p['tracebacks_in_log']} tb + {p['kopf_handler_failures']} kopf | "
                f"{p['load_avg_1m_before']} → {p['load_avg_1m_after']} |"
            )
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench operator-scale", description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, nargs="+", default=[500, 1000, 2000, 5000])
    parser.add_argument("--quick", action="store_true", help="20 schedules (a smoke run).")
    parser.add_argument("--baseline", type=Path, help="another checkout's dreamkeeper executable, run side by side")
    parser.add_argument("--jobs-per-schedule", type=int, default=2, help="finished history Jobs on each claim")
    parser.add_argument("--py-spy", type=Path, help="py-spy executable: profile the operator in each phase")
    parser.add_argument("--output", type=Path, default=RESULTS / "operator-scale.json")
    parser.add_argument("--logs", type=Path, help="where the operators' logs and profiles go (default: a temp dir)")
    args = parser.parse_args(argv)
    sizes = [20] if args.quick else args.schedules
    shown = ["python -m bench operator-scale", *(argv if argv is not None else sys.argv[1:])]
    logs = args.logs or Path(tempfile.mkdtemp(prefix="dk-operator-scale-"))
    report: dict[str, Any] = {
        "command": " ".join(shown),
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "baseline": str(args.baseline) if args.baseline else None,
        "jobs_per_schedule": args.jobs_per_schedule,
        "results": [],
    }
    for count in sizes:
        result = run(count, logs, baseline=args.baseline, py_spy=args.py_spy, jobs=args.jobs_per_schedule)
        report["results"].append(result)
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(report, indent=2) + "\n")  # after each size: a long run keeps what it has
        args.output.with_suffix(".md").write_text(markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
