"""Shared steps of the packaging tests against the real control plane (tests/cluster): CRDs applied from the
chart, minimal monitoring CRDs, an agent on a hostPath PersistentVolume, schedules and their status."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable
from typing import Any

from codegen.crds import all_crds
from prometheus_client.parser import text_string_to_metric_families

from dreamkeeper.kube import GROUP, SCHEDULE_PLURAL, VERSION, VOCABULARY_PLURAL
from tests.cluster.fixtures import KubeCluster
from tests.cluster.kubeapi import ApiError, Obj
from tests.kube import cluster_support as kube_support
from tests.packaging.helm import CHART

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def established(cluster: KubeCluster, name: str, timeout: float = 60) -> None:
    def check() -> bool:
        got = cluster.api.get(f"{CRD_PATH}/{name}")
        return any(
            c["type"] == "Established" and c["status"] == "True" for c in got.get("status", {}).get("conditions", [])
        )

    cluster.wait_for(f"CRD {name} established", check, timeout=timeout)


def apply_chart_crds(cluster: KubeCluster) -> None:
    """`kubectl apply --server-side -f charts/dreamkeeper/crds/`: the documented install/upgrade path."""
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CHART / "crds"))
    for crd in all_crds():
        established(cluster, crd["metadata"]["name"])


def monitoring_crd(kind: str, plural: str) -> Obj:
    """A minimal stand-in for the Prometheus operator's CRD: the API (monitoring.coreos.com/v1) is served, the
    body is not validated (the real CRDs are not installable from a package registry here)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.monitoring.coreos.com"},
        "spec": {
            "group": "monitoring.coreos.com",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }
            ],
        },
    }


def install_monitoring_crds(cluster: KubeCluster) -> None:
    for kind, plural in (("ServiceMonitor", "servicemonitors"), ("PrometheusRule", "prometheusrules")):
        crd = monitoring_crd(kind, plural)
        if cluster.api.get_or_none(f"{CRD_PATH}/{crd['metadata']['name']}") is None:
            cluster.api.create(CRD_PATH, crd)
        established(cluster, crd["metadata"]["name"])


# One agent fixture for every cluster test: the operator's tests own it.
make_agent = kube_support.make_agent
cr_path = kube_support.cr_path
pv_name_of = kube_support.pv_name_of
remove_volume = kube_support.remove_volume


def create_vocabulary_and_schedule(cluster: KubeCluster, namespace: str, name: str, token: str) -> None:
    cluster.api.create(
        cr_path(namespace, VOCABULARY_PLURAL),
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "MemoryVocabulary",
            "metadata": {"name": "words"},
            "spec": {"extraCommonWords": ["briefing"], "alwaysSpecificWords": ["May", "Will", "Rose"]},
        },
    )
    cluster.api.create(
        cr_path(namespace, SCHEDULE_PLURAL),
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "DreamSchedule",
            "metadata": {"name": name},
            "spec": {
                "schedule": "0 3 1 1 *",  # once a year: only the run-now token starts a cycle in the test
                "claimName": "agent-data",
                "vocabularyRef": {"name": "words"},
                "runNowToken": token,
                "safeguards": {"minIntervalHours": 0},
                "activeDeadlineSeconds": 600,
            },
        },
    )


def schedule_status(cluster: KubeCluster, namespace: str, name: str) -> Obj:
    return dict(cluster.api.get(cr_path(namespace, SCHEDULE_PLURAL, name)).get("status") or {})


def wait_run(cluster: KubeCluster, namespace: str, name: str, timeout: float = 300) -> Obj:
    box: list[Obj] = []

    def done() -> bool:
        run = schedule_status(cluster, namespace, name).get("lastRun")
        if run:
            box.append(run)
        return bool(run)

    cluster.wait_for(f"{namespace}/{name}: a cycle counted", done, timeout=timeout, interval=1.0)
    return box[-1]


def delete_schedules(cluster: KubeCluster, namespace: str, timeout: float = 60) -> None:
    """Delete the CRs (nothing holds them: the operator puts no finalizer on them) and wait until they are gone."""
    for plural in (SCHEDULE_PLURAL, VOCABULARY_PLURAL):
        for item in cluster.api.get(cr_path(namespace, plural))["items"]:
            try:
                cluster.api.delete(cr_path(namespace, plural, item["metadata"]["name"]))
            except ApiError as exc:
                if exc.status != 404:
                    raise
    cluster.wait_for(
        "schedules gone", lambda: not cluster.api.get(cr_path(namespace, SCHEDULE_PLURAL))["items"], timeout
    )


def http_get(url: str, timeout: float = 5) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return str(response.read().decode())


def http_json(url: str, timeout: float = 10) -> Any:
    return json.loads(http_get(url, timeout))


def metric(text: str, name: str, **labels: str) -> float | None:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return None


def poll(cluster: KubeCluster, what: str, probe: Callable[[], bool], timeout: float = 90) -> None:
    cluster.wait_for(what, probe, timeout=timeout, interval=0.5)
