"""Benchmarks and evaluations: `python -m bench <name> [options]`; results go to bench/results/."""
