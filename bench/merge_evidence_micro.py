"""A merge's required specifics, side by side (issue 27, session 10): the cost `coverage.required_specifics` adds
once every source's analysis is memoised (as subsumption leaves it), i.e. the lowercase evidence of the merge.

    python bench/merge_evidence_micro.py MEMORY_DIR   # run once per tree: PYTHONPATH=<tree>/operator

Every pair `specifics_links` links at 0.5 is taken as a two-source merge (the validation and offline proposer
shape); prints the least CPU seconds of 5 runs and the number of specifics found (equal across trees).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import dreamkeeper
from dreamkeeper.consolidation.clustering.model import ClusterItem
from dreamkeeper.consolidation.clustering.specifics_links import specifics_links
from dreamkeeper.coverage import SourceText, extract_specifics, required_specifics
from dreamkeeper.memory import MemoryStore


def main(memory: Path) -> None:
    scan = MemoryStore(memory).scan()
    items = [ClusterItem(s.id, s.entry.content, s.entry.category, None) for s in scan.entries]
    links = specifics_links(items, 0.5)
    groups = [
        [SourceText(items[a].content, items[a].category), SourceText(items[b].content, items[b].category)]
        for a, b, _ in links
    ]
    for item in items:
        extract_specifics(item.content, item.category)  # every analysis memoised, as subsumption leaves them
    best = float("inf")
    found = 0
    for _ in range(5):
        started = time.process_time()
        found = sum(len(required_specifics(group)) for group in groups)
        best = min(best, time.process_time() - started)
    print(f"{dreamkeeper.__file__}: required_specifics x{len(groups)} {best:.3f} CPU s, {found} specifics")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
