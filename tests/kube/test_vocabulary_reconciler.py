"""MemoryVocabulary -> ConfigMap and status, against the in-memory API server."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dreamkeeper.kube.api import ConflictError
from dreamkeeper.kube.models import MemoryVocabularySpec
from dreamkeeper.kube.vocabulary_reconciler import VocabularyConflictError, VocabularyReconciler
from dreamkeeper.kube.vocabulary_render import render
from tests.kube.fakes import FakeCluster

NS = "agents"
SPEC = {"extraCommonWords": ["briefing", "briefing", "triage"], "alwaysSpecificWords": ["May"],
        "numericExemptCategories": ["/metrics/cost/"]}  # fmt: skip


def setup(spec: dict[str, Any] = SPEC) -> tuple[FakeCluster, VocabularyReconciler]:
    c = FakeCluster()
    c.put("MemoryVocabulary", {"metadata": {"name": "words", "namespace": NS}, "spec": spec})
    return c, VocabularyReconciler(c)


def body(c: FakeCluster) -> dict[str, Any]:
    got = c.get("MemoryVocabulary", NS, "words")
    assert got is not None
    return got


def test_renders_a_canonical_file_into_an_owned_config_map() -> None:
    c, r = setup()
    assert r.reconcile(body(c)) is True
    cm = c.get("ConfigMap", NS, "words-memvocab")
    assert cm is not None
    data = json.loads(cm["data"]["merge-coverage-vocabulary.json"])
    assert data == {"extraCommonWords": ["briefing", "triage"], "alwaysSpecificWords": ["May"],
                    "numericExemptCategories": ["metrics/cost"]}  # fmt: skip
    assert cm["metadata"]["ownerReferences"][0]["uid"] == body(c)["metadata"]["uid"]
    status = body(c)["status"]
    expected = render(MemoryVocabularySpec.model_validate(SPEC))
    assert status["sha256"] == expected.sha256 == cm["metadata"]["annotations"]["dreamkeeper.io/vocabulary-sha256"]
    assert (status["commonWords"], status["specificWords"], status["exemptCategories"]) == (2, 1, 1)
    assert status["conditions"][0]["status"] == "True"


def test_a_second_pass_writes_nothing_and_a_spec_change_updates_the_config_map() -> None:
    c, r = setup()
    r.reconcile(body(c))
    rv = body(c)["metadata"]["resourceVersion"]
    assert r.reconcile(body(c)) is False
    assert body(c)["metadata"]["resourceVersion"] == rv
    c.edit_spec("MemoryVocabulary", NS, "words", alwaysSpecificWords=["May", "Rose"])
    assert r.reconcile(body(c)) is True
    cm = c.get("ConfigMap", NS, "words-memvocab")
    assert cm is not None and "Rose" in cm["data"]["merge-coverage-vocabulary.json"]
    assert body(c)["status"]["observedGeneration"] == 2


def test_a_config_map_it_does_not_own_is_never_touched() -> None:
    c, r = setup()
    c.put("ConfigMap", {"metadata": {"name": "words-memvocab", "namespace": NS}, "data": {"x": "mine"}})
    r.reconcile(body(c))
    cm = c.get("ConfigMap", NS, "words-memvocab")
    assert cm is not None and cm["data"] == {"x": "mine"}
    condition = body(c)["status"]["conditions"][0]
    assert (condition["status"], condition["reason"]) == ("False", "ConfigMapConflict")


def test_a_concurrent_change_is_reported_for_a_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    c, r = setup()

    def conflict(namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        raise ConflictError(409, "Conflict", "modified")

    monkeypatch.setattr(c, "patch_vocabulary_status", conflict)
    with pytest.raises(VocabularyConflictError):
        r.reconcile(body(c))


def test_an_invalid_spec_is_not_ready_with_a_reason_and_renders_nothing() -> None:
    c, r = setup({"extraCommonWords": [" padded "]})
    assert r.reconcile(body(c)) is False
    condition = body(c)["status"]["conditions"][0]
    assert (condition["status"], condition["reason"]) == ("False", "InvalidSpec")
    assert c.get("ConfigMap", NS, "words-memvocab") is None
