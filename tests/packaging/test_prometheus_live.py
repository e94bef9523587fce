"""A real Prometheus (Debian's binary, started here on 127.0.0.1) scrapes a running operator
(`dreamkeeper operator --metrics-port P` against the real control plane) after a DreamSchedule has run; every
PromQL expression of the dashboard and of the alert rules must parse and return series for that schedule.

The rule for alert expressions: an alert is empty in a healthy system (that is what it is for), so each must
*parse and evaluate* (HTTP 200, status success, and Prometheus' own rule evaluation reports health "ok"), and each
of its probes (the sub-expressions it compares, listed in alerts.py) must return series. The healthy cycle on the
bundled sample must also leave every alert quiet.
"""

from __future__ import annotations

import os
import time
import urllib.error
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from codegen.observability import alerts, dashboard
from codegen.observability.generate import repo_root, rules_path
from codegen.rbac import operator_binding, operator_role

from tests.cluster import tools
from tests.cluster.controlplane import free_port
from tests.cluster.fixtures import KubeCluster
from tests.cluster.procs import ManagedProcess
from tests.packaging import cluster_support as cs
from tests.packaging.promtool import binary

pytestmark = pytest.mark.cluster

SCHEDULE = "nightly"
# Grafana's built-in interval variables, as a dashboard over the last few minutes would resolve them.
GRAFANA_VARIABLES = {"$__rate_interval": "2m", "$__interval": "2m", "$__range": "10m"}


@dataclass
class Prometheus:
    url: str
    proc: ManagedProcess

    def query(self, expr: str) -> dict[str, Any]:
        """/api/v1/query; raises with Prometheus' error text when the expression does not parse or evaluate."""
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        try:
            body: dict[str, Any] = cs.http_json(url)
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"{expr!r}: HTTP {exc.code}: {exc.read().decode(errors='replace')}") from None
        assert body["status"] == "success", (expr, body)
        return body["data"]  # type: ignore[no-any-return]

    def series(self, expr: str) -> list[dict[str, Any]]:
        return list(self.query(expr)["result"])


def start_prometheus(tmp: Path, target_port: int) -> Prometheus:
    tmp.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(rules_path(repo_root()))],
        "scrape_configs": [{"job_name": "dreamkeeper", "static_configs": [{"targets": [f"127.0.0.1:{target_port}"]}]}],
    }
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
    argv = [
        str(binary("prometheus")),
        f"--config.file={tmp / 'prometheus.yml'}",
        f"--storage.tsdb.path={tmp / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn",
    ]
    proc = ManagedProcess("prometheus", argv, tmp / "prometheus.log", die_with_parent=True)
    return Prometheus(f"http://127.0.0.1:{port}", proc)


