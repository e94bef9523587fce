"""The admission policy that checks the REQUESTER of a DreamSchedule, not the operator: one source for the chart,
``manifests/install.yaml`` and the tests.

A DreamSchedule makes the operator touch things on the author's behalf: the cycle pod mounts the Secret named in
``proposer.apiKeySecretRef``, reads and writes the claim (and may send what it reads to ``proposer.baseURL``), runs
``spec.image``, and (with ``spec.agent``) scales the agent's workload. The operator may do all of that; its author
may not have been allowed to. A ValidatingAdmissionPolicy runs inside the API server, and its CEL ``authorizer``
asks the API server's own authorizer about the *requesting* user (``request.userInfo``): no webhook, no
certificate, no dependence on the operator running. Each ``ResourceCheck`` below is one such question.

**An edit is checked like a creation** (issue 21). A check that re-ran only when "its" field changed left every
other field of a schedule an admin created to anyone with edit rights: a proposer pointed at their own server
without a Secret (the cycle then sent them the memory), safeguards turned off, ``spec.agent`` removed. So ANY
change of the spec, except ``suspend`` and ``runNowToken``, re-runs every check as if its requester created the
schedule now (``RECHECKED``: every spec field of the model but those two, so a new field is covered the day it is
added). ``runNowToken`` (and resuming a suspended schedule) starts a cycle, which with ``spec.agent`` disturbs the
agent: that needs the right to scale (Stop) or restart (RestartAfter) the workload (``DISTURB``). The operator's
own metadata patches change no spec and are never refused.

Parameters (allowed images, namespaces never served) are written INTO the policy, as CEL list literals
(``policy_spec(allowed_images=…, excluded_namespaces=…)``; the chart fills them from its values), never read from a
ConfigMap through ``paramKind``. Kubernetes (v1.36.1 and before; kubernetes/kubernetes#130887, fix proposed in #141015)
tears the API server's ConfigMap param informer down for good, for the life of the API server process, as soon as
no binding names a ConfigMap paramKind for one policy refresh (1 s): after that every binding with
``parameterNotFoundAction: Deny`` denies every request ("no params found for policy binding"), and with ``Allow``
the checks run against stale or missing parameters. A ``helm uninstall`` of the only release, then an install,
reached exactly that on our control plane: every DreamSchedule refused until the API server restarted. Literals
have no informer to lose; each release has its own policy (its name carries the release and namespace). An allowed
image is an exact reference, or a prefix that ends at a boundary (``/``, ``:`` or
``@``): ``localhost/dreamkeeper:test`` never admits ``localhost/dreamkeeper:test-bobs-build``, and
``registry.example/dreamkeeper/`` never admits ``registry.example/dreamkeeper-bob/evil``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dreamkeeper.kube import GROUP, SCHEDULE_PLURAL
from dreamkeeper.kube.models import DreamScheduleSpec

POLICY_API = "admissionregistration.k8s.io/v1"
# The policy variables holding its parameters (the chart's template fills their expressions from its values).
ALLOWED_IMAGES_VARIABLE = "allowedImages"  # exact references or boundary prefixes (see the docstring)
EXCLUDED_VARIABLE = "excludedNamespaces"  # no DreamSchedule is created there
IMAGE_BOUNDARIES = ("/", ":", "@")
# The verb an admin grants (on dreamschedules) to let a schedule run its cycle with group 0 (allowRootGroup).
ROOT_GROUP_VERB = "allow-root-group"
# Spec fields whose change needs no re-check of what the schedule reaches: they choose WHEN it runs, not what it
# reads, writes, sends or stops. Starting a cycle still needs the right to disturb the agent (DISTURB).
NOT_RECHECKED = ("suspend", "runNowToken")


def spec_fields() -> tuple[str, ...]:
    """Every field of a DreamSchedule's spec, as the API server names it."""
    return tuple(field.alias or name for name, field in DreamScheduleSpec.model_fields.items())


RECHECKED = tuple(f for f in spec_fields() if f not in NOT_RECHECKED)


def _changed(field: str) -> str:
    """CEL: ``spec.<field>`` differs between the old and the new object (appeared, vanished or changed)."""
    new, old = f"object.spec.{field}", f"oldObject.spec.{field}"
    return f"(has({new}) != has({old}) || (has({new}) && {new} != {old}))"


@dataclass(frozen=True)
class ResourceCheck:
    """One thing a schedule makes the operator touch, and the right its author must hold for it."""

    name: str
    applies: str  # CEL: the schedule names such a thing
    allowed: str  # CEL: the requester holds the right (the authorizer speaks for request.userInfo)
    message: str  # CEL messageExpression when refused
    when: str = "variables.recheck"  # CEL: the request is one this check runs on

    def validation(self) -> dict[str, Any]:
        skip = "" if self.applies == "true" else f"!({self.applies}) || "
        expression = f"!({self.when}) || {skip}({self.allowed})"
        return {"expression": expression, "messageExpression": self.message, "reason": "Forbidden"}


