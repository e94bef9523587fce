"""Build-time generators: the files `make generate` writes from the package's single sources of truth.

CRDs (from the CR models), the chart's RBAC rules, docs/operator-metrics.md (from ``METRIC_DOCS``), the Grafana
dashboard and the alert rules. Not part of the dreamkeeper package: the wheel, the image and the operator never
contain or import this code (it needs the dev-only grafana-foundation-sdk), and it imports dreamkeeper, never the
other way round. Tests hold every output in sync with its source.
"""
