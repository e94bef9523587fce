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
        i = rng.randrange(int(sys.argv[5]))
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


class SlowScript:
    """Archives every offered entry (as prunes) but thinks for a while first, so the agent races the cycle."""

    def __call__(self, batch: Batch, request: ProposalRequest) -> Proposal:
        time.sleep(0.4)
        return Proposal(to_delete=[o.entry.id for o in batch.entries])


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
                settings=CycleSettings(min_interval_hours=0, batch_max_entries=N, exact_fold=False),
            )
            outcome = asyncio.run(run_cycle(options, ScriptedProposer(SlowScript())))
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
        # The race happened: some archives were refused as conflicts, the rest went through.
        assert outcome.report.ephemeral >= 1
        assert outcome.report.conflicts >= 1
        assert outcome.report.conflicts + outcome.report.ephemeral + outcome.report.protected <= N
