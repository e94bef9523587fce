"""The custom resources as pydantic models: the one source of the CRD schemas and of what the operator reads.

Field names are the Kubernetes camelCase names (aliases); bounds live here so the API server enforces them
(``generate.py`` renders these models into structural OpenAPI schemas) and the operator re-checks them when it
parses a spec. ``x-kubernetes-validations`` (CEL) rules are attached with ``json_schema_extra``.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import ConfigDict, Field, create_model, model_validator

from dreamkeeper.consolidation import COUNTS
from dreamkeeper.kube.model_base import KubeModel, StatusModel, cel
from dreamkeeper.kube.patterns import AGENT_PATH as AGENT_PATH
from dreamkeeper.kube.patterns import CATEGORY_PATH as CATEGORY_PATH
from dreamkeeper.kube.patterns import CONDITION_REASON as CONDITION_REASON
from dreamkeeper.kube.patterns import CRON as CRON
from dreamkeeper.kube.patterns import DNS_SUBDOMAIN as DNS_SUBDOMAIN
from dreamkeeper.kube.patterns import INTERNAL_URL as INTERNAL_URL
from dreamkeeper.kube.patterns import WORD as WORD
from dreamkeeper.kube.pod_models import (
    CycleSecurityContext,
    LabelSelector,
    ResourceRequirementsSpec,
)
from dreamkeeper.kube.spec_parts import DecaySpec as DecaySpec
from dreamkeeper.kube.spec_parts import EmbeddingsSpec as EmbeddingsSpec
from dreamkeeper.kube.spec_parts import FilePattern as FilePattern
from dreamkeeper.kube.spec_parts import FloorSpec as FloorSpec
from dreamkeeper.kube.spec_parts import FormatProfileSpec as FormatProfileSpec
from dreamkeeper.kube.spec_parts import LocalObjectReference as LocalObjectReference
from dreamkeeper.kube.spec_parts import MemoryFormatName as MemoryFormatName
from dreamkeeper.kube.spec_parts import ProposerSpec as ProposerSpec
from dreamkeeper.kube.spec_parts import RockBotSpec as RockBotSpec
from dreamkeeper.kube.spec_parts import SafeguardsSpec as SafeguardsSpec
from dreamkeeper.kube.spec_parts import SecretKeySelector as SecretKeySelector

# ---- shared pieces ------------------------------------------------------------------------------------------------


class Condition(StatusModel):
    """metav1.Condition."""

    type: str = Field(
        max_length=316,
        pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
        description="Ready, LastRunSucceeded or VocabularyInSync.",
    )
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    observed_generation: int | None = Field(
        default=None, ge=0, description="The metadata.generation the condition was set for."
    )
    last_transition_time: datetime = Field(description="When the status last changed.")
    reason: str = Field(
        min_length=1, max_length=1024, pattern=CONDITION_REASON, description="Why, in one CamelCase word."
    )
    message: str = Field(max_length=32768, description="What happened, for a human.")


Conditions = Annotated[
    list[Condition],
    Field(
        max_length=16,
        description="The latest observations of the object's state (metav1.Condition).",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    ),
]


# ---- DreamSchedule ------------------------------------------------------------------------------------------------


WorkloadKind = Literal["Deployment", "StatefulSet"]
Coordination = Literal["Stop", "RestartAfter", "None"]


class WorkloadReference(KubeModel):
    """An apps/v1 Deployment or StatefulSet in the DreamSchedule's namespace."""

    kind: WorkloadKind = Field(description="Deployment or StatefulSet (apps/v1).")
    name: str = Field(
        min_length=1, max_length=253, pattern=DNS_SUBDOMAIN, description="Name of the workload (same namespace)."
    )


