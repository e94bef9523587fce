"""Generated files are in sync with their sources, and the CRDs are structural."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from codegen.crds import dream_schedule_crd, memory_vocabulary_crd
from codegen.generate import main, outputs, repo_root
from codegen.rbac import operator_rules

from dreamkeeper.kube import GROUP
from dreamkeeper.kube.metrics import METRIC_DOCS, OperatorMetrics

ROOT = repo_root()


def test_committed_generated_files_match_the_generator() -> None:
    stale = [str(p.relative_to(ROOT)) for p, text in outputs(ROOT).items() if not p.is_file() or p.read_text() != text]
    assert stale == [], f"run `make generate`: {stale}"
    assert main(["--check"]) == 0


def test_check_mode_reports_a_stale_file(tmp_path: Path) -> None:
    assert main(["--root", str(tmp_path)]) == 0  # writes a fresh tree
    victim = tmp_path / "crds" / f"{GROUP}_dreamschedules.yaml"
    victim.write_text(victim.read_text() + "# hand edit\n")
    assert main(["--check", "--root", str(tmp_path)]) == 1


# The fields of Kubernetes' JSONSchemaProps (apiextensions.k8s.io/v1): anything else in a CRD's schema makes
# server-side apply refuse the CRD ("field not declared in schema"), as propertyNames did after the formatProfile
# caps map was added.
JSON_SCHEMA_PROPS = {
    "$schema", "$ref", "id", "description", "type", "format", "title", "default", "maximum", "exclusiveMaximum",
    "minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems",
    "multipleOf", "enum", "maxProperties", "minProperties", "required", "items", "allOf", "oneOf", "anyOf", "not",
    "properties", "additionalProperties", "patternProperties", "dependencies", "additionalItems", "definitions",
    "externalDocs", "example", "nullable", "x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string", "x-kubernetes-list-map-keys", "x-kubernetes-list-type", "x-kubernetes-map-type",
    "x-kubernetes-validations",
}  # fmt: skip


def _walk(node: dict[str, Any], path: str = "") -> list[str]:
    """Every violation of the structural-schema rules the API server enforces."""
    problems: list[str] = [f"{path}: {key} is not a JSONSchemaProps field" for key in set(node) - JSON_SCHEMA_PROPS]
    if "$ref" in node or "allOf" in node or "oneOf" in node:
        problems.append(f"{path}: $ref/allOf/oneOf")
    if "anyOf" in node and not node.get("x-kubernetes-int-or-string"):
        problems.append(f"{path}: anyOf")
    if "type" not in node and not node.get("x-kubernetes-int-or-string"):
        problems.append(f"{path}: untyped")
    if "properties" in node and "additionalProperties" in node:
        problems.append(f"{path}: properties with additionalProperties")
    if node.get("type") == "string" and "maxLength" not in node and "enum" not in node and "format" not in node:
        problems.append(f"{path}: unbounded string")
    if node.get("type") == "array" and "maxItems" not in node:
        problems.append(f"{path}: unbounded list")
    for name, child in (node.get("properties") or {}).items():
        problems += _walk(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        problems += _walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        problems += _walk(node["additionalProperties"], f"{path}{{}}")
    return problems


def test_crds_are_structural_and_bounded_for_cel() -> None:
    for crd in (dream_schedule_crd(), memory_vocabulary_crd()):
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        for part in ("spec", "status"):
            problems = _walk(schema["properties"][part], part)
            # kind/apiVersion strings and free-form metadata at the root are the API server's own.
            assert problems == [], problems


def test_dream_schedule_crd_shape() -> None:
    crd = dream_schedule_crd()
    version = crd["spec"]["versions"][0]
    assert crd["metadata"]["name"] == "dreamschedules.dreamkeeper.io"
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}
    names = crd["spec"]["names"]
    # `ds` is daemonsets to kubectl: a short name that loses to a built-in is a trap, not a shortcut.
    assert names["shortNames"] == ["dsched"] and names["categories"] == ["dreamkeeper"]
    columns = {c["name"]: c for c in version["additionalPrinterColumns"] if not c.get("priority")}
    assert list(columns) == [
        "Schedule", "Timezone", "Suspended", "Active", "Last Run", "Result", "Archived", "Rejected", "Protected", "Age",
    ]  # fmt: skip
    wide = {c["name"]: c for c in version["additionalPrinterColumns"] if c.get("priority")}
    # A future time in a `date` column prints as <invalid>: the next slot is a string column.
    assert wide["Next Run"]["type"] == "string" and set(wide) == {"Ready", "Reason", "Next Run", "Claim"}
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["required"] == ["claimName", "schedule"]
    assert {"rule": "self == oldSelf", "message": "claimName is immutable"} in spec["properties"]["claimName"][
        "x-kubernetes-validations"
    ]
    for field in (
        "proposer", "safeguards", "securityContext", "runNowToken", "vocabularyRef", "agentSelector", "agent",
    ):  # fmt: skip
        assert field in spec["properties"], field
    agent = spec["properties"]["agent"]
    assert agent["properties"]["coordination"]["enum"] == ["Stop", "RestartAfter", "None"]
    assert agent["properties"]["coordination"]["default"] == "Stop"
    assert agent["properties"]["workloadRef"]["properties"]["kind"]["enum"] == ["Deployment", "StatefulSet"]
    assert agent["required"] == ["workloadRef"]
    conditions = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["conditions"]
    assert conditions["x-kubernetes-list-type"] == "map" and conditions["x-kubernetes-list-map-keys"] == ["type"]
    condition = conditions["items"]
    assert condition["required"] == ["lastTransitionTime", "message", "reason", "status", "type"]
    assert "observedGeneration" in condition["properties"]


def _undescribed(node: dict[str, Any], path: str = "") -> list[str]:
    missing = []
    for name, child in (node.get("properties") or {}).items():
        if path == "" and name == "metadata":
            continue  # ObjectMeta: the API server describes it and refuses anything but its type here
        if not child.get("description"):
            missing.append(f"{path}.{name}")
        missing += _undescribed(child, f"{path}.{name}")
    for key, suffix in (("items", "[]"), ("additionalProperties", "{}")):
        if isinstance(node.get(key), dict):
            missing += _undescribed(node[key], path + suffix)
    return missing


def test_every_crd_field_has_a_description_for_kubectl_explain() -> None:
    for crd in (dream_schedule_crd(), memory_vocabulary_crd()):
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        assert _undescribed(schema) == [], crd["metadata"]["name"]


def test_memory_vocabulary_crd_shape() -> None:
    crd = memory_vocabulary_crd()
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert set(spec) == {"extraCommonWords", "alwaysSpecificWords", "numericExemptCategories"}
    assert crd["spec"]["names"]["shortNames"] == ["memvocab"]


def test_generated_yaml_parses_back_to_the_crds() -> None:
    text = (ROOT / "crds" / f"{GROUP}_dreamschedules.yaml").read_text()
    assert yaml.safe_load(text) == dream_schedule_crd()
    chart = (ROOT / "charts" / "dreamkeeper" / "crds" / f"{GROUP}_dreamschedules.yaml").read_text()
    assert chart == text
    rules = yaml.safe_load((ROOT / "charts" / "dreamkeeper" / "files" / "rbac-rules.yaml").read_text())
    assert rules == operator_rules()


def test_rbac_is_least_privilege() -> None:
    verbs = {
        (g, r): set(rule["verbs"]) for rule in operator_rules() for g in rule["apiGroups"] for r in rule["resources"]
    }
    assert verbs[("", "pods")] == {"get", "list"}
    assert verbs[("", "events")] == {"create", "list"}  # list: a refused pod's FailedCreate (kube/refusals.py)
    # watch: the cache a pass reads its claim's Jobs from (kube/informer.py)
    assert verbs[("batch", "jobs")] == {"create", "get", "list", "watch", "patch", "delete"}
    assert verbs[("", "persistentvolumeclaims")] == {"get", "list", "watch"}  # watched: ClaimNotFound clears at once
    # spec.agent: read and annotate the workload, replicas only through the scale subresource; nothing else.
    assert verbs[("apps", "deployments")] == verbs[("apps", "statefulsets")] == {"get", "patch"}
    assert verbs[("apps", "deployments/scale")] == verbs[("apps", "statefulsets/scale")] == {"patch"}
    assert not {r for g, r in verbs if g == "apps"} - {"deployments", "statefulsets", "deployments/scale",
                                                       "statefulsets/scale"}  # fmt: skip
    assert ("", "secrets") not in verbs  # the API key is mounted into the pod by the kubelet, never read by us
    assert ("", "namespaces") not in verbs and ("apiextensions.k8s.io", "customresourcedefinitions") not in verbs
    assert all("*" not in rule["verbs"] and "*" not in rule["resources"] for rule in operator_rules())


def test_every_registered_metric_is_documented_and_none_uses_a_namespace_label() -> None:
    metrics = OperatorMetrics()
    registered = set()
    for family in metrics.registry.collect():
        name = family.name + ("_total" if family.type == "counter" else "")
        registered.add(name)
        for s in family.samples:
            assert "namespace" not in s.labels, s
    documented = {d.name for d in METRIC_DOCS}
    assert registered == documented
    assert all(name.startswith("dreamkeeper_") for name in documented)


def test_every_field_of_the_agent_coordination_is_described() -> None:
    schema = dream_schedule_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    missing = _undescribed(schema["spec"]["properties"]["agent"], "spec.agent")
    missing += _undescribed(schema["status"]["properties"]["agent"], "status.agent")
    assert missing == []
