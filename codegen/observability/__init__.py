"""Observability as code: the Grafana dashboard and the Prometheus alert rules of the operator's metrics.

Both are generated from this package (``make generate``) into the Helm chart, and both use only the metric names
and labels of ``dreamkeeper.kube.metrics`` (tests hold them to it).
"""

from __future__ import annotations

from typing import Final

SCHEDULE_LABELS: Final = "dreamschedule, dreamschedule_namespace"
RUNBOOK_BASE_URL: Final = "https://github.com/dreamkeeper/dreamkeeper/blob/main/docs/runbooks.md"
