"""The base of every custom-resource model: camelCase on the wire, CEL rules, Kubernetes quantities.

Split from ``models.py`` (the CRs) and ``pod_models.py`` (the pieces of a pod spec a schedule carries) so both
build on one definition.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, WithJsonSchema
from pydantic.alias_generators import to_camel

# A non-negative resource quantity (the API server refuses a negative request or limit).
QUANTITY = (
    r"^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
Quantity = Annotated[
    int | str,
    WithJsonSchema(
        {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY,
            "maxLength": 64,  # bounds the CEL cost of comparing quantities (and no real quantity is longer)
            "x-kubernetes-int-or-string": True,
        }
    ),
]


def cel(rule: str, message: str, **extra: str) -> dict[str, Any]:
    return {"rule": rule, "message": message, **extra}


class KubeModel(BaseModel):
    """camelCase on the wire; unknown fields are refused (the API server prunes them before we see them)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)

    def wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class StatusModel(KubeModel):
    """Status is read back from the cluster: tolerate fields written by a newer operator instead of failing."""

    model_config = ConfigDict(extra="ignore")
