"""Strict settings everywhere (issue 16 finding 2, and the overflows of finding 7): the cycle's settings, the
proposer's, and the DreamSchedule's safeguards refuse a boolean or a string for a number, anything infinite, and
every value past its bound, so that no date arithmetic can overflow once a cycle has started."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from dreamkeeper.consolidation import CycleSettings
from dreamkeeper.kube.models import DreamScheduleSpec
from dreamkeeper.memory import utcnow
from dreamkeeper.proposers import ProposerConfig

LAX = [True, False, "1", "90", 1e400, float("inf"), float("nan"), None, [1], {"days": 1}]


@pytest.mark.parametrize("value", LAX, ids=repr)
@pytest.mark.parametrize(
    "field",
    [
        "retention_days",
        "similarity_threshold",
        "max_cluster_size",
        "min_interval_hours",
        "repair_max_per_cycle",
        "reopen_interval_days",
        "reopen_max_interval_days",
        "reopen_max_per_cycle",
        "batch_max_entries",
    ],
)
def test_cycle_settings_refuse_what_is_not_a_number(field: str, value: Any) -> None:
    with pytest.raises(ValidationError):
        CycleSettings.model_validate({field: value})


@pytest.mark.parametrize("value", [1, "true", 0.0])
def test_booleans_are_booleans(value: Any) -> None:
    for field in ("exact_fold", "same_category_clusters"):
        with pytest.raises(ValidationError):
            CycleSettings.model_validate({field: value})


def test_every_duration_and_count_is_bounded_so_nothing_overflows() -> None:
    """At their bounds, the durations still make dates (finding 7: retention 999999999 and reopen Infinity
    overflowed in the middle of a cycle, after the purge had run)."""
    top = CycleSettings(
        retention_days=36_500, min_interval_hours=8_760, reopen_interval_days=36_500, reopen_max_interval_days=36_500
    )
    now = utcnow()
    assert top.retention is not None and now - top.retention < now
    assert now - top.min_interval < now and now + timedelta(days=top.reopen_max_interval_days) > now
    for field, past in (("retention_days", 36_501), ("min_interval_hours", 8_761), ("reopen_interval_days", 36_501)):
        with pytest.raises(ValidationError):
            CycleSettings.model_validate({field: past})


@pytest.mark.parametrize("floor", [{"importance": True}, {"importance": "0.8"}, {"reinforcement": 1.0}, []])
def test_the_floor_is_strict(floor: Any) -> None:
    with pytest.raises(ValidationError):
        CycleSettings.model_validate({"floor": floor})


@pytest.mark.parametrize(
    "section",
    [{"timeout": "120"}, {"timeout": True}, {"timeout": float("inf")}, {"concurrency": 1.0}, {"offer_singletons": 1}],
)
def test_the_proposer_section_is_strict(section: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ProposerConfig.model_validate(section)


def test_a_price_file_path_may_still_be_a_string() -> None:
    assert ProposerConfig.model_validate({"price_file": None}).price_file is None


def _spec(**fields: Any) -> dict[str, Any]:
    return {"schedule": "0 3 * * *", "claimName": "agent-data", **fields}


@pytest.mark.parametrize(
    "safeguards",
    [
        {"retentionDays": True},
        {"retentionDays": "1"},
        {"retentionDays": 1.5},
        {"similarityThreshold": "0.9"},
        {"minIntervalHours": True},
        {"floor": {"importance": True}},
        {"floor": {"reinforcement": "5"}},
    ],
)
def test_the_dreamschedule_safeguards_are_strict(safeguards: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        DreamScheduleSpec.model_validate(_spec(safeguards=safeguards))


@pytest.mark.parametrize("proposer", [{"type": "openai", "model": "m", "timeoutSeconds": "5"}, {"tokenBudget": True}])
def test_the_dreamschedule_proposer_is_strict(proposer: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        DreamScheduleSpec.model_validate(_spec(proposer=proposer))


def test_a_valid_dreamschedule_still_validates() -> None:
    spec = DreamScheduleSpec.model_validate(
        _spec(safeguards={"retentionDays": 30, "minIntervalHours": 6, "floor": {"importance": 0.9}})
    )
    assert spec.safeguards is not None and spec.safeguards.retention_days == 30
