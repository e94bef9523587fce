"""The chart against the real control plane (tests/cluster): every render applied server-side, and the operator
installed *from the chart* (helm install; the test node agent runs the Deployment's pod as a local process)
reconciling a DreamSchedule end to end."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from dreamkeeper.kube import GROUP, SCHEDULE_PLURAL, VERSION
from dreamkeeper.kube.slots import CronSchedule
from tests.cluster.controlplane import free_port
from tests.cluster.fixtures import KubeCluster
from tests.cluster.kubeapi import ApiError, namespaced
from tests.packaging import cluster_support as cs
from tests.packaging.helm import CHART, MONITORING_API, REPO, helm, template_text

pytestmark = pytest.mark.cluster

RESTRICTED_NS = {"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "restricted"}


@pytest.fixture(scope="module")
def crds(kube_cluster: KubeCluster) -> KubeCluster:
    cs.apply_chart_crds(kube_cluster)
    cs.install_monitoring_crds(kube_cluster)
    return kube_cluster


@pytest.fixture
def restricted_namespace(crds: KubeCluster, kube_namespace: str) -> str:
    crds.api.patch(f"/api/v1/namespaces/{kube_namespace}", {"metadata": {"labels": RESTRICTED_NS}})
    return kube_namespace


VARIANTS = {
    "default": ((), ()),
    "namespaced": (("namespaced.yaml",), ("operator.namespaces={@NS@}",)),
    "monitoring": (("monitoring.yaml",), ("dashboard.namespace=@NS@",)),
    "examples": (("examples.yaml",), ()),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_rendered_chart_applies_server_side(crds: KubeCluster, restricted_namespace: str, variant: str) -> None:
    values, sets = VARIANTS[variant]
    ns = restricted_namespace
    rendered = template_text(
        values,
        sets=[s.replace("@NS@", ns) for s in sets],
        api_versions=[MONITORING_API],
        namespace=ns,
        release=f"dk-{variant}",
    )
    kinds = [d["kind"] for d in yaml.safe_load_all(rendered) if d]
    if variant == "monitoring":
        assert {"ServiceMonitor", "PrometheusRule"} <= set(kinds)
    if variant == "examples":
        assert {"DreamSchedule", "MemoryVocabulary"} <= set(kinds)
    # dry-run=server: admission, validation and the CRD schemas run; nothing is persisted, so the operator
    # Deployment of these renders never starts (the end-to-end test below installs one for real).
    result = crds.kubectl("apply", "--server-side", "--dry-run=server", "-f", "-", input=rendered, check=False)
    assert result.returncode == 0, result.stderr
    assert "PodSecurity" not in result.stderr, result.stderr  # the pod template passes "restricted"
    for kind in kinds:
        assert f"{kind.lower()}" in result.stdout.lower()


def test_install_yaml_applies_server_side(crds: KubeCluster) -> None:
    """manifests/install.yaml as users run it (dry-run=server for the objects; its namespace for real)."""
    text = (REPO / "manifests" / "install.yaml").read_text()
    namespace = next(d for d in yaml.safe_load_all(text) if d and d["kind"] == "Namespace")
    crds.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump(namespace))
    result = crds.kubectl("apply", "--server-side", "--dry-run=server", "-f", "-", input=text, check=False)
    assert result.returncode == 0, result.stderr
    assert "deployment.apps/dreamkeeper serverside-applied (server dry run)" in result.stdout
    assert "customresourcedefinition.apiextensions.k8s.io/dreamschedules.dreamkeeper.io" in result.stdout


def test_manifest_examples_apply_server_side(crds: KubeCluster, kube_namespace: str) -> None:
    result = crds.kubectl(
        "apply", "--server-side", "--dry-run=server", "-n", kube_namespace, "-f", str(REPO / "manifests" / "examples"),
        check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("serverside-applied (server dry run)") == 3, result.stdout


@pytest.fixture
def release(crds: KubeCluster, restricted_namespace: str, tmp_path: Path) -> Iterator[tuple[str, int, int]]:
    """`helm install` of the chart in namespace scope; yields (namespace, metrics port, health port)."""
    ns = restricted_namespace
    metrics_port, health_port = free_port(), free_port()
    sets = [
        "operator.scope=namespaces",
        f"operator.metricsPort={metrics_port}",
        f"operator.healthPort={health_port}",
        "operator.pollSeconds=1",
        "operator.logFormat=text",
        "rbac.aggregateToDefaultRoles=false",
        "dashboard.enabled=true",
    ]
    args = ["install", "dk", str(CHART), "--namespace", ns]
    for item in sets:
        args += ["--set", item]
    helm(*args, kubeconfig=crds.kubeconfig)
    try:
        yield ns, metrics_port, health_port
    finally:
        try:
            cs.delete_schedules(crds, ns)
        finally:
            helm(
                "uninstall",
                "dk",
                "--namespace",
                ns,
                "--wait",
                "--timeout",
                "2m",
                kubeconfig=crds.kubeconfig,
                check=False,
            )
            cs.remove_volume(crds, ns)


def test_operator_installed_from_the_chart_reconciles_a_schedule_end_to_end(
    crds: KubeCluster, release: tuple[str, int, int], tmp_path: Path
) -> None:
    ns, metrics_port, health_port = release
    api = crds.api
    # The Deployment's pod was created by the ReplicaSet controller under Pod Security "restricted", scheduled,
    # and is run by the node agent as `dreamkeeper operator ...` with the chart's args and ServiceAccount.
    cs.poll(crds, "operator liveness (/healthz)", lambda: bool(cs.http_get(f"http://127.0.0.1:{health_port}/healthz")))
    (pod,) = api.get(namespaced(ns, "pods"), labelSelector="app.kubernetes.io/instance=dk")["items"]
    container = pod["spec"]["containers"][0]
    assert container["args"][:2] == ["operator", f"--namespace={ns}"]
    assert pod["spec"]["serviceAccountName"] == "dk-dreamkeeper"
    assert api.get(namespaced(ns, "roles", "dk-dreamkeeper", group="rbac.authorization.k8s.io"))["rules"]

    agent_dir = cs.make_agent(crds, ns, tmp_path / "volumes")
    cs.create_vocabulary_and_schedule(crds, ns, "nightly", token="from-the-chart")
    run = cs.wait_run(crds, ns, "nightly")
    assert run["result"] == "completed", run
    assert run["hardDeletes"] == 0
    report = json.loads((agent_dir / ".dreamkeeper" / "cycles" / f"{run['cycleId']}.json").read_text())
    assert report["result"] == "completed" and report["archived"] == run["archived"]

    # The cycle Job used the chart's image (DREAMKEEPER_JOB_IMAGE) and the operator's metrics count the run.
    (job,) = api.get(namespaced(ns, "jobs", group="batch"))["items"]
    images = {c["image"] for c in job["spec"]["template"]["spec"]["containers"]}
    assert images == {container["image"]}
    ident = {"dreamschedule": "nightly", "dreamschedule_namespace": ns}
    # The operator sets its metrics just after the status write that wait_run saw: read them once they are set.
    texts: list[str] = []

    def counted() -> bool:
        texts.append(cs.http_get(f"http://127.0.0.1:{metrics_port}/metrics"))
        return cs.metric(texts[-1], "dreamkeeper_schedule_interval_seconds", **ident) is not None and bool(
            cs.metric(texts[-1], "dreamkeeper_cycles_total", result="completed", **ident)
        )

    cs.poll(crds, "the run counted in /metrics", counted, timeout=30)
    text = texts[-1]
    assert cs.metric(text, "dreamkeeper_cycles_total", result="completed", **ident) == 1
    assert cs.metric(text, "dreamkeeper_hard_deletes_total", **ident) == 0
    status = cs.schedule_status(crds, ns, "nightly")
    next_slot = datetime.fromisoformat(status["nextScheduleTime"].replace("Z", "+00:00"))
    period = (CronSchedule.parse("0 3 1 1 *", None).next_after(next_slot) - next_slot).total_seconds()
    assert cs.metric(text, "dreamkeeper_schedule_interval_seconds", **ident) == period
    assert status["lastRunNowToken"] == "from-the-chart"
    # And the CR is served under the chart's CRD (not a test-installed one).
    crd = api.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{SCHEDULE_PLURAL}.{GROUP}")
    assert crd["spec"]["versions"][0]["name"] == "v1alpha1"


def test_the_charts_admission_keeps_answering_after_its_binding_is_deleted_and_created_again(
    crds: KubeCluster, kube_namespace: str
) -> None:
    """`helm uninstall` of the only release, then an install: on the real API server the release's policy must still
    answer with its own parameters. Kubernetes (up to v1.36.1, kubernetes/kubernetes#130887) stops its ConfigMap
    param informer for good once no binding names a ConfigMap for one policy refresh (1 s); the chart's policy then
    took its parameters from a ConfigMap (`paramRef`, `parameterNotFoundAction: Deny`), and the second install
    refused every DreamSchedule with "no params found for policy binding" until the API server restarted. Here the
    test's own namespace is an excluded one, so the expected refusal can only come from this policy's parameters."""
    ns = kube_namespace
    kinds = {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ConfigMap"}
    rendered = template_text(release="dk-adm", namespace=ns, sets=[f"operator.excludeNamespaces={{kube-system,{ns}}}"])
    docs = [
        d
        for d in yaml.safe_load_all(rendered)
        if d and d["kind"] in kinds and (d["kind"] != "ConfigMap" or d["metadata"]["name"].endswith("-admission"))
    ]  # the admission objects as the chart installs them (the ConfigMap only where a chart still has one)
    policy = next(d["metadata"]["name"] for d in docs if d["kind"] == "ValidatingAdmissionPolicy")
    manifest = yaml.safe_dump_all(docs)
    probe = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "DreamSchedule",
        "metadata": {"name": "admission-probe"},
        "spec": {"schedule": "@daily", "claimName": "none"},
    }
    answers: list[str] = []

    def refused_by_its_parameters() -> bool:
        try:
            crds.api.request("POST", cs.cr_path(ns, SCHEDULE_PLURAL), probe, params={"dryRun": "All"})
        except ApiError as exc:
            answers.append(exc.message)
            return f"'{policy}'" in exc.message and f"namespace {ns} is not served" in exc.message
        answers.append("admitted")
        return False

    for round_ in (1, 2):
        crds.kubectl("apply", "--server-side", "-f", "-", input=manifest)
        try:
            crds.wait_for(f"round {round_}: the policy's own answer", refused_by_its_parameters, timeout=60)
        except Exception as exc:
            raise AssertionError(f"round {round_}: last answers {answers[-3:]}") from exc
        crds.kubectl("delete", "--wait", "-f", "-", input=manifest)
        time.sleep(3)  # longer than the API server's policy refresh: an informer nobody names is stopped by then
