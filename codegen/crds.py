"""The two CustomResourceDefinitions, built from the pydantic models in ``models.py``."""

from __future__ import annotations

from typing import Any

from codegen.schema import structural_schema
from dreamkeeper.kube import (
    CATEGORY,
    GROUP,
    SCHEDULE_KIND,
    SCHEDULE_PLURAL,
    SCHEDULE_SHORT_NAMES,
    SCHEDULE_SINGULAR,
    VERSION,
    VOCABULARY_KIND,
    VOCABULARY_PLURAL,
    VOCABULARY_SHORT_NAMES,
    VOCABULARY_SINGULAR,
)
from dreamkeeper.kube.models import (
    DreamScheduleSpec,
    DreamScheduleStatus,
    MemoryVocabularySpec,
    MemoryVocabularyStatus,
)


def _column(name: str, type_: str, path: str, description: str, priority: int = 0) -> dict[str, Any]:
    column: dict[str, Any] = {"name": name, "type": type_, "jsonPath": path, "description": description}
    if priority:
        column["priority"] = priority
    return column


def _root_schema(spec: dict[str, Any], status: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "type": "object",
        "description": description,
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string", "description": "dreamkeeper.io/v1alpha1."},
            "kind": {"type": "string", "description": "The kind of the object."},
            "metadata": {"type": "object"},  # the API server allows nothing else here, not even a description
            "spec": spec,
            "status": status,
        },
    }


def _crd(
    *,
    kind: str,
    plural: str,
    singular: str,
    short_names: tuple[str, ...],
    schema: dict[str, Any],
    columns: list[dict[str, Any]],
) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}", "labels": {"app.kubernetes.io/name": "dreamkeeper"}},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": singular,
                "shortNames": list(short_names),
                "categories": [CATEGORY],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }


def dream_schedule_crd() -> dict[str, Any]:
    schema = _root_schema(
        structural_schema(DreamScheduleSpec),
        structural_schema(DreamScheduleStatus, keep_defaults=False),
        "DreamSchedule runs dream consolidation of one agent's memory on its PersistentVolumeClaim, on a cron "
        "schedule, as Jobs pinned to the node that mounts the claim. Nothing is ever hard-deleted.",
    )
    columns = [
        _column("Schedule", "string", ".spec.schedule", "Cron schedule"),
        _column("Timezone", "string", ".spec.timeZone", "IANA time zone of the schedule"),
        _column("Suspended", "boolean", ".spec.suspend", "Scheduled slots are skipped"),
        _column("Active", "string", ".status.activeJob.name", "The cycle Job running now"),
        _column("Last Run", "date", ".status.lastRun.finishedAt", "When the last counted cycle finished"),
        _column("Result", "string", ".status.lastRun.result", "completed, skipped or failed"),
        _column("Archived", "integer", ".status.lastRun.archived", "Entries archived by the last cycle"),
        _column("Rejected", "integer", ".status.lastRun.rejected", "Merges rejected for dropping specifics"),
        _column("Protected", "integer", ".status.lastRun.protected", "Entries protected from pruning"),
        _column("Age", "date", ".metadata.creationTimestamp", "Age"),
        _column("Ready", "string", '.status.conditions[?(@.type=="Ready")].status', "Ready condition", 1),
        _column("Reason", "string", '.status.conditions[?(@.type=="Ready")].reason', "Why (not) ready", 1),
        # A string, not a date: kubectl renders a future `date` as <invalid>; RFC 3339 reads as it is.
        _column("Next Run", "string", ".status.nextScheduleTime", "Next scheduled slot (RFC 3339)", 1),
        _column("Claim", "string", ".spec.claimName", "The agent's PersistentVolumeClaim", 1),
    ]
    return _crd(
        kind=SCHEDULE_KIND,
        plural=SCHEDULE_PLURAL,
        singular=SCHEDULE_SINGULAR,
        short_names=SCHEDULE_SHORT_NAMES,
        schema=schema,
        columns=columns,
    )


def memory_vocabulary_crd() -> dict[str, Any]:
    schema = _root_schema(
        structural_schema(MemoryVocabularySpec),
        structural_schema(MemoryVocabularyStatus, keep_defaults=False),
        "MemoryVocabulary is a merge-coverage-vocabulary.json for agents: seeded into an agent's volume by the "
        "DreamSchedules that reference it, only when the volume has no such file (never overwritten).",
    )
    columns = [
        _column("Common", "integer", ".status.commonWords", "extraCommonWords"),
        _column("Specific", "integer", ".status.specificWords", "alwaysSpecificWords"),
        _column("Exempt", "integer", ".status.exemptCategories", "numericExemptCategories"),
        _column("Ready", "string", '.status.conditions[?(@.type=="Ready")].status', "Ready condition"),
        _column("Age", "date", ".metadata.creationTimestamp", "Age"),
        _column("SHA256", "string", ".status.sha256", "sha256 of the rendered file", 1),
        _column("ConfigMap", "string", ".status.configMapName", "The rendered ConfigMap", 1),
    ]
    return _crd(
        kind=VOCABULARY_KIND,
        plural=VOCABULARY_PLURAL,
        singular=VOCABULARY_SINGULAR,
        short_names=VOCABULARY_SHORT_NAMES,
        schema=schema,
        columns=columns,
    )


def all_crds() -> list[dict[str, Any]]:
    return [dream_schedule_crd(), memory_vocabulary_crd()]
