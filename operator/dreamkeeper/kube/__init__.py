"""The Kubernetes operator: DreamSchedule and MemoryVocabulary custom resources, Jobs on the agent's volume.

Names every part of the operator agrees on live here so the CRDs, RBAC, Job labels and handlers cannot drift.
"""

from __future__ import annotations

from typing import Final

GROUP: Final = "dreamkeeper.io"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
CATEGORY: Final = "dreamkeeper"

SCHEDULE_KIND: Final = "DreamSchedule"
SCHEDULE_PLURAL: Final = "dreamschedules"
SCHEDULE_SINGULAR: Final = "dreamschedule"
SCHEDULE_SHORT_NAMES: Final = ("ds", "dsched")  # `ds` is also daemonsets; `dsched` is unambiguous

VOCABULARY_KIND: Final = "MemoryVocabulary"
VOCABULARY_PLURAL: Final = "memoryvocabularies"
VOCABULARY_SINGULAR: Final = "memoryvocabulary"
VOCABULARY_SHORT_NAMES: Final = ("memvocab",)

# Labels and annotations on the Jobs, Pods and ConfigMaps the operator creates.
LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"
MANAGED_BY: Final = "dreamkeeper-operator"
LABEL_NAME: Final = "app.kubernetes.io/name"
LABEL_COMPONENT: Final = "app.kubernetes.io/component"
LABEL_SCHEDULE: Final = f"{GROUP}/schedule"
LABEL_CLAIM: Final = f"{GROUP}/claim"
LABEL_TRIGGER: Final = f"{GROUP}/trigger"
LABEL_VOCABULARY: Final = f"{GROUP}/vocabulary"
ANNOTATION_SLOT: Final = f"{GROUP}/slot"
ANNOTATION_RUN_NOW_TOKEN: Final = f"{GROUP}/run-now-token"
ANNOTATION_COUNTED: Final = f"{GROUP}/counted"
ANNOTATION_VOCABULARY_SHA256: Final = f"{GROUP}/vocabulary-sha256"
ANNOTATION_PINNED_TO: Final = f"{GROUP}/pinned-to"
ANNOTATION_SCHEDULE_NAME: Final = f"{GROUP}/schedule-name"
ANNOTATION_CLAIM_NAME: Final = f"{GROUP}/claim-name"
FINALIZER: Final = f"{GROUP}/finalizer"
# On the agent's workload while a Stop holds it: the recorded replicas (the status has the same record).
ANNOTATION_AGENT_STOP: Final = f"{GROUP}/agent-stop"
# On a cycle Job run while the agent was stopped: the workload it stopped.
ANNOTATION_AGENT_STOPPED: Final = f"{GROUP}/agent-stopped"
# What `kubectl rollout restart` sets on the pod template (RestartAfter does the same).
ANNOTATION_RESTARTED_AT: Final = "kubectl.kubernetes.io/restartedAt"

# Container names inside a cycle Job's pod; the operator reads their termination messages by these names.
SEED_CONTAINER: Final = "seed-vocabulary"
DREAM_CONTAINER: Final = "dream"
