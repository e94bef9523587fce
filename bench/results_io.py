"""A bench result as committed: ``NAME.json`` (the raw numbers) and ``NAME.md`` (the reading, with its command)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any


def write_result(out: Path, name: str, result: dict[str, Any], markdown: Callable[[dict[str, Any]], str]) -> Path:
    """Both files under ``out``; returns the Markdown's path (printed, so the run says where its reading is)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    md_path = out / f"{name}.md"
    md_path.write_text(markdown(result), encoding="utf-8")
    print(f"wrote {out / (name + '.json')}\nwrote {md_path}")
    return md_path
