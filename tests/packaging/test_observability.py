"""The dashboard and the alert rules: generated files in sync, metric names real, promtool check and unit tests.

The live check (a real Prometheus scraping the operator, every expression returning series) is in
test_prometheus_live.py.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml
from codegen.observability import alerts, dashboard
from codegen.observability.generate import dashboard_path, main, outputs, repo_root, rules_path

from dreamkeeper.kube.metrics import METRIC_DOCS
from tests.packaging import alert_cases
from tests.packaging.promtool import binary

ROOT = repo_root()
RUNBOOKS = ROOT / "docs" / "runbooks.md"
# Label names a query may use: the schedule labels, each family's extra labels, histogram buckets, scrape labels.
ALLOWED_LABELS = {"dreamschedule", "dreamschedule_namespace", "result", "kind", "direction", "reason", "handler", "le"}
REQUIRED_PANELS = {
    "Cycles by result",
    "Reviewed vs withheld",
    "Archives: with replacement vs ephemeral",
    "Merges rejected / repaired",
    "Entries protected",
    "Hard deletes (must stay 0)",
    "Specifics lost",
    "Live vs archived entries",
    "Cycle duration",
    "LLM tokens",
    "Last success age per schedule",
    "Operator up",
    "Handler errors",
}


def known_series() -> set[str]:
    names: set[str] = set()
    for doc in METRIC_DOCS:
        names.add(doc.name)
        if doc.type == "histogram":
            names |= {f"{doc.name}_bucket", f"{doc.name}_sum", f"{doc.name}_count"}
    return names


def metric_names(expr: str) -> set[str]:
    return set(re.findall(r"\bdreamkeeper_[a-z_]+\b", expr))


def label_names(expr: str) -> set[str]:
    inside = re.findall(r"\{([^}]*)\}", expr)
    names = {m for block in inside for m in re.findall(r"([a-z_]+)\s*(?:=~|!=|!~|=)", block)}
    for block in re.findall(r"\b(?:by|on|without|ignoring)\s*\(([^)]*)\)", expr):
        names |= {n.strip() for n in block.split(",") if n.strip()}
    return names


def dashboard_exprs(board: dict[str, Any]) -> list[tuple[str, str]]:
    return [(p["title"], t["expr"]) for p in board["panels"] for t in p.get("targets", [])]


# ---- generated files -------------------------------------------------------------------------------------------


def test_committed_dashboard_and_rules_match_the_generator() -> None:
    stale = [str(p.relative_to(ROOT)) for p, text in outputs(ROOT).items() if not p.is_file() or p.read_text() != text]
    assert stale == [], f"run `make generate`: {stale}"
    assert main(["--check"]) == 0


def test_check_mode_reports_a_hand_edited_dashboard(tmp_path: Path) -> None:
    assert main(["--root", str(tmp_path)]) == 0
    path = dashboard_path(tmp_path)
    path.write_text(path.read_text().replace('"dreamkeeper"', '"edited"', 1))
    assert main(["--check", "--root", str(tmp_path)]) == 1


# ---- dashboard ---------------------------------------------------------------------------------------------------


def test_dashboard_is_provisioning_safe_with_a_prometheus_datasource_variable() -> None:
    text = dashboard_path(ROOT).read_text()
    board = json.loads(text)
    assert "__inputs" not in board and "${DS_" not in text
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    for panel in board["panels"]:
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            assert target["refId"]
    assert board["uid"] == "dreamkeeper"
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))


def test_dashboard_has_every_required_panel() -> None:
    titles = {p["title"] for p in dashboard.build()["panels"]}
    assert titles >= REQUIRED_PANELS, REQUIRED_PANELS - titles


def test_dashboard_panels_do_not_overlap() -> None:
    cells: set[tuple[int, int]] = set()
    for panel in dashboard.build()["panels"]:
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24
        mine = {(x, y) for x in range(pos["x"], pos["x"] + pos["w"]) for y in range(pos["y"], pos["y"] + pos["h"])}
        assert not cells & mine, panel["title"]
        cells |= mine


def test_dashboard_queries_use_only_real_metrics_and_labels() -> None:
    board = dashboard.build()
    series = known_series()
    exprs = dashboard_exprs(board) + [("variable " + v["name"], v["query"]) for v in board["templating"]["list"][1:]]
    for title, expr in exprs:
        names = metric_names(expr)
        assert names, f"{title}: no dreamkeeper metric in {expr!r}"
        assert names <= series, f"{title}: unknown {names - series}"
        assert label_names(expr) <= ALLOWED_LABELS, f"{title}: {label_names(expr) - ALLOWED_LABELS}"
        assert "namespace=" not in expr.replace("dreamschedule_namespace=", ""), title


# ---- alerts ------------------------------------------------------------------------------------------------------


def _anchors() -> set[str]:
    headings = re.findall(r"^#{1,6} (.+)$", RUNBOOKS.read_text(), flags=re.M)
    return {re.sub(r"[^a-z0-9 -]", "", h.lower()).strip().replace(" ", "-") for h in headings}


def test_every_alert_has_a_runbook_section_and_real_metrics() -> None:
    anchors = _anchors()
    series = known_series()
    rules = yaml.safe_load(rules_path(ROOT).read_text())["groups"][0]["rules"]
    assert [r["alert"] for r in rules] == [a.alert for a in alerts.ALERTS]
    for rule in alerts.ALERTS:
        assert rule.runbook in anchors, f"{rule.alert}: no '## ...' heading for #{rule.runbook} in docs/runbooks.md"
        assert rule.alert.lower() in anchors or rule.runbook in anchors
        assert rule.metrics() <= series, f"{rule.alert}: unknown {rule.metrics() - series}"
        assert label_names(rule.expr) <= ALLOWED_LABELS, rule.alert
        # The probes (checked live for series) name every metric the expression uses.
        probed = set().union(*(metric_names(p) for p in rule.probes))
        assert rule.metrics() <= probed, f"{rule.alert}: probes miss {rule.metrics() - probed}"


def test_the_required_alerts_exist() -> None:
    names = {a.alert for a in alerts.ALERTS}
    assert {
        "DreamkeeperHardDelete",
        "DreamkeeperSpecificsLost",
        "DreamkeeperLiveCorpusDropped",
        "DreamkeeperNoSuccessfulCycle",
        "DreamkeeperEphemeralArchivesSpiking",
        "DreamkeeperVocabularyFallback",
        "DreamkeeperOperatorDown",
    } <= names


def test_promtool_check_rules() -> None:
    result = subprocess.run(
        [str(binary("promtool")), "check", "rules", str(rules_path(ROOT))], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alerts.ALERTS)} rules found" in result.stdout


def test_every_alert_has_a_firing_and_a_quiet_promtool_case() -> None:
    for name, (firing, quiet) in alert_cases.covered().items():
        assert firing >= 1 and quiet >= 1, f"{name}: {firing} firing, {quiet} quiet cases"


def test_committed_promtool_tests_match_the_cases() -> None:
    assert alert_cases.TEST_FILE.read_text() == alert_cases.render_file(), "run `python -m tests.packaging.alert_cases`"


def _promtool_test(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(binary("promtool")), "test", "rules", path.name], cwd=path.parent, capture_output=True, text=True
    )


def test_promtool_test_rules_passes_for_every_alert() -> None:
    result = _promtool_test(alert_cases.TEST_FILE)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_tests_fail_when_a_rule_is_weakened(tmp_path: Path) -> None:
    """The unit tests can fail: raising the hard-delete threshold to 1 breaks its firing case."""
    rules = rules_path(ROOT).read_text()
    weakened = rules.replace(
        "increase(dreamkeeper_hard_deletes_total[6h]) > 0", "increase(dreamkeeper_hard_deletes_total[6h]) > 1"
    )
    assert weakened != rules
    (tmp_path / "rules.yaml").write_text(weakened)
    doc = alert_cases.promtool_document()
    doc["rule_files"] = ["rules.yaml"]
    doc["tests"] = [t for t in doc["tests"] if t["name"].startswith("DreamkeeperHardDelete")]
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    result = _promtool_test(tmp_path / "t.yaml")
    assert result.returncode != 0
    assert "DreamkeeperHardDelete" in result.stdout + result.stderr
