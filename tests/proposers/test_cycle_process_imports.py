"""What a cycle process loads: every cycle the operator runs is a fresh ``dreamkeeper dream`` process.

``openai`` is loaded only by a cycle that talks to a model or an embeddings server (it was about half of a cycle
process's imports: bench/results/cycle-start-s24.md), and ``dreamkeeper dream`` registers its own command alone,
not every other command's module (the demo's sample world among them); anything else registers them all. Every
``dreamkeeper`` process runs one OpenBLAS thread unless its caller chose (cli.py), and a cycle the cluster cache serves
loads no numpy at all (bench/results/cycle-start-s25.md).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from dreamkeeper.consolidation import EmbeddingError
from dreamkeeper.proposers import EmbeddingsConfig, OpenAIEmbedder

SAMPLE = Path(__file__).resolve().parents[2] / "operator" / "dreamkeeper" / "demo" / "data" / "sample-agent"

_PROBE = """
import json, sys
from dreamkeeper.cli import main
sys.argv = ["dreamkeeper", *sys.argv[1:]]
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
import os
print(json.dumps({"code": code, "openai": sorted(m for m in sys.modules if m == "openai" or m.startswith("openai.")),
                  "dreamkeeper": sorted(m for m in sys.modules if m.startswith("dreamkeeper.")),
                  "numpy": "numpy" in sys.modules, "threads": len(os.listdir("/proc/self/task")),
                  "blas": {k: v for k, v in os.environ.items() if k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}}),
      file=sys.stderr)
