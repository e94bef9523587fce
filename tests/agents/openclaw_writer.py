"""An OpenClaw agent session writing its memory while cycles run (test infrastructure).

    python -m tests.agents.openclaw_writer WORKSPACE LEDGER SECONDS SEED [--caching] [--hostile]

What OpenClaw's agent does to its memory files during a session (docs/concepts/memory.md @57f06f9; the npm package
2026.9.6): the model writes with its file tools. Day-to-day notes are *appended* to today's
``memory/YYYY-MM-DD.md``; durable facts are added to ``MEMORY.md``, which the session loaded at its start.

* default: each note is appended to today's daily note (``open(..., "a")``), and now and then a fact is added to
  ``MEMORY.md`` the way an edit tool does it (read the file as it is now, add a bullet under ``## People``, write it
  back through a temp file and a rename);
* ``--caching``: ``MEMORY.md`` is written from the copy the session loaded at its start plus its new bullets (the
  model's ``write`` tool with the file from its context): whatever changed on disk since the session began is
  written over. This is what OpenClaw's sessions really risk (openclaw#67912: notes overwritten);
* ``--hostile``: caching, ten times as often, and the daily note rewritten from its cache too.

Every write is appended to LEDGER (JSONL) after it landed: ``{"file", "line", "at"}`` for each line it added.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from pathlib import Path


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _add_under_people(text: str, line: str) -> str:
    marker = "## People\n\n"
    if marker in text:
        at = text.index(marker) + len(marker)
        return text[:at] + line + "\n" + text[at:]
    return text.rstrip("\n") + "\n\n## People\n\n" + line + "\n"


def run(workspace: Path, ledger: Path, seconds: float, seed: int, caching: bool, hostile: bool) -> int:
    rng = random.Random(seed)
    memory = workspace / "MEMORY.md"
    today = workspace / "memory" / "2026-12-02.md"
    cached_memory = memory.read_text(encoding="utf-8")  # the session's start: what it loaded
    cached_day = today.read_text(encoding="utf-8") if today.exists() else "# 2026-12-02\n\n"
    pause = (0.01, 0.05) if hostile else (0.05, 0.3)
    deadline = time.monotonic() + seconds
    n = 0
    with open(ledger, "a", encoding="utf-8") as out:
        while time.monotonic() < deadline:
            n += 1
            note = f"- [ow-{seed}-{n}] Call with vendor {rng.randrange(1000):03d} about invoice INV-{seed}{n:04d}."
            if hostile:
                cached_day += note + "\n"
                _write(today, cached_day)
            else:
                with open(today, "a", encoding="utf-8") as handle:
                    if handle.tell() == 0:
                        handle.write("# 2026-12-02\n\n")
                    handle.write(note + "\n")
            out.write(json.dumps({"file": "memory/2026-12-02.md", "line": note, "at": time.time()}) + "\n")
            if n % 3 == 0:
                hour = rng.randrange(9, 18)
                fact = f"- [ow-{seed}-{n}] Contact {n} prefers calls after {hour}:00 (account ACC-{n:05d})."
                if caching or hostile:
                    cached_memory = _add_under_people(cached_memory, fact)
                    _write(memory, cached_memory)
                else:
                    _write(memory, _add_under_people(memory.read_text(encoding="utf-8"), fact))
                out.write(json.dumps({"file": "MEMORY.md", "line": fact, "at": time.time()}) + "\n")
            out.flush()
            time.sleep(rng.uniform(*pause))
    return n


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("workspace", type=Path)
    parser.add_argument("ledger", type=Path)
    parser.add_argument("seconds", type=float)
    parser.add_argument("seed", type=int)
    parser.add_argument("--caching", action="store_true")
    parser.add_argument("--hostile", action="store_true")
    args = parser.parse_args()
    run(args.workspace, args.ledger, args.seconds, args.seed, args.caching, args.hostile)


if __name__ == "__main__":
    main()
