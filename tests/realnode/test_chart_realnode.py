"""The chart on the real node (kubelet + containerd + kube-proxy): installed with its defaults, the operator pod
Ready through the kubelet's own probes, Pod Security `restricted` enforced by admission and by the runtime, and a
real Prometheus scraping the metrics Service through the cluster network (kube-proxy's rules, the pod bridge)."""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.cluster.controlplane import free_port
from tests.cluster.kubeapi import ApiError, namespaced
from tests.cluster.procs import ManagedProcess
from tests.cluster.realnode import RealNodeCluster, chart_image
from tests.cluster.realnode_host import NODE_NAME
from tests.packaging import cluster_support as cs
from tests.packaging.promtool import binary
from tests.realnode.support import Release, eventually, nat_rules

pytestmark = pytest.mark.realnode


def _probe_count(cluster: RealNodeCluster, pod: str, result: str) -> float:
    """prober_probe_total of the operator's liveness probe, from the kubelet's own /metrics/probes."""
    text = cluster.kubelet_metrics("/metrics/probes")
    value = cs.metric(text, "prober_probe_total", probe_type="Liveness", result=result, pod=pod, container="operator")
    return value or 0.0


def test_the_chart_installs_with_its_defaults_and_the_operator_is_ready_through_its_real_probes(
    real_cluster: RealNodeCluster, release: Release
) -> None:
    pod = release.wait_ready()
    name = pod["metadata"]["name"]
    (container,) = pod["spec"]["containers"]
    # The defaults: the chart's own image (repository:appVersion), IfNotPresent, on the real node.
    assert container["image"] == chart_image()
    assert pod["spec"]["nodeName"] == NODE_NAME
    (state,) = pod["status"]["containerStatuses"]
    assert state["ready"] and state["started"], state
    assert state["containerID"].startswith("containerd://"), state
    assert state["imageID"], state  # resolved by containerd from the imported image

    # The kubelet probes the container's /healthz (initialDelaySeconds 15, every 20 s): count its successes.
    def probed() -> bool:
        return _probe_count(real_cluster, name, "successful") >= 2

    eventually(real_cluster, "two successful liveness probes", probed)
    assert _probe_count(real_cluster, name, "failed") == 0
    live = release.operator_pod()
    assert live["status"]["containerStatuses"][0]["restartCount"] == 0
    # The probe's target answers on the pod's own address (the operator binds the pod IP, never 0.0.0.0).
    ip = live["status"]["podIP"]
    assert ip.startswith("10.234.0."), ip
    health_port = next(p["containerPort"] for p in container["ports"] if p["name"] == "health")
    with urllib.request.urlopen(f"http://{ip}:{health_port}/healthz", timeout=10) as response:
        assert response.status == 200
    unhealthy = [
        e for e in real_cluster.api.get(namespaced(release.namespace, "events"))["items"]
        if e["involvedObject"].get("name") == name and e["reason"] in ("Unhealthy", "BackOff", "Failed")
    ]  # fmt: skip
    assert unhealthy == [], unhealthy
    # And the operator saw them: kopf's health endpoint logs each request, the kubelet's user agent among them.
    log = real_cluster.kubectl("logs", "-n", release.namespace, name, "-c", "operator").stdout
    assert '"GET /healthz HTTP/1.1\\" 200' in log and "kube-probe/1.36" in log, log[-2000:]


