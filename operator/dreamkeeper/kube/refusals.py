"""The API server refusing a cycle's objects: a condition and an Event, never a traceback (issue 21, finding 3).

Two places can say no. **The Job** is refused when the operator creates it (422: an invalid template, e.g. a
request above its limit; 403: a ResourceQuota on Jobs, a namespace being deleted, the operator's own RBAC; 404: the
namespace is gone; 400: a label selector the API server cannot parse, on the pod list that places it). Before this
module the pass raised and wrote no status: the agent stayed scaled to 0 until ``scaleDownTimeoutSeconds`` with
``Ready=True``, and the Stop then ended with the false reason ``ScaleDownTimedOut``. Now the refusal is the
pass's result: ``Ready=False/JobRefused`` with the server's words, a Warning Event, the run-now token handled
(it would be refused again), and with ``spec.agent`` Stop the agent restored in the next pass, at once.

**The pod** is refused later, by the Job controller (a quota that requires limits, a LimitRange, Pod Security):
the Job then sits active with no pod while the controller retries with back-off, and only its ``FailedCreate``
Events say why. After the same grace as a pod that can never start (``stuck.py``) the operator reads those
Events and stops the Job the same way (``PodRefused``), so the claim and the agent are released.
"""

from __future__ import annotations

from dataclasses import dataclass

from dreamkeeper.kube.api import ApiError
from dreamkeeper.kube.objects import Event

JOB_REFUSED = "JobRefused"
POD_REFUSED = "PodRefused"
REFUSAL_REASONS = frozenset({JOB_REFUSED, POD_REFUSED})
# Not a refusal: 409 (AlreadyExists / a precondition: handled where it happens) and 429 (throttled: try again).
_TRANSIENT = frozenset({409, 429})
# The Job controller's Event reason when it cannot create a Job's pod (pkg/controller/controller_utils.go).
FAILED_CREATE = "FailedCreate"


def is_refusal(exc: ApiError) -> bool:
    """A 4xx the same request would get again: the API server refuses the object, not the moment."""
    return 400 <= exc.status < 500 and exc.status not in _TRANSIENT


@dataclass(frozen=True)
class Refusal:
    """The API server's no to one of a cycle's objects."""

    reason: str  # JOB_REFUSED or POD_REFUSED
    what: str  # what was refused, for a human ("Job nightly-now-1a2b")
    status: int | None  # the HTTP status (None: read from an Event)
    server_reason: str  # Invalid, Forbidden, BadRequest, ...
    message: str  # the API server's own words

    @classmethod
    def of(cls, what: str, exc: ApiError) -> Refusal:
        return cls(JOB_REFUSED, what, exc.status, exc.reason, exc.message)

    @property
    def text(self) -> str:
        code = f"HTTP {self.status} {self.server_reason}" if self.status is not None else self.server_reason
        return f"the API server refused {self.what} ({code}): {self.message}"[:1000]

    def annotation(self) -> str:
        """The value of ``ANNOTATION_STOPPED`` on a Job stopped for it: ``<reason>: <what was said>``."""
        return f"{self.reason}: {self.text}"[:1000]


def refused_pod(events: list[Event]) -> Refusal | None:
    """The Job controller's latest ``FailedCreate`` about a Job: why its pod cannot be created (None: no such
    Event; the caller waits a grace first, as a quota may be raised a moment later)."""
    failed = [e for e in events if e.get("reason") == FAILED_CREATE]
    if not failed:
        return None
    latest = max(failed, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
    message = " ".join(str(latest.get("message") or "").split())
    return Refusal(POD_REFUSED, "the cycle's pod", None, FAILED_CREATE, message)


__all__ = ["JOB_REFUSED", "POD_REFUSED", "REFUSAL_REASONS", "Refusal", "is_refusal", "refused_pod"]
