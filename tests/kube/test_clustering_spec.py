"""``spec.safeguards.specificsLinks`` and ``offerNewClusters`` (issue 23): the two clustering settings that made the
sample's families meet reach the cycle from the DreamSchedule, so a user can turn either back to RockBot's rule."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from dreamkeeper.consolidation.settings import CycleSettings
from tests.kube.test_embeddings_spec import dream_container, settings_of, spec
from tests.kube.test_jobspec import job


def _cycle_settings(safeguards: dict[str, Any]) -> CycleSettings:
    container = dream_container(job({"safeguards": safeguards}))
    return CycleSettings.model_validate({k: v for k, v in settings_of(container).items() if k != "proposer"})


def test_unset_they_keep_the_engine_s_defaults() -> None:
    container = dream_container(job({"safeguards": {"minIntervalHours": 6}}))
    data = settings_of(container)
    assert "specifics_links" not in data and "offer_new_clusters" not in data
    defaults = CycleSettings()
    settings = _cycle_settings({"minIntervalHours": 6})
    assert (settings.specifics_links, settings.offer_new_clusters) == (defaults.specifics_links, True)


@pytest.mark.parametrize("links", [0, 0.7, 1])
def test_rockbot_s_rules_can_be_asked_for(links: float) -> None:
    # 0 and 1 arrive from YAML/JSON as integers: the strict settings model must still take them.
    settings = _cycle_settings({"specificsLinks": links, "offerNewClusters": False})
    assert settings.specifics_links == links
    assert settings.offer_new_clusters is False


@pytest.mark.parametrize(("field", "value"), [("specificsLinks", 1.5), ("specificsLinks", -0.1)])
def test_an_out_of_range_value_is_refused_with_its_name(field: str, value: float) -> None:
    with pytest.raises(ValidationError, match=r"less than or equal to 1|greater than or equal to 0"):
        spec(safeguards={field: value})