class AgentSpec(KubeModel):
    """The agent's own workload, and how a cycle coordinates with it.

    An agent that caches its memory (RockBot loads its index once and writes its cached copies back) must not
    run while a cycle changes its files, or must reload them afterwards.
    """

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "!has(self.scaleDownTimeoutSeconds) || !has(self.maxDowntimeSeconds) || "
                    "self.scaleDownTimeoutSeconds < self.maxDowntimeSeconds",
                    "agent.scaleDownTimeoutSeconds must be below agent.maxDowntimeSeconds",
                )
            ]
        }
    )

    workload_ref: WorkloadReference = Field(description="The Deployment or StatefulSet running the agent.")
    coordination: Coordination = Field(
        default="Stop",
        description="Stop (default): record the replicas, scale the workload to 0, wait until no pod mounts the "
        "claim, run the cycle, restore the recorded replicas (also when the cycle fails or is deleted). "
        "RestartAfter: run beside the agent, then restart the workload (like kubectl rollout restart) when the "
        "cycle changed anything, so the agent reloads its memory. None: for agents that re-read their files.",
    )
    scale_down_timeout_seconds: int = Field(
        default=300,
        ge=10,
        le=3600,
        description="Stop: how long to wait for the agent's pods to go after the scale-down; then the replicas "
        "are restored and no cycle runs.",
    )
    max_downtime_seconds: int = Field(
        default=1800,
        ge=60,
        le=86400,
        description="Stop: the longest the agent is kept down, from the scale-down request to the restore: the "
        "cycle's activeDeadlineSeconds is cut to what is left of it.",
    )

    @model_validator(mode="after")
    def _timeouts_nest(self) -> AgentSpec:
        if self.scale_down_timeout_seconds >= self.max_downtime_seconds:
            raise ValueError("agent.scaleDownTimeoutSeconds must be below agent.maxDowntimeSeconds")
        return self