def _who() -> str:
    return "'user ' + request.userInfo.username"


# Appended to every refusal of an UPDATE: why an edit of someone else's schedule needs what its creation needed.
_AS_CREATED = (
    "(request.operation == 'UPDATE' ? ' (an edit of a DreamSchedule, other than suspend and runNowToken, is checked "
    "as if you created it now)' : '')"
)

NS = "request.namespace"
SECRET = "object.spec.proposer.apiKeySecretRef.name"
EMBEDDINGS_SECRET = "object.spec.embeddings.apiKeySecretRef.name"
WORKLOAD = "object.spec.agent.workloadRef"
IMAGE = "object.spec.image"
_WORKLOAD_PLURAL = f"({WORKLOAD}.kind == 'StatefulSet' ? 'statefulsets' : 'deployments')"


def _may_patch_workload(subresource: str | None = None) -> str:
    sub = f".subresource('{subresource}')" if subresource else ""
    return (
        f"authorizer.group('apps').resource({_WORKLOAD_PLURAL}){sub}.namespace({NS}).name({WORKLOAD}.name)"
        ".check('patch').allowed()"
    )


_COORDINATION = "(has(object.spec.agent.coordination) ? object.spec.agent.coordination : 'Stop')"

VARIABLES: list[dict[str, str]] = [
    {
        # Whoever may create pods here could mount any claim, any Secret key and run any image themselves.
        "name": "mayCreatePods",
        "expression": f"authorizer.group('').resource('pods').namespace({NS}).check('create').allowed()",
    },
    {"name": ALLOWED_IMAGES_VARIABLE, "expression": "[]"},  # policy_spec() writes the values in
    {"name": EXCLUDED_VARIABLE, "expression": "[]"},
    {
        # A creation, or an edit of anything but suspend and runNowToken: every check runs, as for a creation.
        "name": "recheck",
        "expression": "request.operation == 'CREATE' || " + " || ".join(_changed(f) for f in RECHECKED),
    },
    {
        # This request starts a cycle that disturbs the agent: a new runNowToken, or a suspended schedule resumed,
        # on a schedule whose spec.agent scales (Stop) or restarts (RestartAfter) its workload.
        "name": "disturbsAgent",
        "expression": f"request.operation == 'UPDATE' && has(object.spec.agent) && {_COORDINATION} != 'None' && "
        f"(({_changed('runNowToken')} && has(object.spec.runNowToken)) || "
        "(has(oldObject.spec.suspend) && oldObject.spec.suspend && "
        "!(has(object.spec.suspend) && object.spec.suspend)))",
    },
]

_IMAGE_ALLOWED = (
    f"variables.allowedImages.exists(p, {IMAGE} == p || ("
    + " || ".join(f"p.endsWith('{b}')" for b in IMAGE_BOUNDARIES)
    + f") && {IMAGE}.startsWith(p))"
)

