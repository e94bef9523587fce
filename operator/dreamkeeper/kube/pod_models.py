"""The pieces of a pod spec a DreamSchedule carries (the agent's label selector, the cycle's resources and
identity), checked as the API server will check them when the operator puts them in a Job or a list query.

A value the CRD accepts and the API server then refuses makes every reconcile pass fail (issue 21: a selector key
"bad key!=x", requests above limits, fsGroup 0 in a restricted namespace). So each rule is here twice: as CEL in
the CRD (the API server refuses the schedule) and as a pydantic validator (the operator re-checks a spec stored
before the rule existed, and says ``InvalidSpec``).
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Annotated, Any, Literal

from kubernetes.utils import parse_quantity
from pydantic import ConfigDict, Field, model_validator

from dreamkeeper.kube.model_base import KubeModel, Quantity, cel

# The compute resources a cycle's containers may ask for (anything else the API server refuses, or a cycle
# has no use for: hugepages and extended resources must equal their limits and name hardware).
RESOURCE_NAMES = ("cpu", "memory", "ephemeral-storage")
# Label keys and values exactly as the API server checks them (k8s.io/apimachinery validation.IsQualifiedName and
# IsValidLabelValue): a key is an optional DNS-subdomain prefix (at most 253 characters) and "/", then a name of at
# most 63; a value is at most 63 characters, alphanumeric at both ends. Joined into a selector query unescaped, so
# nothing else may get through ("bad key!=x" would even parse as !=).
_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_DNS_PREFIX = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
LABEL_KEY = rf"^({_DNS_PREFIX}/)?{_LABEL_NAME}$"
LABEL_VALUE = rf"^({_LABEL_NAME})?$"
LABEL_PREFIX_MAX = 253


def _cel_label_key(key: str) -> str:
    """CEL: ``key`` is a label key the API server accepts (its prefix at most 253 characters)."""
    return f"({key}.matches({LABEL_KEY!r}) && (!{key}.contains('/') || {key}.indexOf('/') <= {LABEL_PREFIX_MAX}))"


def check_label_key(key: str) -> str:
    """The same rule as ``_cel_label_key``, for specs that did not come through an API server."""
    prefix, _, _ = key.rpartition("/")
    if re.fullmatch(LABEL_KEY, key) is None or len(prefix) > LABEL_PREFIX_MAX:
        raise ValueError(
            f"label key {key!r} is not a valid Kubernetes label key (an optional DNS prefix and '/', then at most "
            "63 characters: letters, digits, '-', '_', '.', alphanumeric at both ends)"
        )
    return key


def check_label_value(value: str) -> str:
    if re.fullmatch(LABEL_VALUE, value) is None:
        raise ValueError(
            f"label value {value!r} is not a valid Kubernetes label value (at most 63 characters: letters, digits, "
            "'-', '_', '.', alphanumeric at both ends)"
        )
    return value


LabelValue = Annotated[str, Field(max_length=63, pattern=LABEL_VALUE)]


class LabelSelectorRequirement(KubeModel):
    """One label requirement: key, operator, values."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(_cel_label_key("self.key"), "matchExpressions[].key is not a valid label key"),
                cel(
                    "self.operator in ['In', 'NotIn'] ? (has(self.values) && size(self.values) > 0) : "
                    "(!has(self.values) || size(self.values) == 0)",
                    "matchExpressions[].values: required (non-empty) for In and NotIn, empty for Exists and "
                    "DoesNotExist",
                ),
            ]
        }
    )

    key: str = Field(min_length=1, max_length=317, description="The label key.")
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"] = Field(
        description="How the key relates to the values: In, NotIn, Exists or DoesNotExist."
    )
    values: list[LabelValue] | None = Field(
        default=None, max_length=64, description="Values for In and NotIn (empty for Exists and DoesNotExist)."
    )

    @model_validator(mode="after")
    def _as_the_api_server_checks(self) -> LabelSelectorRequirement:
        check_label_key(self.key)
        for value in self.values or []:
            check_label_value(value)
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError(f"matchExpressions[].values must be non-empty for operator {self.operator}")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(f"matchExpressions[].values must be empty for operator {self.operator}")
        return self


class LabelSelector(KubeModel):
    """A Kubernetes label selector (matchLabels and matchExpressions are ANDed)."""

    match_labels: dict[str, LabelValue] | None = Field(
        default=None,
        max_length=32,
        description="Labels the pods must carry, key to value (keys and values as Kubernetes labels).",
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    f"self.all(k, {_cel_label_key('k')})",
                    "matchLabels: every key must be a valid label key (an optional DNS prefix and '/', then at "
                    "most 63 characters: letters, digits, '-', '_', '.', alphanumeric at both ends)",
                )
            ]
        },
    )
    match_expressions: list[LabelSelectorRequirement] | None = Field(
        default=None, max_length=16, description="Label requirements the pods must meet."
    )

    @model_validator(mode="after")
    def _labels_as_the_api_server_checks(self) -> LabelSelector:
        for key, value in (self.match_labels or {}).items():
            check_label_key(key)
            check_label_value(value)
        return self