class DreamScheduleSpec(KubeModel):
    """When and how to consolidate one agent's memory on its PersistentVolumeClaim."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "!has(self.formatProfile) || self.format != 'rockbot'",
                    "formatProfile is for a Markdown format (openclaw, hermes, claude), not rockbot",
                )
            ]
        }
    )

    schedule: str = Field(
        min_length=1, max_length=128, pattern=CRON, description="Cron schedule (5 fields or @daily, @hourly, ...)."
    )
    time_zone: str = Field(
        default="UTC",
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9_+\-/]+$",
        description="IANA time zone of the schedule (default UTC).",
    )
    suspend: bool = Field(default=False, description="Skip scheduled slots (a runNowToken still runs).")
    starting_deadline_seconds: int | None = Field(
        default=None,
        ge=0,
        le=31_536_000,
        description="A slot later than this many seconds is recorded as missed instead of run (default: none).",
    )
    claim_name: str = Field(
        min_length=1,
        max_length=253,
        pattern=DNS_SUBDOMAIN,
        description="The agent's PersistentVolumeClaim (immutable). The cycle runs on the node that mounts it.",
        json_schema_extra={"x-kubernetes-validations": [cel("self == oldSelf", "claimName is immutable")]},
    )
    agent_path: str = Field(
        default="agent",
        max_length=1024,
        pattern=AGENT_PATH,
        description="Agent data directory inside the volume (memory under <agentPath>/memory).",
    )
    agent_selector: LabelSelector | None = Field(
        default=None, description="Labels of the agent's pods, to find the node mounting the claim quickly."
    )
    vocabulary_ref: LocalObjectReference | None = Field(
        default=None,
        description="MemoryVocabulary seeded into the volume when the file is absent (never overwritten).",
    )
    agent: AgentSpec | None = Field(
        default=None,
        description="The agent's workload and how cycles coordinate with it (default policy Stop). Without it "
        "the cycle runs beside whatever mounts the claim.",
    )
    proposer: ProposerSpec = Field(default_factory=ProposerSpec)
    embeddings: EmbeddingsSpec | None = Field(
        default=None, description="An embeddings endpoint that fills in missing vectors (default: none)."
    )
    rockbot: RockBotSpec | None = Field(
        default=None, description="The agent's (RockBot's) paths and purge window, where they are not its defaults."
    )
    safeguards: SafeguardsSpec | None = None
    format: MemoryFormatName = Field(
        default="rockbot",
        description="How the agent keeps its memory: rockbot (one JSON file per entry under <agentPath>/memory), "
        "openclaw (<agentPath> is OpenClaw's state directory: workspace/MEMORY.md, USER.md, memory/YYYY-MM-DD.md), "
        "hermes (<agentPath> is HERMES_HOME: memories/MEMORY.md, USER.md) or claude (one file per memory under "
        "<agentPath>/memory with a MEMORY.md index). See docs/formats.md.",
    )
    format_profile: FormatProfileSpec | None = Field(
        default=None, description="A Markdown format's profile fields (not for rockbot)."
    )

    @model_validator(mode="after")
    def _profile_of_a_markdown_format(self) -> DreamScheduleSpec:
        if self.format_profile is not None and self.format == "rockbot":
            raise ValueError("formatProfile is for a Markdown format (openclaw, hermes, claude), not rockbot")
        return self

    image: str | None = Field(
        default=None,
        min_length=1,
        max_length=512,
        pattern=r"^\S+$",
        description="Cycle image (default: the operator's setting). The admission policy requires its author may "
        "create pods in the namespace, or that the image is an allowed one (an exact reference, or under an "
        "allowed prefix ending in '/', ':' or '@').",
    )
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = Field(
        default=None, description="Pull policy of the cycle image (default: the operator's setting)."
    )
    resources: ResourceRequirementsSpec | None = Field(
        default=None, description="Compute resources of the cycle's containers (default: requests 50m CPU, 128Mi)."
    )
    security_context: CycleSecurityContext | None = Field(
        default=None,
        description="Identity of the cycle's pod (default: the agent pod's; with no agent pod, the image's user "
        "with an fsGroup of the same id).",
    )
    active_deadline_seconds: int = Field(
        default=3600, ge=60, le=604800, description="A cycle running longer than this is stopped and marked failed."
    )
    successful_jobs_history_limit: int = Field(
        default=3, ge=0, le=100, description="Finished, counted successful Jobs kept (the oldest are deleted)."
    )
    failed_jobs_history_limit: int = Field(
        default=1, ge=0, le=100, description="Finished, counted failed Jobs kept (the oldest are deleted)."
    )
    run_now_token: str | None = Field(
        default=None,
        min_length=1,
        max_length=253,
        description="Set to a new value to run one cycle now (also when suspended); handled once per value.",
    )
    approve_hold: str | None = Field(
        default=None,
        min_length=1,
        max_length=128,
        pattern=r"^[A-Za-z0-9_.:-]+$",
        description="The cycle id of a plan held over the blast-radius cap (condition/Event ArchivesHeld): the next "
        "cycle applies it if the corpus is unchanged (set a new runNowToken to run it now).",
    )


class JobRef(StatusModel):
    """The cycle Job running now."""

    name: str = Field(max_length=63, description="The Job's name.")
    uid: str = Field(max_length=64, description="The Job's uid.")
    trigger: Literal["schedule", "run-now"] = Field(description="What started it: a cron slot or a runNowToken.")
    slot: datetime = Field(description="The slot it runs for (the run-now time for a runNowToken).")
    created_at: datetime | None = Field(default=None, description="When the Job was created.")


class VocabularyState(StatusModel):
    """What the init container found in the volume on the last run, against the CR's rendered file."""

    result: Literal["created", "already-present", "failed"] = Field(description="What seeding did.")
    sha256: str | None = Field(default=None, max_length=64, description="sha256 of the file in the volume.")
    expected_sha256: str | None = Field(default=None, max_length=64, description="sha256 the CR renders to.")
    job_name: str | None = Field(default=None, max_length=63, description="The Job whose init container said so.")
    message: str | None = Field(default=None, max_length=1024, description="What seeding reported.")


def count_fields(*, summed: bool = False) -> dict[str, Any]:
    """The cycle counts a Job's run carries (``summed``: those a schedule adds into its totals, under their
    status.totals keys), as pydantic field definitions — from the one table, ``consolidation/counts.py``."""
    fields: dict[str, Any] = {}
    for count in COUNTS:
        if not (count.summed if summed else count.in_run):
            continue
        if count.state:  # unknown (absent) when the run left no report
            fields[count.name] = (int | None, Field(default=None, ge=0, description=count.description))
            continue
        alias = count.totals_key if summed else None  # None: the camelCase of the name
        fields[count.name] = (int, Field(default=0, ge=0, alias=alias, description=count.description))
    return fields