CHECKS: tuple[ResourceCheck, ...] = (
    ResourceCheck(
        # The kubelet mounts the key into the cycle pod as OPENAI_API_KEY, and the proposer sends it to baseURL. Any
        # change re-checks it (the image, the proposer, anything): a tenant could otherwise run an image of theirs
        # with a key someone else was allowed to name, or send it elsewhere.
        name="secret",
        applies="has(object.spec.proposer) && has(object.spec.proposer.apiKeySecretRef)",
        allowed=f"authorizer.group('').resource('secrets').namespace({NS}).name({SECRET}).check('get').allowed()",
        message=f"{_who()} + ' may not get Secret ' + {SECRET} + ' in namespace ' + {NS} + "
        f"': the cycle pod would mount it and send it to proposer.baseURL on your behalf' + {_AS_CREATED}",
    ),
    ResourceCheck(
        # The embeddings endpoint is sent memory content and the key, as the proposer is: the same check.
        name="embeddings-secret",
        applies="has(object.spec.embeddings) && has(object.spec.embeddings.apiKeySecretRef)",
        allowed=f"authorizer.group('').resource('secrets').namespace({NS}).name({EMBEDDINGS_SECRET}).check('get')"
        ".allowed()",
        message=f"{_who()} + ' may not get Secret ' + {EMBEDDINGS_SECRET} + ' in namespace ' + {NS} + "
        f"': the cycle pod would mount it and send it to embeddings.baseURL on your behalf' + {_AS_CREATED}",
    ),
    ResourceCheck(
        # The cycle reads and writes the whole claim (under agentPath), and its proposer sends what it reads to
        # baseURL, with or without a Secret: `use` on the claim is the dedicated grant.
        name="claim",
        applies="true",
        allowed=f"variables.mayCreatePods || authorizer.group('').resource('persistentvolumeclaims')"
        f".namespace({NS}).name(object.spec.claimName).check('use').allowed()",
        message=f"{_who()} + ' may neither create pods in namespace ' + {NS} + ' nor use PersistentVolumeClaim ' + "
        "object.spec.claimName + ' (verb use): the cycle would read it, write it and send its memory to the "
        f"proposer on your behalf' + {_AS_CREATED}",
    ),
    ResourceCheck(
        name="image",
        applies=f"has({IMAGE})",
        allowed=f"variables.mayCreatePods || {_IMAGE_ALLOWED}",
        message=f"{_who()} + ' may not create pods in namespace ' + {NS} + ', and image ' + {IMAGE} + "
        "' is not an allowed image (' + variables.allowedImages.join(', ') + '; a prefix must end in /, : or @): "
        f"the operator would run it on your behalf' + {_AS_CREATED}",
    ),
    ResourceCheck(
        # spec.agent (the live-agent coordination): the operator records its replicas on it, scales and restarts it.
        name="agent-workload",
        applies=f"has(object.spec.agent) && has({WORKLOAD})",
        allowed=_may_patch_workload(),
        message=f"{_who()} + ' may not patch ' + {WORKLOAD}.kind + ' ' + {WORKLOAD}.name + ' in namespace ' + {NS} + "
        f"': the operator would scale and restart it on your behalf' + {_AS_CREATED}",
    ),
    ResourceCheck(
        # Group 0 owns what the kubelet chowns to fsGroup: an admin's decision (Pod Security does not ask).
        name="root-group",
        applies="has(object.spec.securityContext) && has(object.spec.securityContext.allowRootGroup) && "
        "object.spec.securityContext.allowRootGroup",
        allowed=f"authorizer.group('{GROUP}').resource('{SCHEDULE_PLURAL}').namespace({NS})"
        f".check('{ROOT_GROUP_VERB}').allowed()",
        message=f"{_who()} + ' may not set securityContext.allowRootGroup in namespace ' + {NS} + ' (verb "
        f"{ROOT_GROUP_VERB} on {SCHEDULE_PLURAL}.{GROUP}, an admin grant): the cycle would run with group 0' + "
        f"{_AS_CREATED}",
    ),
    ResourceCheck(
        # A runNowToken (or resuming) on a schedule whose agent is stopped or restarted for each cycle: the
        # requester must be allowed to do that to the workload themselves (Stop: patch its scale subresource, or the
        # workload itself, which includes its replicas; RestartAfter: patch the workload).
        name="disturb-agent",
        when="variables.disturbsAgent",
        applies=f"has({WORKLOAD})",
        allowed=f"{_may_patch_workload()} || ({_COORDINATION} == 'Stop' && {_may_patch_workload('scale')})",
        message=f"{_who()} + ' may not ' + ({_COORDINATION} == 'Stop' ? 'scale ' : 'restart ') + {WORKLOAD}.kind + "
        f"' ' + {WORKLOAD}.name + ' in namespace ' + {NS} + ': a runNowToken (or resuming the schedule) makes the "
        "operator ' + (" + _COORDINATION + " == 'Stop' ? 'scale it to 0 (needs patch on its scale subresource)' : "
        "'restart it (needs patch on it)') + ' on your behalf'",
    ),
)

EXCLUDED_NAMESPACE = {
    "expression": f"request.operation != 'CREATE' || !({NS} in variables.excludedNamespaces)",
    "messageExpression": f"'namespace ' + {NS} + ' is not served by the dreamkeeper operator (excludedNamespaces)'",
    "reason": "Forbidden",
}


def cel_string_list(values: Sequence[str]) -> str:
    """A CEL list literal of the non-empty strings: a JSON array, since every escape JSON writes in a string (a
    quote, a backslash, control characters, four-hex-digit code points) is also a CEL string escape. Compact
    separators and raw non-ASCII, as Helm's ``toJson`` writes them in the chart, so both render the same text."""
    return json.dumps([v for v in values if v], separators=(",", ":"), ensure_ascii=False)


def policy_spec(allowed_images: Sequence[str] = (), excluded_namespaces: Sequence[str] = ()) -> dict[str, Any]:
    """The ValidatingAdmissionPolicy's spec, its parameters written in (the chart's generated copy has none: its
    template fills them)."""
    filled = {ALLOWED_IMAGES_VARIABLE: allowed_images, EXCLUDED_VARIABLE: excluded_namespaces}
    variables = [
        {**v, "expression": cel_string_list(filled[v["name"]])} if v["name"] in filled else dict(v) for v in VARIABLES
    ]
    return {
        "failurePolicy": "Fail",
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
        "variables": variables,
        "validations": [EXCLUDED_NAMESPACE, *(check.validation() for check in CHECKS)],
    }


def admission_policy(name: str, *, allowed_images: Sequence[str], excluded_namespaces: Sequence[str]) -> dict[str, Any]:
    return {
        "apiVersion": POLICY_API,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": policy_spec(allowed_images, excluded_namespaces),
    }


def admission_binding(name: str, policy: str, namespaces: list[str] | None = None) -> dict[str, Any]:
    """Bind the policy (no parameter resource: they are in the policy); ``namespaces`` limits it to those
    (namespace-scoped installs)."""
    spec: dict[str, Any] = {"policyName": policy, "validationActions": ["Deny"]}
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
