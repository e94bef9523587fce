"""The year beside RockBot's audit (bench/audit_year.py), quick mode: 20 cycles with a 3-day retention, so
RockBot's purge, dreamkeeper's purge and the audit's purge accounting all run (issue 24 item 1)."""

from __future__ import annotations

import json
from pathlib import Path

from bench.audit_year import main


def test_beside_rockbot_s_documented_settings_the_audit_raises_no_alert(tmp_path: Path) -> None:
    assert main(["--quick", "--settings", "after", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "audit-year-after.json").read_text(encoding="utf-8"))
    total = result["total"]
    assert total["audits"] > 20 and total["alerts"] == 0 and result["pauseMarkerWrittenAt"] is None
    assert total["purged"] > 0  # purges happened, and the audit counted every one as a purge
    assert total["hard_deleted_outside_purge"] == 0 and total["paused_cycles"] == 0
    assert total["rockbot_deleted_kept"] == 0 and total["specifics_left_store"] == 0
    assert (tmp_path / "audit-year-after.md").read_text(encoding="utf-8").count("| Q") == 4


def test_with_rockbot_s_retention_at_zero_dreamkeeper_purges_nothing_rather_than_alert(tmp_path: Path) -> None:
    """The settings docs/rockbot.md gave before issue 24: RockBot's audit would count every purge as a hard delete,
    so the purge waits (and says why in each report) instead."""
    assert main(["--quick", "--settings", "before", "--out", str(tmp_path)]) == 0
    total = json.loads((tmp_path / "audit-year-before.json").read_text(encoding="utf-8"))["total"]
    assert total["alerts"] == 0 and total["dk_purged"] == 0 and total["hard_deleted_outside_purge"] == 0