@pytest.fixture
def operator(kube_cluster: KubeCluster, kube_namespace: str, tmp_path: Path) -> Iterator[tuple[str, int]]:
    """The operator as a subprocess, authenticated as its ServiceAccount bound to the generated Role."""
    cs.apply_chart_crds(kube_cluster)
    ns = kube_namespace
    role = operator_role("dreamkeeper-operator", ns)
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    kube_cluster.api.create(f"{rbac}/namespaces/{ns}/roles", role)
    kube_cluster.api.create(
        f"{rbac}/namespaces/{ns}/rolebindings", operator_binding("dreamkeeper-operator", role, "dk-operator", ns, ns)
    )
    kubeconfig = kube_cluster.service_account_kubeconfig(ns, "dk-operator", create=True)
    metrics_port, health_port = free_port(), free_port()
    argv = [
        str(tools.dreamkeeper_binary()), "operator", "--namespace", ns, "--metrics-port", str(metrics_port),
        "--health-port", str(health_port), "--bind", "127.0.0.1", "--kubeconfig", str(kubeconfig),
        "--job-image", "localhost/dreamkeeper:test", "--poll-seconds", "1", "--log-format", "text",
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env["NO_PROXY"] = "127.0.0.1,localhost"
    proc = ManagedProcess("operator", argv, tmp_path / "operator.log", env=env, die_with_parent=True)
    try:
        cs.poll(kube_cluster, "operator liveness", lambda: bool(cs.http_get(f"http://127.0.0.1:{health_port}/healthz")))
        yield ns, metrics_port
    finally:
        try:
            cs.delete_schedules(kube_cluster, ns)
        finally:
            proc.stop(grace=15)
            cs.remove_volume(kube_cluster, ns)
            print(f"\noperator log: {proc.log_path}")


def dashboard_queries(namespace: str) -> list[tuple[str, str]]:
    board = dashboard.build()
    out = []
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            for name, value in {**GRAFANA_VARIABLES, "$namespace": namespace, "$dreamschedule": SCHEDULE}.items():
                expr = expr.replace(name, value)
            assert "$" not in expr, expr
            out.append((panel["title"], expr))
    return out


def test_prometheus_scrapes_the_operator_and_every_expression_returns_series(
    kube_cluster: KubeCluster, operator: tuple[str, int], tmp_path: Path
) -> None:
    ns, metrics_port = operator
    prometheus = start_prometheus(tmp_path / "prometheus", metrics_port)
    try:
        kube_cluster.wait_for(
            "prometheus ready", lambda: cs.http_get(f"{prometheus.url}/-/ready").strip() != "", timeout=60
        )
        # Scrape a few times before the run so increase()/rate() windows see the counters change.
        cs.poll(kube_cluster, "operator scraped", lambda: bool(prometheus.series('up{job="dreamkeeper"} == 1')), 60)
        cs.make_agent(kube_cluster, ns, tmp_path / "volumes")
        cs.create_vocabulary_and_schedule(kube_cluster, ns, SCHEDULE, token="prometheus")
        run = cs.wait_run(kube_cluster, ns, SCHEDULE)
        assert run["result"] == "completed", run
        selector = f'{{dreamschedule="{SCHEDULE}", dreamschedule_namespace="{ns}"}}'
        cs.poll(
            kube_cluster,
            "the run scraped",
            lambda: any(
                float(s["value"][1]) == 1
                for s in prometheus.series(f'dreamkeeper_cycles_total{selector[:-1]}, result="completed"}}')
            ),
            60,
        )
        time.sleep(5)  # a few more samples after the change

        # Dashboard variables (Grafana's label_values) find the schedule.
        ready = prometheus.series(f'dreamkeeper_schedule_ready{{dreamschedule_namespace=~"{ns}"}}')
        assert {s["metric"]["dreamschedule"] for s in ready} == {SCHEDULE}

        empty = [(title, expr) for title, expr in dashboard_queries(ns) if not prometheus.series(expr)]
        assert empty == [], f"dashboard queries without series: {empty}"
        # The schedule-filtered ones are about this schedule (not just any series).
        cycles = prometheus.series(f"sum by (result) (increase(dreamkeeper_cycles_total{selector}[2m]))")
        assert any(s["metric"]["result"] == "completed" and float(s["value"][1]) > 0 for s in cycles), cycles

        for rule in alerts.ALERTS:
            for probe in rule.probes:
                found = prometheus.series(probe)
                assert found, f"{rule.alert}: probe {probe!r} returned no series"
                if "dreamschedule" in found[0]["metric"]:
                    assert any(s["metric"].get("dreamschedule") == SCHEDULE for s in found), (rule.alert, probe)
            firing = prometheus.series(rule.expr)  # parses and evaluates; a healthy cycle must not page
            assert firing == [], f"{rule.alert} fires after a healthy cycle: {firing}"

        # Prometheus evaluates the rules file itself: every rule loaded and evaluated without error.
        def evaluated() -> bool:
            groups = cs.http_json(f"{prometheus.url}/api/v1/rules")["data"]["groups"]
            rules = [r for g in groups for r in g["rules"]]
            assert sorted(r["name"] for r in rules) == sorted(a.alert for a in alerts.ALERTS)
            return all(r["health"] == "ok" and r.get("lastEvaluation", "").startswith("2") for r in rules)

        cs.poll(kube_cluster, "rules evaluated healthy", evaluated, 30)
        groups = cs.http_json(f"{prometheus.url}/api/v1/rules")["data"]["groups"]
        states = {r["name"]: r["state"] for g in groups for r in g["rules"]}
        assert set(states.values()) == {"inactive"}, states
    finally:
        prometheus.proc.stop(grace=10)
