"""The Helm chart rendered and linted by the real helm binary, over a matrix of values files.

Cluster-free: tests/packaging/test_chart_cluster.py applies the same renders to the real control plane.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from codegen.admission import policy_spec
from codegen.crds import all_crds
from codegen.observability import alerts, dashboard
from codegen.rbac import aggregate_rules, operator_rules

from dreamkeeper.kube.models import DreamScheduleSpec, MemoryVocabularySpec
from tests.packaging.helm import CHART, MONITORING_API, REPO, VALUES_DIR, Doc, by_kind, helm, one, template

VALUES_FILES = sorted(p.name for p in VALUES_DIR.glob("*.yaml"))


def _chart_version() -> str:
    return str(yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"])


@pytest.mark.parametrize("values", [None, *VALUES_FILES])
def test_helm_lint_strict(values: str | None) -> None:
    args = ["lint", str(CHART), "--strict"]
    if values:
        args += ["-f", str(VALUES_DIR / values)]
    out = helm(*args)
    assert "0 chart(s) failed" in out


def test_chart_crds_are_byte_identical_to_the_top_level_crds() -> None:
    top = sorted(p.name for p in (REPO / "crds").glob("*.yaml"))
    chart = sorted(p.name for p in (CHART / "crds").glob("*.yaml"))
    assert top == chart and len(top) == len(all_crds())
    for name in top:
        assert (CHART / "crds" / name).read_bytes() == (REPO / "crds" / name).read_bytes(), name


def test_default_render_deployment_is_one_recreate_replica_restricted_with_liveness() -> None:
    docs = template()
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == sorted(
        ["ServiceAccount", "ConfigMap", "ClusterRole", "ClusterRole", "ClusterRole", "ClusterRoleBinding", "Service",
         "Deployment", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    )  # fmt: skip
    deployment = one(docs, "Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] == 1 and spec["strategy"] == {"type": "Recreate"}
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == f"localhost/dreamkeeper:{_chart_version()}"
    assert container["args"][:2] == ["operator", "--all-namespaces"]
    assert "--metrics-port=8080" in container["args"] and "--health-port=8081" in container["args"]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
    assert env["DREAMKEEPER_JOB_IMAGE"] == container["image"]
    # Metrics and liveness on the pod IP (downward API), never 0.0.0.0; the system namespaces are not served.
    assert env["DREAMKEEPER_BIND"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert not any(a.startswith("--bind") for a in container["args"])
    excluded = [a.split("=", 1)[1] for a in container["args"] if a.startswith("--exclude-namespace")]
    assert excluded == ["kube-system", "kube-public", "kube-node-lease"]
    assert "--redact-logs" not in container["args"]
    probe = container["livenessProbe"]
    assert probe["httpGet"] == {"path": "/healthz", "port": "health"}
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"metrics": 8080, "health": 8081}
    assert "readinessProbe" not in container
    # Pod Security "restricted", field by field.
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = container["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    assert pod["serviceAccountName"] == one(docs, "ServiceAccount")["metadata"]["name"]
    # Every namespaced object names its namespace (so the render works with kubectl apply).
    cluster_scoped = (
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    )
    for doc in docs:
        if doc["kind"] not in cluster_scoped:
            assert doc["metadata"]["namespace"] == "dreamkeeper-system", doc["kind"]


def _parameters(policy: dict[str, Any]) -> dict[str, list[str]]:
    """The policy's parameter variables, read back as the API server's CEL reads their list literals."""
    variables = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}
    return {name: json.loads(variables[name]) for name in ("allowedImages", "excludedNamespaces")}


def test_admission_policy_is_the_generated_spec_with_its_parameters_written_in() -> None:
    docs = template()
    policy = one(docs, "ValidatingAdmissionPolicy")
    # Exactly the Jobs' default image (issue 21: `localhost/dreamkeeper:` admitted any tag anybody pushed).
    images, excluded = [f"localhost/dreamkeeper:{_chart_version()}"], ["kube-system", "kube-public", "kube-node-lease"]
    assert _parameters(policy) == {"allowedImages": images, "excludedNamespaces": excluded}
    assert policy["spec"] == policy_spec(images, excluded)
    # No parameter resource: Kubernetes loses its ConfigMap param informer once no binding names one
    # (kubernetes/kubernetes#130887), and a binding with parameters then denies every schedule.
    assert "paramKind" not in policy["spec"]
    binding = one(docs, "ValidatingAdmissionPolicyBinding")
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}
    assert not [d for d in by_kind(docs, "ConfigMap") if d["metadata"]["name"].endswith("-admission")]


def test_admission_in_namespace_scope_binds_only_the_served_namespaces_and_takes_extra_images() -> None:
    docs = template(
        "namespaced.yaml",
        namespace="ops",
        sets=["admission.allowedImages={registry.example/dk:}", "operator.jobImage=registry.example/dk:1"],
    )
    binding = one(docs, "ValidatingAdmissionPolicyBinding")
    (expression,) = binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
    assert expression == {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["agents-a", "agents-b"]}
    params = _parameters(one(docs, "ValidatingAdmissionPolicy"))
    assert params["allowedImages"] == ["registry.example/dk:1", "registry.example/dk:"]
    legacy_docs = template(sets=["admission.allowedImagePrefixes={registry.example/old/}"])
    legacy = _parameters(one(legacy_docs, "ValidatingAdmissionPolicy"))
    assert legacy["allowedImages"][-1] == "registry.example/old/"  # the deprecated name
    assert params["excludedNamespaces"] == []  # namespaces named explicitly are asked for
    assert not by_kind(template(sets=["admission.enabled=false"]), "ValidatingAdmissionPolicy")


def test_admission_parameters_are_cel_literals_whatever_the_values_hold(tmp_path: Path) -> None:
    """Values with characters CEL would read differently unescaped (a quote, a backslash, non-ASCII) come out as
    the same strings (toJson's escapes are CEL's); repeats are dropped; no excluded namespaces is an empty list."""
    odd = 'registry.example/a"b\\c:\u00e9'
    values = tmp_path / "odd.yaml"
    values.write_text(yaml.safe_dump({"admission": {"allowedImages": [odd, "registry.example/dk:", odd]}}))
    docs = template(str(values), sets=["operator.excludeNamespaces=null"])
    params = _parameters(one(docs, "ValidatingAdmissionPolicy"))
    assert params["allowedImages"][1:] == [odd, "registry.example/dk:"]
    assert params["excludedNamespaces"] == []


def test_redacted_logs_and_served_system_namespaces_are_chart_values() -> None:
    docs = template(sets=["operator.redactLogs=true", "operator.excludeNamespaces=null"])
    args = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--redact-logs" in args
    assert [a for a in args if a.startswith("--exclude-namespace")] == ["--exclude-namespace="]


def test_the_edit_role_says_what_it_does_not_grant() -> None:
    """Issue 21: a runNowToken on a schedule with spec.agent needs the right to scale the workload; the role says so."""
    edit = next(d for d in by_kind(template(), "ClusterRole") if d["metadata"]["name"].endswith("-edit"))
    note = edit["metadata"]["annotations"]["dreamkeeper.io/note"]
    assert "runNowToken" in note and "scale subresource" in note


def test_cluster_scope_rbac_is_exactly_the_generated_rules() -> None:
    docs = template()
    roles = {d["metadata"]["name"]: d for d in by_kind(docs, "ClusterRole")}
    assert roles["dreamkeeper"]["rules"] == operator_rules()
    assert roles["dreamkeeper-edit"]["rules"] == aggregate_rules(edit=True)
    assert roles["dreamkeeper-view"]["rules"] == aggregate_rules(edit=False)
    assert roles["dreamkeeper-edit"]["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
    assert roles["dreamkeeper-view"]["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    binding = one(docs, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == "dreamkeeper"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "dreamkeeper", "namespace": "dreamkeeper-system"}]
    assert by_kind(docs, "Role") == [] and by_kind(docs, "RoleBinding") == []
    # Least privilege: no wildcard, no secrets, no cluster-wide discovery.
    for rule in operator_rules():
        assert "*" not in rule["verbs"] and "*" not in rule["resources"]
        assert not {"secrets", "namespaces", "customresourcedefinitions"} & set(rule["resources"])


def test_namespace_scope_gets_a_role_and_binding_per_served_namespace() -> None:
    docs = template("namespaced.yaml", namespace="ops")
    roles = by_kind(docs, "Role")
    bindings = by_kind(docs, "RoleBinding")
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["agents-a", "agents-b"]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["agents-a", "agents-b"]
    assert all(r["rules"] == operator_rules() for r in roles)
    assert all(b["subjects"][0]["namespace"] == "ops" and b["roleRef"]["kind"] == "Role" for b in bindings)
    assert by_kind(docs, "ClusterRole") == [] and by_kind(docs, "ClusterRoleBinding") == []
    args = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--all-namespaces" not in args
    assert [a for a in args if a.startswith("--namespace")] == ["--namespace=agents-a", "--namespace=agents-b"]


def test_namespace_scope_without_namespaces_serves_the_release_namespace() -> None:
    docs = template(sets=["operator.scope=namespaces"], namespace="ops")
    (role,) = by_kind(docs, "Role")
    assert role["metadata"]["namespace"] == "ops"
    args = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--namespace=ops" in args


def test_monitoring_objects_need_both_the_flag_and_the_api() -> None:
    flag_only = template("monitoring.yaml")
    assert not by_kind(flag_only, "ServiceMonitor") and not by_kind(flag_only, "PrometheusRule")
    api_only = template(api_versions=[MONITORING_API])
    assert not by_kind(api_only, "ServiceMonitor") and not by_kind(api_only, "PrometheusRule")
    both = template("monitoring.yaml", api_versions=[MONITORING_API])
    monitor = one(both, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["spec"]["endpoints"] == [
        {"port": "metrics", "path": "/metrics", "interval": "15s", "scrapeTimeout": "10s"}
    ]
    service = one(both, "Service")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"


def test_prometheus_rule_is_the_generated_rules_file_with_overrides() -> None:
    rule = one(template("monitoring.yaml", api_versions=[MONITORING_API]), "PrometheusRule")
    (group,) = rule["spec"]["groups"]
    rendered = {r["alert"]: r for r in group["rules"]}
    generated = {r["alert"]: r for r in alerts.rule_groups()["groups"][0]["rules"]}
    assert set(rendered) == (set(generated) - {"DreamkeeperOperatorErrors"}) | {"DreamkeeperCycleFailed"}
    for name, source in generated.items():
        if name == "DreamkeeperOperatorErrors":
            continue
        got = rendered[name]
        assert got["expr"] == source["expr"] and got["for"] == source["for"] and got["labels"] == source["labels"]
        anchor = source["annotations"]["runbook_url"].split("#")[1]
        assert got["annotations"]["runbook_url"] == f"https://runbooks.example.com/dreamkeeper.md#{anchor}"
        assert got["annotations"]["description"] == source["annotations"]["description"]
    # Default values: the committed rules file verbatim.
    default = one(
        template(sets=["metrics.prometheusRule.enabled=true"], api_versions=[MONITORING_API]), "PrometheusRule"
    )
    assert default["spec"] == alerts.rule_groups()


def _is_dashboard(doc: Doc) -> bool:
    return doc["metadata"]["name"].endswith("-dashboard")


def dashboard_map(docs: list[Doc]) -> Doc:
    (found,) = [d for d in by_kind(docs, "ConfigMap") if _is_dashboard(d)]
    return found


def test_dashboard_configmap_label_namespace_and_content() -> None:
    default = dashboard_map(template())
    assert default["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert default["metadata"]["namespace"] == "dreamkeeper-system"
    assert json.loads(default["data"]["dreamkeeper.json"]) == dashboard.build()
    custom = dashboard_map(template("monitoring.yaml"))
    assert custom["metadata"]["namespace"] == "monitoring"
    assert custom["metadata"]["labels"]["grafana_dashboard"] == ""
    assert custom["metadata"]["annotations"] == {"grafana_folder": "dreamkeeper"}
    relabelled = dashboard_map(template(sets=["dashboard.label.key=dashboards", "dashboard.label.value=dk"]))
    assert (
        relabelled["metadata"]["labels"]["dashboards"] == "dk"
        and "grafana_dashboard" not in relabelled["metadata"]["labels"]
    )
    assert not [d for d in by_kind(template(sets=["dashboard.enabled=false"]), "ConfigMap") if _is_dashboard(d)]


def test_examples_are_valid_custom_resources() -> None:
    docs = template("examples.yaml", namespace="agents")
    vocabulary = one(docs, "MemoryVocabulary")
    schedule = one(docs, "DreamSchedule")
    MemoryVocabularySpec.model_validate(vocabulary["spec"])
    spec = DreamScheduleSpec.model_validate(schedule["spec"])
    assert spec.vocabulary_ref is not None and spec.vocabulary_ref.name == vocabulary["metadata"]["name"]
    assert spec.agent is not None and spec.agent.coordination == "Stop"
    assert schedule["metadata"]["namespace"] == vocabulary["metadata"]["namespace"] == "agents"
    assert not by_kind(template(), "DreamSchedule")


@pytest.mark.parametrize(
    ("setting", "needle"),
    [
        ("operator.scope=everywhere", "/operator/scope"),
        ("operator.runAsUser=0", "/operator/runAsUser"),
        ("image.pullPolicy=Sometimes", "/image/pullPolicy"),
        ("metrics.prometheusRule.disabledAlerts={NotAnAlert}", "/metrics/prometheusRule/disabledAlerts"),
        ("unknownKey=1", "unknownKey"),
    ],
)
def test_values_schema_rejects_bad_values(setting: str, needle: str) -> None:
    out = helm("template", "x", str(CHART), "--set", setting, check=False)
    assert "values don't meet the specifications of the schema" in out or "schema" in out, out
    assert needle in out, out


def test_notes_mention_the_crd_upgrade() -> None:
    out = helm("install", "dreamkeeper", str(CHART), "--dry-run=client", "--namespace", "dreamkeeper-system")
    assert "kubectl apply --server-side -f crds/" in out


def test_manifests_install_yaml_is_a_fresh_render(tmp_path: Path) -> None:
    fresh = tmp_path / "install.yaml"
    subprocess.run(
        ["bash", str(REPO / "scripts" / "render-manifests.sh"), str(fresh)],
        check=True,
        capture_output=True,
        env={**os.environ, "HELM": str(helm_path())},
    )
    committed = REPO / "manifests" / "install.yaml"
    assert committed.read_text() == fresh.read_text(), "run `make manifests`"
    docs = [d for d in yaml.safe_load_all(fresh.read_text()) if d]
    assert docs[0] == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "dreamkeeper-system", "labels": {"app.kubernetes.io/part-of": "dreamkeeper"}},
    }
    assert [d["metadata"]["name"] for d in by_kind(docs, "CustomResourceDefinition")] == [
        c["metadata"]["name"] for c in all_crds()
    ]
    assert by_kind(docs, "CustomResourceDefinition") == all_crds()


def test_manifest_examples_are_valid() -> None:
    examples = REPO / "manifests" / "examples"
    docs: list[Doc] = []
    for path in sorted(examples.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert sorted(d["kind"] for d in docs) == ["DreamSchedule", "MemoryVocabulary", "PersistentVolumeClaim"]
    schedule = DreamScheduleSpec.model_validate(one(docs, "DreamSchedule")["spec"])
    assert schedule.claim_name == one(docs, "PersistentVolumeClaim")["metadata"]["name"]
    assert schedule.vocabulary_ref is not None
    assert schedule.vocabulary_ref.name == one(docs, "MemoryVocabulary")["metadata"]["name"]
    assert schedule.agent is not None and (schedule.agent.workload_ref.kind, schedule.agent.coordination) == (
        "Deployment",
        "Stop",
    )
    MemoryVocabularySpec.model_validate(one(docs, "MemoryVocabulary")["spec"])


def helm_path() -> Path:
    from tests.cluster import tools

    return tools.helm_binary()


def test_chart_version_and_app_version_follow_the_package() -> None:
    from dreamkeeper import __version__

    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == chart["version"] == __version__