def _quantity(value: int | str) -> Decimal:
    return parse_quantity(value)  # type: ignore[no-untyped-call,no-any-return]


def _cel_resource_list(field: str) -> dict[str, Any]:
    return {
        "x-kubernetes-validations": [
            cel(
                f"self.all(k, k in {list(RESOURCE_NAMES)!r})",
                f"resources.{field}: only {', '.join(RESOURCE_NAMES)} (the cycle needs no other resource)",
            ),
            cel(
                "self.all(k, !quantity(string(self[k])).isLessThan(quantity('0')))",
                f"resources.{field}: a quantity may not be negative",
            ),
        ]
    }


class ResourceRequirementsSpec(KubeModel):
    """Compute resources of the cycle's containers."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "!has(self.requests) || !has(self.limits) || self.requests.all(k, !(k in self.limits) || "
                    "quantity(string(self.requests[k])).compareTo(quantity(string(self.limits[k]))) <= 0)",
                    "resources: a request may not exceed its limit (the API server would refuse the cycle's Job)",
                )
            ]
        }
    )

    requests: dict[str, Quantity] | None = Field(
        default=None,
        max_length=len(RESOURCE_NAMES),
        description="Resources reserved (cpu, memory, ephemeral-storage), e.g. cpu: 100m, memory: 256Mi.",
        json_schema_extra=_cel_resource_list("requests"),
    )
    limits: dict[str, Quantity] | None = Field(
        default=None,
        max_length=len(RESOURCE_NAMES),
        description="Resources the containers may not exceed (cpu, memory, ephemeral-storage), e.g. memory: 1Gi; "
        "each at least its request.",
        json_schema_extra=_cel_resource_list("limits"),
    )

    @model_validator(mode="after")
    def _as_the_api_server_checks(self) -> ResourceRequirementsSpec:
        requests, limits = self.requests or {}, self.limits or {}
        for where, values in (("requests", requests), ("limits", limits)):
            for name, value in values.items():
                if name not in RESOURCE_NAMES:
                    raise ValueError(f"resources.{where}: {name!r} is not one of {', '.join(RESOURCE_NAMES)}")
                try:
                    amount = _quantity(value)
                except ValueError as exc:
                    raise ValueError(f"resources.{where}.{name}: {value!r} is not a quantity ({exc})") from None
                if amount < 0:
                    raise ValueError(f"resources.{where}.{name}: {value!r} is negative")
        for name, request in requests.items():
            if name in limits and _quantity(request) > _quantity(limits[name]):
                raise ValueError(
                    f"resources: requests.{name} {request} exceeds limits.{name} {limits[name]} (the API server "
                    "would refuse the cycle's Job)"
                )
        return self


class CycleSecurityContext(KubeModel):
    """Identity of the cycle's pod. Unset fields are copied from the agent pod mounting the claim, when found.

    Root is refused: the pod must pass Pod Security "restricted". Group 0 (root's group) is refused too unless an
    admin sets ``allowRootGroup``: with ``fsGroup: 0`` the kubelet hands the volume to group 0.
    """

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "(has(self.allowRootGroup) && self.allowRootGroup) || "
                    "((!has(self.runAsGroup) || self.runAsGroup >= 1) && (!has(self.fsGroup) || self.fsGroup >= 1))",
                    "securityContext: runAsGroup and fsGroup 0 (root's group) need allowRootGroup: true, which only "
                    "an admin may set",
                )
            ]
        }
    )

    run_as_user: int | None = Field(default=None, ge=1, le=2147483647, description="UID (non-zero).")
    run_as_group: int | None = Field(
        default=None, ge=0, le=2147483647, description="Primary GID (non-zero unless allowRootGroup)."
    )
    fs_group: int | None = Field(
        default=None,
        ge=0,
        le=2147483647,
        description="Supplemental group owning the agent's files (the agent's; non-zero unless allowRootGroup).",
    )
    allow_root_group: bool | None = Field(
        default=None,
        description="Admin only: allow runAsGroup or fsGroup 0. The admission policy requires its author to hold "
        "the verb allow-root-group on dreamschedules (cluster-admin does; the edit role does not).",
    )

    @model_validator(mode="after")
    def _no_root_group(self) -> CycleSecurityContext:
        if not self.allow_root_group and 0 in (self.run_as_group, self.fs_group):
            raise ValueError("securityContext: runAsGroup and fsGroup 0 (root's group) need allowRootGroup: true")
        return self
