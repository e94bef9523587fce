"""Tests of the benchmark pipelines (quick modes only; no timing assertions)."""
