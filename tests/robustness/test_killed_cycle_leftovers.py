"""A cycle killed mid-write leaves hidden files (issue 16 finding 8: forever, before); the next cycle removes ours,
keeps any version of the agent's it finds among them, and never touches the agent's own temp files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from tests.robustness.conftest import make_agent, run_dream

REPO = Path(__file__).resolve().parents[2]

# The child runs one cycle and SIGKILLs itself at the chosen instant of its n-th guarded write.
CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from dreamkeeper.memory import atomic
    from tests.robustness.conftest import run_dream

    agent, stage, nth = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    seen = [0]

    def hook(at, path):
        if at == stage:
            seen[0] += 1
            if seen[0] == nth:
                os.kill(os.getpid(), signal.SIGKILL)

    with atomic.write_seam(hook):
        run_dream(agent)
    sys.exit("the cycle ended before the chosen write")
    """
)


def _ours(agent: Path) -> list[Path]:
    return [p for p in agent.rglob(".*") if p.name.endswith((".dk-new", ".dk-swap", ".dk-conflict"))]


@pytest.mark.parametrize("stage", ["checked", "swapped"])
def test_the_next_cycle_cleans_what_a_killed_one_left(tmp_path: Path, stage: str) -> None:
    agent = make_agent(tmp_path / "agent", size=120)
    rockbot_temp = agent / "memory" / "notes" / f".abcdef000001.json.{uuid.uuid4().hex}.tmp"
    rockbot_temp.parent.mkdir(exist_ok=True)
    rockbot_temp.write_text("the agent's own temp, maybe in flight")
    killed = subprocess.run(
        [sys.executable, "-c", CHILD, str(agent), stage, "7"], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    left = _ours(agent)
    assert left, "the kill left nothing to clean: the test would prove nothing"
    report = run_dream(agent).report  # type: ignore[attr-defined]
    assert report.result == "completed"
    assert report.temps_removed == len(left)
    assert report.conflict_copies == 0  # nobody else wrote: what the swap displaced was ours to replace
    assert _ours(agent) == []
    assert rockbot_temp.read_text() == "the agent's own temp, maybe in flight"


def test_a_killed_write_that_displaced_the_agent_keeps_its_version(tmp_path: Path) -> None:
    """Killed between a swap and its check, after the agent wrote: the agent's version is its newest, and goes back
    in place (issue 22: it used to be kept in a hidden conflict copy, with our older one live)."""
    from dreamkeeper.memory import atomic as atomic_module
    from tests.robustness.conftest import Killed

    agent = make_agent(tmp_path / "agent", size=60)
    written: list[bytes] = []

    def hook(stage: str, path: Path) -> None:
        if stage == "checked" and not written:
            obj = json.loads(path.read_text())
            obj["content"] += " (the agent added this)"
            temp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
            temp.write_text(json.dumps(obj))
            os.replace(temp, path)  # RockBot's SaveAsync, just before our swap
            written.append(path.read_bytes())
        elif stage == "swapped" and written:
            raise Killed

    with atomic_module.write_seam(hook), pytest.raises(Killed):
        run_dream(agent)
    report = run_dream(agent).report  # type: ignore[attr-defined]
    assert report.conflict_copies == 0
    (note,) = [n for n in report.notes if n.startswith("put back the agent's newer version")]
    target = Path(note.rsplit(": ", 1)[1])
    obj = json.loads(target.read_text())
    assert obj["content"] == json.loads(written[0])["content"]  # the agent's text is live