class RunSummaryBase(StatusModel):
    """The last finished cycle, from its container's termination message."""

    job_name: str = Field(max_length=63, description="The cycle's Job.")
    job_uid: str = Field(max_length=64, alias="jobUID", description="The Job's uid (counted once).")
    trigger: Literal["schedule", "run-now"] = Field(description="What started it: a cron slot or a runNowToken.")
    slot: datetime | None = Field(default=None, description="The slot it ran for.")
    result: Literal["completed", "skipped", "failed", "proposer-failed"] = Field(
        description="completed, skipped, failed, or proposer-failed (the cycle ran; no usable reply from the model)."
    )
    reason: str = Field(max_length=128, pattern=CONDITION_REASON, description="Why, in one CamelCase word.")
    started_at: datetime | None = Field(default=None, description="When the cycle started.")
    first_write_at: datetime | None = Field(
        default=None, description="When the cycle first wrote under memory/ (absent: it wrote nothing)."
    )
    finished_at: datetime | None = Field(default=None, description="When it finished.")
    duration_seconds: float | None = Field(default=None, ge=0, description="How long it took.")
    cycle_id: str | None = Field(
        default=None, max_length=128, description="The cycle's id: its report is .dreamkeeper/cycles/<id>.json."
    )
    skip_reason: str | None = Field(default=None, max_length=1024, description="Why it was skipped.")
    error: str | None = Field(default=None, max_length=1024, description="Why it failed.")


class AgentStop(StatusModel):
    """A Stop in progress; the workload carries the same record in its ``dreamkeeper.io/agent-stop`` annotation."""

    kind: WorkloadKind = Field(description="The stopped workload's kind.")
    name: str = Field(max_length=253, description="The stopped workload's name.")
    replicas: int = Field(ge=0, description="Replicas recorded before the scale-down; restored after the cycle.")
    phase: Literal["Stopping", "CycleRunning", "Restored"] = Field(
        description="Stopping: scaling down, waiting until no pod mounts the claim. CycleRunning: the cycle Job "
        "exists. Restored: the replicas are back; the record is being released."
    )
    stopped_at: datetime = Field(description="When the stop began (the downtime bound counts from here).")
    job_name: str = Field(max_length=63, description="The cycle Job this stop is for.")
    trigger: Literal["schedule", "run-now"] = Field(description="What asked for the cycle.")
    slot: datetime = Field(description="The slot (or the run-now time) of the cycle.")
    run_now_token: str | None = Field(default=None, max_length=253, description="The runNowToken it handles.")
    cycle_started_at: datetime | None = Field(default=None, description="When the cycle Job was created.")
    restored_at: datetime | None = Field(default=None, description="When the replicas were restored.")
    reason: str | None = Field(
        default=None, max_length=128, pattern=CONDITION_REASON, description="Why the stop ended (Restored)."
    )


class AgentStopSummary(StatusModel):
    """The last finished Stop."""

    job_name: str = Field(max_length=63, description="The cycle Job the agent was stopped for.")
    replicas: int = Field(ge=0, description="Replicas restored.")
    stopped_at: datetime = Field(description="When the stop began.")
    restored_at: datetime = Field(description="When the replicas were restored.")
    downtime_seconds: float = Field(ge=0, description="From the scale-down request to the restore.")
    reason: str = Field(max_length=128, pattern=CONDITION_REASON, description="CycleFinished, or why not.")


class AgentRestart(StatusModel):
    """RestartAfter: a restart of the agent's workload after a cycle that changed its files."""

    job_name: str = Field(max_length=63, description="The cycle that changed the files.")
    cycle_started_at: datetime | None = Field(
        default=None, description="When that cycle started (its first write is after this)."
    )
    first_write_at: datetime | None = Field(
        default=None, description="When that cycle first wrote under memory/: the agent's index is stale from then."
    )
    requested_at: datetime = Field(description="The kubectl.kubernetes.io/restartedAt value (once per cycle).")
    restarted_at: datetime | None = Field(default=None, description="When the workload was patched.")
    window_seconds: float | None = Field(
        default=None,
        ge=0,
        description="From the cycle's first write (else its start) to the restart: the agent ran on a stale index.",
    )


class AgentStatus(StatusModel):
    """Coordination with the agent's workload (``spec.agent``)."""

    stop: AgentStop | None = Field(default=None, description="The Stop in progress.")
    last_stop: AgentStopSummary | None = Field(default=None, description="The last finished Stop.")
    pending_restart: AgentRestart | None = Field(default=None, description="RestartAfter: a restart not done yet.")
    last_restart: AgentRestart | None = Field(default=None, description="RestartAfter: the last restart done.")


