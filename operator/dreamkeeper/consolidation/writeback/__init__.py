"""Stale write-back repair: an agent's cached copies written back over what earlier cycles did are recognised from
the journals and repaired (``repair.py``), in the engine, so every coordination policy and agents outside
Kubernetes are protected. The index of what cycles did (``records.py``) is a cache of the journals
(``ingest.py``), kept in the state directory."""

import logging
from datetime import datetime
from pathlib import Path

from dreamkeeper.consolidation.writeback.ingest import catch_up, forget, ingest, window_start
from dreamkeeper.consolidation.writeback.records import WriteBackIndex, index_path
from dreamkeeper.consolidation.writeback.repair import RepairPlan, plan_repairs
from dreamkeeper.memory import ScanResult

log = logging.getLogger(__name__)


def plan_from_journals(
    agent_dir: Path, scan: ScanResult, now: datetime, since: datetime
) -> tuple[WriteBackIndex, RepairPlan]:
    """The index (loaded, caught up with the journals since ``since``) and the repair of ``scan`` against it. An
    index that is not what this code wrote (hand-edited, another version) is rebuilt from the journals."""
    index = WriteBackIndex.load(agent_dir)
    try:
        catch_up(index, agent_dir, since)
        return index, plan_repairs(index, scan, now)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        log.warning("%s is not a write-back index (%s: %s); rebuilt from the journals", index_path(agent_dir),
                    type(exc).__name__, exc)  # fmt: skip
        index = WriteBackIndex()
        index.changed = True
        catch_up(index, agent_dir, since)
        return index, plan_repairs(index, scan, now)


__all__ = [
    "RepairPlan",
    "WriteBackIndex",
    "catch_up",
    "forget",
    "index_path",
    "ingest",
    "plan_from_journals",
    "plan_repairs",
    "window_start",
]
