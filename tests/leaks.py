"""What would betray memory content in a log: used by the redaction tests (CLI and real control plane)."""

from __future__ import annotations

import json
from pathlib import Path

from dreamkeeper.coverage import extract_specifics


def content_probes(agent_dir: Path) -> set[str]:
    """Every three consecutive words of every entry on the volume, and its names, emails and numbers (the
    specifics of five characters or more that hold a letter: a bare year would match any timestamp)."""
    probes: set[str] = set()
    for path in (agent_dir / "memory").rglob("*.json"):
        try:
            entry = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("content"), str):
            continue
        words = entry["content"].split()
        probes.update(" ".join(words[i : i + 3]) for i in range(len(words) - 2))
        for specific in extract_specifics(entry["content"], entry.get("category")):
            if len(specific.text) >= 5 and any(c.isalpha() for c in specific.text):
                probes.add(specific.text)
    return probes