class TotalsBase(StatusModel):
    """Cumulative counts over every counted cycle (each Job counted exactly once, by UID)."""

    cycles_completed: int = Field(default=0, ge=0, description="Cycles completed.")
    cycles_skipped: int = Field(default=0, ge=0, description="Cycles skipped (too soon, lock held).")
    cycles_failed: int = Field(default=0, ge=0, description="Cycles failed.")
    cycles_proposer_failed: int = Field(
        default=0, ge=0, description="Cycles that ran but got no usable reply from the proposer."
    )
    missed_slots: int = Field(
        default=0, ge=0, description="Slots that passed without a run (operator down, past the deadline)."
    )
    skipped_slots: dict[str, Annotated[int, Field(ge=0)]] = Field(
        default_factory=dict, max_length=16, description="Slots skipped, by reason (suspended, concurrent, ...)."
    )


# The counts are fields of these models, made from the table at import; the type checker knows the bases (code
# here reads counts through the table, by name).
if TYPE_CHECKING:
    RunSummary = RunSummaryBase
    Totals = TotalsBase
else:
    RunSummary = create_model(
        "RunSummary", __base__=RunSummaryBase, __module__=__name__, __doc__=RunSummaryBase.__doc__, **count_fields()
    )
    Totals = create_model(
        "Totals", __base__=TotalsBase, __module__=__name__, __doc__=TotalsBase.__doc__, **count_fields(summed=True)
    )


MAX_COUNTED_UIDS = 32


class DreamScheduleStatus(StatusModel):
    """What the operator observed and did."""

    observed_generation: int | None = Field(default=None, ge=0, description="The generation last acted on.")
    conditions: Conditions | None = None
    last_schedule_time: datetime | None = Field(
        default=None, description="The latest slot acted on (run, skipped or missed); the next slot follows it."
    )
    next_schedule_time: datetime | None = Field(default=None, description="The next cron slot.")
    last_run_now_token: str | None = Field(default=None, max_length=253, description="The last runNowToken handled.")
    active_job: JobRef | None = None
    last_run: RunSummary | None = None
    last_successful_time: datetime | None = Field(default=None, description="When a cycle last succeeded.")
    totals: Totals | None = None
    counted_job_uids: list[Annotated[str, Field(max_length=64)]] | None = Field(
        default=None,
        alias="countedJobUIDs",
        max_length=MAX_COUNTED_UIDS,
        description="Recently counted Job UIDs (never counted twice).",
    )
    vocabulary: VocabularyState | None = None
    agent: AgentStatus | None = Field(default=None, description="Coordination with the agent's workload.")


# ---- MemoryVocabulary -------------------------------------------------------------------------------------------

Word = Annotated[str, Field(min_length=1, max_length=128, pattern=WORD)]


class MemoryVocabularySpec(KubeModel):
    """merge-coverage-vocabulary.json for the agents that reference it (seeded once, never overwritten)."""

    extra_common_words: list[Word] = Field(
        default_factory=list, max_length=4096, description="Ordinary words here that are not specifics."
    )
    always_specific_words: list[Word] = Field(
        default_factory=list,
        max_length=4096,
        description="Names that collide with common words (May, Will, Rose); always protected.",
    )
    numeric_exempt_categories: list[Annotated[str, Field(min_length=1, max_length=253, pattern=CATEGORY_PATH)]] = Field(
        default_factory=list, max_length=256, description="Categories whose numbers are incidental."
    )


class MemoryVocabularyStatus(StatusModel):
    """The render and whether it could be published."""

    observed_generation: int | None = Field(default=None, ge=0, description="The generation last rendered.")
    conditions: Conditions | None = None
    sha256: str | None = Field(default=None, max_length=64, description="sha256 of the rendered file.")
    config_map_name: str | None = Field(default=None, max_length=253, description="The ConfigMap holding it.")
    common_words: int | None = Field(default=None, ge=0, description="extraCommonWords after de-duplication.")
    specific_words: int | None = Field(default=None, ge=0, description="alwaysSpecificWords after de-duplication.")
    exempt_categories: int | None = Field(
        default=None, ge=0, description="numericExemptCategories after de-duplication."
    )