"""


def _dream(
    tmp_path: Path, *flags: str, before: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> dict[str, object]:
    agent = tmp_path / "agent"
    shutil.copytree(SAMPLE, agent)
    return _cli(*before, "dream", str(agent), "--force", "--json", *flags, env=env)


def _cli(*args: str, env: dict[str, str] | None = None) -> dict[str, object]:
    # The thread variables OpenBLAS reads, as the caller gives them (none by default: a Job's environment).
    base = {
        k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
    }
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**base, **(env or {})},
    )
    result: dict[str, object] = json.loads(done.stderr.strip().splitlines()[-1])
    out = done.stdout.strip()
    result["report"] = json.loads(out) if out.startswith("{") else None
    return result


def test_an_offline_cycle_never_loads_openai(tmp_path: Path) -> None:
    result = _dream(tmp_path)
    assert result["code"] == 0
    report = result["report"]
    assert isinstance(report, dict) and report["result"] == "completed"
    assert result["openai"] == []


def test_dream_registers_its_own_command_alone_and_anything_else_registers_every_command(tmp_path: Path) -> None:
    alone = _dream(tmp_path / "alone")
    loaded = alone["dreamkeeper"]
    assert isinstance(loaded, list) and "dreamkeeper.dream_command" in loaded
    assert "dreamkeeper.demo.cli" not in loaded and "dreamkeeper.kube.cli" not in loaded
    # A root option before the command: every command registered, and the cycle runs all the same.
    quiet = _dream(tmp_path / "quiet", before=("-q",))
    assert quiet["code"] == 0 and isinstance(quiet["report"], dict) and quiet["report"]["result"] == "completed"
    assert isinstance(quiet["dreamkeeper"], list) and "dreamkeeper.demo.cli" in quiet["dreamkeeper"]
    # Another command finds its own (the demo's ``sample``): registered by the full path.
    sample = _cli("sample", str(tmp_path / "sample"), "--json")
    assert sample["code"] == 0 and isinstance(sample["report"], dict) and sample["report"]["entries"] == 300


def test_seed_vocabulary_registers_its_own_command_alone_and_seeds_without_overwriting(tmp_path: Path) -> None:
    source, destination = tmp_path / "rendered.json", tmp_path / "agent" / "merge-coverage-vocabulary.json"
    source.write_text('{"commonWords": ["kubelet"]}', encoding="utf-8")
    destination.parent.mkdir()
    first = _cli("seed-vocabulary", "--source", str(source), "--destination", str(destination))
    assert first["code"] == 0 and destination.read_bytes() == source.read_bytes()
    loaded = first["dreamkeeper"]
    assert isinstance(loaded, list) and "dreamkeeper.kube.cli" in loaded
    assert "dreamkeeper.dream_command" not in loaded and "dreamkeeper.consolidation.cycle" not in loaded
    source.write_text('{"commonWords": ["other"]}', encoding="utf-8")
    again = _cli("seed-vocabulary", "--source", str(source), "--destination", str(destination))
    assert again["code"] == 0 and "kubelet" in destination.read_text(encoding="utf-8")  # never overwritten


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again on exit: nothing listens there


def test_a_cycle_with_embeddings_loads_openai_and_says_when_the_server_is_unreachable(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    result = _dream(tmp_path, "--embeddings-url", url, "--embeddings-model", "e5-small")
    loaded = result["openai"]
    assert (
        isinstance(loaded, list) and "openai" in loaded
    )  # the client was made: the import happened where it is needed
    report = result["report"]
    assert isinstance(report, dict) and report["result"] == "completed"  # Jaccard instead, as RockBot after a failure
    assert url in json.dumps(report)  # the report names the endpoint that failed


def test_the_embedder_turns_a_client_error_into_an_embedding_error() -> None:
    config = EmbeddingsConfig(base_url=f"http://127.0.0.1:{_closed_port()}/v1", model="e5-small", max_retries=0)
    embedder = OpenAIEmbedder(config)

    async def embed() -> None:
        try:
            await embedder.embed(["a text"])
        finally:
            await embedder.aclose()

    with pytest.raises(EmbeddingError, match=r"127\.0\.0\.1.*APIConnectionError"):
        asyncio.run(embed())


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc (Linux)")
def test_a_cycle_process_runs_one_blas_thread_unless_told_otherwise(tmp_path: Path) -> None:
    # numpy's OpenBLAS starts a worker per CPU as it is imported, each spinning ~0.1 s of CPU (cli.py says why).
    cpus = len(os.sched_getaffinity(0))
    plain = _dream(tmp_path / "plain")
    assert plain["code"] == 0 and plain["numpy"] is True  # the cycle did load numpy
    assert plain["blas"] == {"OPENBLAS_NUM_THREADS": "1"}
    assert plain["threads"] == 1  # the main thread alone: no BLAS pool (2 on this 2-CPU machine before)
    # A number chosen by whoever runs the process is kept, through either variable OpenBLAS reads.
    chosen = _dream(tmp_path / "chosen", env={"OPENBLAS_NUM_THREADS": "2"})
    assert chosen["code"] == 0 and chosen["blas"] == {"OPENBLAS_NUM_THREADS": "2"}
    omp = _dream(tmp_path / "omp", env={"OMP_NUM_THREADS": "2"})
    assert omp["code"] == 0 and omp["blas"] == {"OMP_NUM_THREADS": "2"}
    if cpus >= 2:  # OpenBLAS never starts more workers than CPUs: with one, both would be 1
        assert chosen["threads"] == 2 and omp["threads"] == 2


_TOPICS = (
    "Jordan rotates the backup drives on the first Sunday of each month",
    "The kitchen faucet washer was replaced with a ceramic cartridge",
    "Priya prefers standups at nine thirty on Tuesdays",
    "The VPN certificate for vpn-gw-3 expires in March",
    "Marlowe the cat needs thyroid pills twice daily",
    "Quarterly taxes go to the accountant Ellison by the fifteenth",
    "Sourdough starter lives on the second fridge shelf",
    "Kestrel deployment uses the blue-green strategy behind Envoy",
    "Grandma's birthday dinner is at Osteria Lupa every October",
    "The garage door opener battery is a CR2032",
)


def _settled_agent(root: Path) -> Path:
    """An agent whose entries are alike in nothing (no cluster to offer) and past decay's grace period, not yet at
    its floor: every cycle lowers each one a little (RockBot's default: every drop written)."""
    memory = root / "memory" / "notes"
    memory.mkdir(parents=True)
    seen = (datetime.now(UTC) - timedelta(days=40)).isoformat()  # 10 days past RockBot's 30-day grace
    for number, content in enumerate(_TOPICS):
        entry = {
            "id": f"note{number:02d}",
            "content": content,
            "category": "notes",
            "tags": [],
            "createdAt": seen,
            "updatedAt": seen,
            "lastSeenAt": seen,
            "reinforcementCount": 1,
            "importanceScore": 0.6,
        }
        (memory / f"note{number:02d}.json").write_text(json.dumps(entry, indent=2), encoding="utf-8")
    return root


def test_a_steady_cycle_process_never_loads_numpy(tmp_path: Path) -> None:
    # numpy was ~0.08 s of a cycle process's CPU (more with OpenBLAS's workers): a cycle whose clusters come from
    # the cluster cache scans nothing, and decay's float32 is memory/float32.py's.
    agent = _settled_agent(tmp_path / "agent")
    first = _cli("dream", str(agent), "--force", "--json")
    assert first["code"] == 0 and first["numpy"] is True  # the first cycle scans for clusters (and caches them)
    # Later, as the next cycle is: past the corpus index's racy window (its files are trusted, not read again), and
    # every entry decays by a few float32 steps more (a 45-day half-life: ~2e-7 of its importance a second).
    time.sleep(2.5)
    steady = _cli("dream", str(agent), "--force", "--json")
    report = steady["report"]
    assert steady["code"] == 0 and isinstance(report, dict) and report["result"] == "completed"
    assert report["decayed"] == len(_TOPICS)  # decay wrote every entry again, its float32 text made without numpy
    assert steady["numpy"] is False
    for number in range(len(_TOPICS)):  # what it wrote is the float32 text numpy writes
        written = json.loads((agent / "memory" / "notes" / f"note{number:02d}.json").read_text(encoding="utf-8"))
        importance = written["importanceScore"]
        assert 0.1 < importance < 0.6 and repr(importance) == str(np.float32(importance))
