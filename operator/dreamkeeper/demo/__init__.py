"""The sample agent for ``make demo``, tests and benches: a deterministic RockBot-shaped agent directory.

Demo code, not runtime: nothing in memory/, coverage/, consolidation/, proposers/ or kube/ imports it; only the
root CLI registers its ``dreamkeeper sample`` command. It sits above memory and coverage (it writes their file
formats with their own fingerprints and file names). The invented world is data (``data/world.yaml``), the
bundled default sample is ``data/sample-agent``.
"""