def test_pod_security_restricted_is_enforced_by_admission_and_by_the_runtime(
    real_cluster: RealNodeCluster, release: Release
) -> None:
    ns = release.namespace
    labels = real_cluster.api.get(f"/api/v1/namespaces/{ns}")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    # Admission: a pod that asks for root and privilege is refused by the apiserver's PodSecurity plugin.
    root_pod = {
        "metadata": {"name": "root"},
        "spec": {"containers": [{"name": "c", "image": chart_image(), "securityContext": {"privileged": True}}]},
    }
    with pytest.raises(ApiError) as refused:
        real_cluster.api.create(namespaced(ns, "pods"), root_pod)
    assert refused.value.status == 403 and 'violates PodSecurity "restricted:latest"' in refused.value.message

    # Runtime: what runc applied to the operator's process, seen from inside (kubectl exec through the kubelet).
    pod = release.operator_pod()["metadata"]["name"]

    def inside(*argv: str, check: bool = True) -> str:
        return real_cluster.kubectl("exec", "-n", ns, pod, "-c", "operator", "--", *argv, check=check).stdout

    status = dict(
        line.split(":", 1) for line in inside("cat", "/proc/1/status").splitlines() if ":" in line
    )  # PID 1 of the container is the operator
    assert status["Uid"].split()[:2] == ["65532", "65532"], status["Uid"]
    assert status["Gid"].split()[:2] == ["65532", "65532"], status["Gid"]
    assert status["CapEff"].strip() == "0000000000000000"
    assert status["CapBnd"].strip() == "0000000000000000"
    assert status["NoNewPrivs"].strip() == "1"
    assert status["Seccomp"].strip() == "2"  # a filter: RuntimeDefault
    denied = real_cluster.kubectl("exec", "-n", ns, pod, "--", "touch", "/opt/written", check=False)
    assert denied.returncode != 0 and "Read-only file system" in denied.stderr, denied
    assert inside("sh", "-c", "echo ok > /tmp/written && cat /tmp/written").strip() == "ok"  # the emptyDir


def test_prometheus_scrapes_the_metrics_service_through_the_cluster_network(
    real_cluster: RealNodeCluster, release: Release, tmp_path: Path
) -> None:
    ns = release.namespace
    service = real_cluster.api.get(namespaced(ns, "services", f"{release.name}-metrics"))
    cluster_ip, port = service["spec"]["clusterIP"], service["spec"]["ports"][0]["port"]
    pod_ip = release.operator_pod()["status"]["podIP"]
    assert cluster_ip.startswith("10.0.0.") and cluster_ip != pod_ip
    # kube-proxy programmed the Service: a DNAT from the virtual IP to the pod's address.
    comment = f"{ns}/{release.name}-metrics:metrics"
    rules = eventually(real_cluster, "kube-proxy's rules for the metrics Service",
                       lambda: next((r for r in [nat_rules()] if comment in r), None), 60)  # fmt: skip
    assert f"--to-destination {pod_ip}:8080" in rules

    work = tmp_path / "prometheus"
    work.mkdir()
    config = {
        "global": {"scrape_interval": "2s", "scrape_timeout": "2s"},
        "scrape_configs": [
            {"job_name": "dreamkeeper", "static_configs": [{"targets": [f"{cluster_ip}:{port}"]}]},
        ],
    }
    (work / "prometheus.yml").write_text(yaml.safe_dump(config))
    listen = f"127.0.0.1:{free_port()}"
    argv = [str(binary("prometheus")), f"--config.file={work / 'prometheus.yml'}",
            f"--storage.tsdb.path={work / 'data'}", f"--web.listen-address={listen}", "--log.level=warn"]  # fmt: skip
    proc = ManagedProcess("prometheus", argv, work / "prometheus.log", die_with_parent=True)
    try:
        url = f"http://{listen}/api/v1/query?query="

        def scraped() -> list[dict[str, object]] | None:
            body = cs.http_json(url + "dreamkeeper_operator_info")
            return body["data"]["result"] or None

        series = eventually(real_cluster, "Prometheus scraped the Service", scraped, 120)
        assert {s["metric"]["instance"] for s in series} == {f"{cluster_ip}:{port}"}  # type: ignore[index]
        up = cs.http_json(url + 'up{job="dreamkeeper"}')["data"]["result"]
        assert [float(s["value"][1]) for s in up] == [1.0], up
        time.sleep(4)  # two more scrapes: the target stays healthy
        targets = cs.http_json(f"http://{listen}/api/v1/targets")["data"]["activeTargets"]
        assert [(t["scrapeUrl"], t["health"]) for t in targets] == [(f"http://{cluster_ip}:{port}/metrics", "up")]
    finally:
        proc.stop(grace=10)
