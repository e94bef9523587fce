"""Stale write-back repair: an agent's cached copies written back over what earlier cycles did are recognised from
the journals and repaired (``repair.py``), in the engine, so every coordination policy and agents outside
Kubernetes are protected. The index of what cycles did (``records.py``) is a cache of the journals
(``ingest.py``), kept in the state directory."""

from dreamkeeper.consolidation.writeback.ingest import catch_up, forget, ingest, window_start
from dreamkeeper.consolidation.writeback.records import WriteBackIndex, index_path
from dreamkeeper.consolidation.writeback.repair import RepairPlan, plan_repairs

__all__ = [
    "RepairPlan",
    "WriteBackIndex",
    "catch_up",
    "forget",
    "index_path",
    "ingest",
    "plan_repairs",
    "window_start",
]
