"""The admission policy that checks the REQUESTER of a DreamSchedule, not the operator: one source for the chart,
``manifests/install.yaml`` and the tests.

A DreamSchedule makes the operator touch things on the author's behalf: the cycle pod mounts the Secret named in
``proposer.apiKeySecretRef``, writes into the claim, runs ``spec.image``, and (with ``spec.agent``) scales the
agent's workload. The operator may do all of that; its author may not have been allowed to. A
ValidatingAdmissionPolicy runs inside the API server, and its CEL ``authorizer`` asks the API server's own
authorizer about the *requesting* user (``request.userInfo``): no webhook, no certificate, no dependence on the
operator running. Each ``ResourceCheck`` below is one such question; adding one is one more entry in
``CHECKS`` (the variables it needs in ``VARIABLES``).

A check runs on CREATE and when an UPDATE changes the fields it names (so the operator's own metadata patches,
and a tenant's runNowToken, are never refused over rights someone else exercised when they set the field).
Parameters (allowed image prefixes, namespaces never served) live in a ConfigMap the binding names; a missing
ConfigMap denies (fail closed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dreamkeeper.kube import GROUP, SCHEDULE_PLURAL

POLICY_API = "admissionregistration.k8s.io/v1"
PARAMS_KEY_IMAGES = "allowedImagePrefixes"  # comma-separated: an image starting with one needs no `create pods`
PARAMS_KEY_EXCLUDED = "excludedNamespaces"  # comma-separated: no DreamSchedule is created there


def _changed(field: str) -> str:
    """CEL: ``spec.<field>`` differs between the old and the new object (appeared, vanished or changed)."""
    new, old = f"object.spec.{field}", f"oldObject.spec.{field}"
    return f"(has({new}) != has({old}) || (has({new}) && {new} != {old}))"


@dataclass(frozen=True)
class ResourceCheck:
    """One thing a schedule makes the operator touch, and the right its author must hold for it."""

    name: str
    fields: tuple[str, ...]  # spec fields whose change re-runs the check on UPDATE
    applies: str  # CEL: the schedule names such a thing
    allowed: str  # CEL: the requester holds the right (the authorizer speaks for request.userInfo)
    message: str  # CEL messageExpression when refused

    def validation(self) -> dict[str, Any]:
        changed = " || ".join(_changed(f) for f in self.fields)
        skip = "" if self.applies == "true" else f"!({self.applies}) || "
        expression = f"{skip}!(request.operation == 'CREATE' || {changed}) || ({self.allowed})"
        return {"expression": expression, "messageExpression": self.message, "reason": "Forbidden"}


def _who() -> str:
    return "'user ' + request.userInfo.username"


NS = "request.namespace"
SECRET = "object.spec.proposer.apiKeySecretRef.name"
EMBEDDINGS_SECRET = "object.spec.embeddings.apiKeySecretRef.name"
WORKLOAD = "object.spec.agent.workloadRef"

VARIABLES: list[dict[str, str]] = [
    {
        # Whoever may create pods here could mount any claim, any Secret key and run any image themselves.
        "name": "mayCreatePods",
        "expression": f"authorizer.group('').resource('pods').namespace({NS}).check('create').allowed()",
    },
    {
        "name": "imagePrefixes",
        "expression": f"has(params.data) && '{PARAMS_KEY_IMAGES}' in params.data ? "
        f"params.data['{PARAMS_KEY_IMAGES}'].split(',').filter(p, p != '') : []",
    },
    {
        "name": "excludedNamespaces",
        "expression": f"has(params.data) && '{PARAMS_KEY_EXCLUDED}' in params.data ? "
        f"params.data['{PARAMS_KEY_EXCLUDED}'].split(',').filter(n, n != '') : []",
    },
]

CHECKS: tuple[ResourceCheck, ...] = (
    ResourceCheck(
        # The kubelet mounts the key into the cycle pod as OPENAI_API_KEY, and the proposer sends it to baseURL:
        # any change of the proposer (type, baseURL, the reference) is re-checked, or a tenant could redirect a key
        # someone else was allowed to name.
        name="secret",
        fields=("proposer",),
        applies="has(object.spec.proposer) && has(object.spec.proposer.apiKeySecretRef)",
        allowed=f"authorizer.group('').resource('secrets').namespace({NS}).name({SECRET}).check('get').allowed()",
        message=f"{_who()} + ' may not get Secret ' + {SECRET} + ' in namespace ' + {NS} + "
        "': the cycle pod would mount it and send it to proposer.baseURL on your behalf'",
    ),
    ResourceCheck(
        # The embeddings endpoint is sent memory content and the key, as the proposer is: the same check.
        name="embeddings-secret",
        fields=("embeddings",),
        applies="has(object.spec.embeddings) && has(object.spec.embeddings.apiKeySecretRef)",
        allowed=f"authorizer.group('').resource('secrets').namespace({NS}).name({EMBEDDINGS_SECRET}).check('get')"
        ".allowed()",
        message=f"{_who()} + ' may not get Secret ' + {EMBEDDINGS_SECRET} + ' in namespace ' + {NS} + "
        "': the cycle pod would mount it and send it to embeddings.baseURL on your behalf'",
    ),
    ResourceCheck(
        # The cycle writes into the claim (under agentPath). `use` on the claim is the dedicated grant.
        name="claim",
        fields=("claimName", "agentPath"),
        applies="true",
        allowed=f"variables.mayCreatePods || authorizer.group('').resource('persistentvolumeclaims')"
        f".namespace({NS}).name(object.spec.claimName).check('use').allowed()",
        message=f"{_who()} + ' may neither create pods in namespace ' + {NS} + ' nor use PersistentVolumeClaim ' + "
        "object.spec.claimName + ' (verb use): the cycle would write into it on your behalf'",
    ),
    ResourceCheck(
        name="image",
        fields=("image",),
        applies="has(object.spec.image)",
        allowed="variables.mayCreatePods || variables.imagePrefixes.exists(p, object.spec.image.startsWith(p))",
        message=f"{_who()} + ' may not create pods in namespace ' + {NS} + ', and image ' + object.spec.image + "
        "' starts with none of the allowed prefixes (' + variables.imagePrefixes.join(', ') + '): the operator "
        "would run it on your behalf'",
    ),
    ResourceCheck(
        # spec.agent (the live-agent coordination): the operator scales and restarts that workload.
        name="agent-workload",
        fields=("agent",),
        applies=f"has(object.spec.agent) && has({WORKLOAD})",
        allowed=f"authorizer.group('apps').resource({WORKLOAD}.kind == 'StatefulSet' ? 'statefulsets' : "
        f"'deployments').namespace({NS}).name({WORKLOAD}.name).check('patch').allowed()",
        message=f"{_who()} + ' may not patch ' + {WORKLOAD}.kind + ' ' + {WORKLOAD}.name + ' in namespace ' + {NS} + "
        "': the operator would scale and restart it on your behalf'",
    ),
)

EXCLUDED_NAMESPACE = {
    "expression": f"request.operation != 'CREATE' || !({NS} in variables.excludedNamespaces)",
    "messageExpression": f"'namespace ' + {NS} + ' is not served by the dreamkeeper operator (excludedNamespaces)'",
    "reason": "Forbidden",
}


def policy_spec() -> dict[str, Any]:
    """The ValidatingAdmissionPolicy's spec."""
    return {
        "failurePolicy": "Fail",
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "matchConstraints": {
            "resourceRules": [
                {
                    "apiGroups": [GROUP],
                    "apiVersions": ["*"],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": [SCHEDULE_PLURAL],
                }
            ]
        },
        "variables": VARIABLES,
        "validations": [EXCLUDED_NAMESPACE, *(check.validation() for check in CHECKS)],
    }


def admission_policy(name: str) -> dict[str, Any]:
    return {
        "apiVersion": POLICY_API,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": policy_spec(),
    }


def admission_binding(
    name: str, policy: str, params_namespace: str, params_name: str, namespaces: list[str] | None = None
) -> dict[str, Any]:
    """Bind the policy with its parameters; ``namespaces`` limits it to those (namespace-scoped installs)."""
    spec: dict[str, Any] = {
        "policyName": policy,
        "validationActions": ["Deny"],
        "paramRef": {"name": params_name, "namespace": params_namespace, "parameterNotFoundAction": "Deny"},
    }
    if namespaces:
        selector = {
            "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": namespaces}]
        }
        spec["matchResources"] = {"namespaceSelector": selector}
    return {
        "apiVersion": POLICY_API,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": spec,
    }


def admission_params(
    name: str, namespace: str, *, image_prefixes: list[str], excluded_namespaces: list[str]
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": {
            PARAMS_KEY_IMAGES: ",".join(image_prefixes),
            PARAMS_KEY_EXCLUDED: ",".join(excluded_namespaces),
        },
    }
