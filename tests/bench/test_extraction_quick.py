"""The extraction bench's quick mode end to end (no timing assertions: the slope lives in bench/results)."""

from __future__ import annotations

from bench.extraction import SHAPES, run


def test_extraction_bench_measures_every_shape() -> None:
    results = run(1, 4, 1, {name: SHAPES[name] for name in ("prose", "email-ish a@a.", "phone groups 555-0199 ")})
    assert set(results) == {"prose", "email-ish a@a.", "phone groups 555-0199 "}
    for value in results.values():
        assert isinstance(value, dict)
        assert value["lengths"] == [1024, 2048, 4096]
        assert len(value["seconds"]) == 3 and all(t > 0 for t in value["seconds"])
        assert isinstance(value["slope"], float)
