"""The agent keeps writing while a cycle runs: its writes are never lost or overwritten."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from dreamkeeper.consolidation.cycle import CycleOptions, run_cycle
from dreamkeeper.consolidation.proposal import Batch, Proposal, ProposalRequest
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.proposers import ScriptedProposer
from tests.consolidation.corpus import Seed, write_corpus

N = 120

# A stand-in for the agent: rewrites entries atomically (temp + rename, like RockBot), recording what it wrote last.
WRITER = textwrap.dedent(
    """
    import json, os, random, sys, time
    from pathlib import Path
    root, stop_file, log_file = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    rng = random.Random(int(sys.argv[4]))
    last = {}
    version = 0
    while not stop_file.exists():
        version += 1
        i = 2 * rng.randrange(int(sys.argv[5]) // 2)  # even entries only: odd ones are never raced
        path = root / "notes" / f"e{i:03d}.json"
        obj = json.loads(path.read_text())
        obj["content"] = f"Entry {i} rewritten by the agent, version {version}."
        obj["reinforcementCount"] = obj.get("reinforcementCount", 1) + 1
        tmp = path.with_name(f".{path.name}.agent.tmp")
        tmp.write_text(json.dumps(obj, indent=2))
        os.replace(tmp, path)
        last[path.stem] = obj["content"]
        time.sleep(0.0005)
    log_file.write_text(json.dumps(last))
    """
)


class RacedScript:
    """Archives every offered entry, but only answers once the agent has rewritten one of them since the
    snapshot: the race is then certain, not a matter of scheduling luck on a loaded machine."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def __call__(self, batch: Batch, request: ProposalRequest) -> Proposal:
        seen = {o.entry.id: o.entry.content for o in batch.entries}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            raced = [
                i for i in seen if json.loads((self.root / "notes" / f"{i}.json").read_text())["content"] != seen[i]
            ]
            if raced:
                break
            time.sleep(0.01)
        time.sleep(0.1)  # let the agent keep writing while we "think"
        return Proposal(to_delete=list(seen))


def test_entries_rewritten_during_a_cycle_are_never_lost(tmp_path: Path) -> None:
    for round_ in range(3):
        agent = tmp_path / f"agent{round_}"
        store = write_corpus(agent, [Seed(f"e{i:03d}", f"Entry {i} original text.", "notes", 0.1) for i in range(N)])
        stop, log = agent / "stop", agent / "writer.json"
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(agent / "memory"), str(stop), str(log), str(round_), str(N)]
        )
        try:
            time.sleep(0.05)
            options = CycleOptions(
                agent_dir=agent,
                settings=CycleSettings(min_interval_hours=0, batch_max_entries=N, exact_fold=False, archive_cap=1.0),
            )
            outcome = asyncio.run(run_cycle(options, ScriptedProposer(RacedScript(agent / "memory"))))
        finally:
            stop.touch()
            writer.wait(timeout=30)
        last_written = json.loads(log.read_text())
        assert last_written, "the writer did not race the cycle"
        scan = store.scan()
        assert not scan.malformed
        by_id = {s.id: s.entry for s in scan.entries}
        assert len(by_id) == N
        for entry_id, content in last_written.items():
            # The cycle never rewrites content, and never archives over a write it did not see.
            assert by_id[entry_id].content == content
        # The race happened: archives of rewritten entries were refused as conflicts; the never-raced odd entries
        # (low importance, unchanged) were archived.
        assert outcome.report.conflicts >= 1
        odd = [f"e{i:03d}" for i in range(1, N, 2)]
        assert all(by_id[i].is_archived for i in odd)
        assert outcome.report.ephemeral >= len(odd)
        assert outcome.report.conflicts + outcome.report.ephemeral + outcome.report.protected <= N
