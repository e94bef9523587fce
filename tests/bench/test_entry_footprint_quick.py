"""The entry-footprint bench on its own synthetic corpus, every mode (no timing or size assertions)."""

from __future__ import annotations

import json

import pytest
from bench.entry_footprint import main


@pytest.mark.parametrize("mode", ["scan", "parse", "breakdown"])
def test_entry_footprint_quick(mode: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--quick", "--mode", mode]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["root"].startswith("synthetic (300 entries")
    assert result["mode"] == mode and result["entries"] == 300
    size_key = {"scan": "rssGrowthBytesPerEntry", "parse": "bytesPerEntry", "breakdown": "tracedBytesPerStoredEntry"}
    assert result[size_key[mode]] >= 0
