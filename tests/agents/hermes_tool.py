"""Run inside Hermes Agent's own venv: its memory tool, exactly as the agent calls it (test infrastructure).

    HERMES_HOME=DIR python hermes_tool.py ops       < JSON list of ops   -> JSON list of results
    HERMES_HOME=DIR python hermes_tool.py session   one JSON op a line   -> one JSON result a line
    HERMES_HOME=DIR python hermes_tool.py writer LEDGER SECONDS SEED [--stale]

An op is ``{"op": "load"|"add"|"replace"|"remove"|"snapshot"|"entries", "target": "memory"|"user", ...}``. Each
process is one session: ``MemoryStore.load_from_disk()`` once at start (the frozen system-prompt snapshot), then the
tool's own ``add``/``replace``/``remove`` (which take ``MEMORY.md.lock``, re-read the file and run the drift guard),
as hermes-agent 0.19.0's ``tools/memory_tool.py`` does for the model's tool calls.

``writer`` is a live agent writing during cycles: it adds facts of its own (``[hw-N] ...``), replaces one now and
then, and appends every call and its result to LEDGER (JSONL). ``--stale`` is the hostile, pre-#26045 writer: it
keeps the list it loaded at session start and writes the whole list back with its new fact appended, without the
lock and without re-reading (what "replace overwrote other writers' content" was).
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from typing import Any

from tools.memory_tool import ENTRY_DELIMITER, MemoryStore, load_on_disk_store  # noqa: F401  (the agent's own)


def run_op(store: MemoryStore, op: dict[str, Any]) -> dict[str, Any]:
    kind, target = op.get("op"), op.get("target", "memory")
    if kind == "load":
        store.load_from_disk()
        return {"success": True}
    if kind == "snapshot":
        return {"success": True, "snapshot": store.format_for_system_prompt(target)}
    if kind == "entries":
        return {"success": True, "entries": list(store.memory_entries if target == "memory" else store.user_entries)}
    if kind == "add":
        return dict(store.add(target, op["content"]))
    if kind == "replace":
        return dict(store.replace(target, op["old_text"], op["content"]))
    if kind == "remove":
        return dict(store.remove(target, op["old_text"]))
    return {"success": False, "error": f"unknown op {kind!r}"}


def _store() -> MemoryStore:
    store = MemoryStore()  # the caps the agent uses by default: 2,200 and 1,375 characters
    store.load_from_disk()
    return store


def ops() -> None:
    store = _store()
    print(json.dumps([run_op(store, op) for op in json.load(sys.stdin)]))


def session() -> None:
    store = _store()
    for line in sys.stdin:
        if not line.strip():
            continue
        print(json.dumps(run_op(store, json.loads(line))), flush=True)


def writer(ledger_path: str, seconds: float, seed: int, stale: bool) -> None:
    store = _store()
    cached = list(store.memory_entries)
    rng = random.Random(seed)
    deadline = time.monotonic() + seconds
    n = 0
    with open(ledger_path, "a", encoding="utf-8") as ledger:
        while time.monotonic() < deadline:
            n += 1
            fact = f"[hw-{seed}-{n}] The agent noted fact {n} at {rng.randrange(10**6):06d} in session {seed}."
            if stale:
                cached.append(fact)
                path = os.path.join(os.environ["HERMES_HOME"], "memories", "MEMORY.md")
                tmp = path + f".{os.getpid()}.tmp"
                with open(tmp, "w", encoding="utf-8") as handle:
                    handle.write(ENTRY_DELIMITER.join(cached))
                os.replace(tmp, path)
                result: dict[str, Any] = {"success": True, "stale": True}
            elif n % 5 == 0 and n > 5:
                old = f"[hw-{seed}-{n - 5}]"
                result = dict(store.replace("memory", old, fact))
            else:
                result = dict(store.add("memory", fact))
            ledger.write(json.dumps({"n": n, "fact": fact, "result": result, "at": time.time()}) + "\n")
            ledger.flush()
            time.sleep(rng.uniform(0.02, 0.15))


def main() -> None:
    mode = sys.argv[1]
    if mode == "ops":
        ops()
    elif mode == "session":
        session()
    elif mode == "writer":
        writer(sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), "--stale" in sys.argv[5:])
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
