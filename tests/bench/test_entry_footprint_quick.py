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
    if mode == "scan":
        # The process's RSS before and after the scan, in the test process: 300 entries grow it by ~0.3 MB, and the
        # allocator may hand back more than that from earlier tests meanwhile (seen: -3.7 MB). Reported, not judged.
        assert isinstance(result["rssGrowthBytesPerEntry"], int) and result["peakRssMiB"] > 0
    else:  # tracemalloc's count of what the parsed entries hold: never negative
        size_key = {"parse": "bytesPerEntry", "breakdown": "tracedBytesPerStoredEntry"}
        assert result[size_key[mode]] > 0
