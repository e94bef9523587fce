"""The one finalizer a DreamSchedule ever carries: while a Stop holds its agent at 0 replicas.

Everything else about a schedule is deletable at any moment, with or without a running operator (no kopf daemon,
no delete handler that needs a finalizer: ``handlers.py``). A Stop is different: deleting the schedule while it
holds the agent's workload at 0 replicas must restore the workload first, or the agent stays down with nobody to
bring it back. So the finalizer ``FINALIZER_AGENT_STOP`` is added in the pass that records a Stop (before its
status write; the scale-down is a later pass's) and removed in the pass that releases it. Deleting the schedule
meanwhile runs the release (``ScheduleReconciler.release_agent``) and then drops the finalizer. With the operator
gone during a Stop, the documented way out is to restore the replicas recorded in the workload's
``dreamkeeper.io/agent-stop`` annotation and remove the finalizer by hand (docs/operator.md, "Uninstall").
"""

from __future__ import annotations

from dreamkeeper.kube import FINALIZER_AGENT_STOP
from dreamkeeper.kube.models import DreamScheduleStatus
from dreamkeeper.kube.objects import KubeObject


def holds_agent(status: DreamScheduleStatus) -> bool:
    """A Stop is in progress (recorded, scaling, cycle running or restored but not yet released)."""
    return status.agent is not None and status.agent.stop is not None


def has_hold(obj: KubeObject) -> bool:
    return FINALIZER_AGENT_STOP in (obj["metadata"].get("finalizers") or [])


def with_hold(obj: KubeObject) -> list[str]:
    return [*(obj["metadata"].get("finalizers") or []), FINALIZER_AGENT_STOP]


def without_hold(obj: KubeObject) -> list[str]:
    return [f for f in obj["metadata"].get("finalizers") or [] if f != FINALIZER_AGENT_STOP]
