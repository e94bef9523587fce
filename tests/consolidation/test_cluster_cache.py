"""The cluster cache (consolidation/cluster_cache.py): an unchanged corpus reuses its clusters; any change to what
the clustering reads (an entry, its content or category, its vector, the settings) clusters again, so a cache never
hides a new duplicate; a damaged, planted or racy cache costs a clustering, never a wrong cluster."""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dreamkeeper.consolidation import cluster_cache as cc
from dreamkeeper.consolidation import gating
from dreamkeeper.consolidation.cluster_cache import FORMAT, ClusterCache, cache_path
from dreamkeeper.consolidation.cycle import CycleOptions, run_cycle
from dreamkeeper.consolidation.gating import GatingResult, select_candidates
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.memory import (
    DECLINED_AT,
    DECLINED_CLUSTER,
    DECLINED_COUNT,
    REVIEWED_AT,
    REVIEWED_HASH,
    Entry,
    MemoryStore,
    StoredEntry,
    cluster_hash,
    format_timestamp,
    review_hash,
)
from dreamkeeper.proposers import OfflineProposer
from tests.consolidation.corpus import BASE_TIME, Seed, write_corpus
from tests.parity.test_parity_gating import stored

LATER_NS = 60 * 1_000_000_000
TEXTS = {
    "a1": "Ingrid Ferreira prefers the Signal messenger for quick questions.",
    "a2": "For quick questions, Ingrid Ferreira prefers the Signal messenger!",
    "b1": "The staging database runs PostgreSQL 16 on host db-stage-3.",
    "c1": "Jordan's sister Rose lives in Portland; her birthday is May 14.",
    "d1": "Quarterly planning happens in the second week of January.",
}


def corpus(texts: dict[str, str] | None = None, category: str = "people") -> list[StoredEntry]:
    return [
        stored(Entry(id=i, content=t, category=category, created_at=BASE_TIME, last_seen_at=BASE_TIME))
        for i, t in (texts or TEXTS).items()
    ]


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    real = cc.time.time_ns
    monkeypatch.setattr(cc, "_now_ns", lambda: real() + LATER_NS)  # "the next cycle": files are a minute old
    (tmp_path / "memory" / ".embeddings").mkdir(parents=True)
    return tmp_path


class Counting:
    """``find_clusters`` as gating calls it, counted."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        real = gating.find_clusters

        def counted(*args: object, **kwargs: object) -> object:
            self.calls += 1
            return real(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(gating, "find_clusters", counted)


def gate(agent: Path, live: list[StoredEntry], settings: CycleSettings | None = None, **kw: object) -> GatingResult:
    """One cycle's gating: a fresh cache object (a new process), the store's vectors."""
    store = MemoryStore(agent / "memory")
    cache = ClusterCache(cache_path(agent), store.embeddings_dir, **kw)  # type: ignore[arg-type]
    return select_candidates(live, settings or CycleSettings(), BASE_TIME, store.load_embedding, cache=cache)


def ids(result: GatingResult) -> list[tuple[str, ...]]:
    return [c.ids for c in result.all_clusters]


def test_an_unchanged_corpus_reuses_its_clusters(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counting = Counting(monkeypatch)
    first = gate(agent, corpus())
    assert ids(first) == [("a1", "a2")] and counting.calls == 1
    assert cache_path(agent).is_file()
    again = gate(agent, corpus())
    assert counting.calls == 1  # taken from the cache
    assert ids(again) == ids(first) and [c.component for c in again.all_clusters] == [0]
    assert set(again.items) == {"a1", "a2"}  # what subsumption compares is there for the clustered entries
    assert [s.id for s in again.eligible] == [s.id for s in first.eligible]


def test_a_new_duplicate_is_clustered(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counting = Counting(monkeypatch)
    gate(agent, corpus())
    added = corpus({**TEXTS, "b2": "On host db-stage-3 the staging database runs PostgreSQL 16!"})
    assert ids(gate(agent, added)) == [("a1", "a2"), ("b1", "b2")]
    assert counting.calls == 2


def test_an_entry_edited_into_a_duplicate_is_clustered(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counting = Counting(monkeypatch)
    gate(agent, corpus())
    edited = corpus({**TEXTS, "d1": "Rose (Jordan's sister) lives in Portland, her birthday is May 14!"})
    assert ids(gate(agent, edited)) == [("a1", "a2"), ("c1", "d1")]
    assert counting.calls == 2


def test_a_removed_entry_and_a_category_and_settings_change_cluster_again(
    agent: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counting = Counting(monkeypatch)
    gate(agent, corpus())
    assert ids(gate(agent, corpus({k: v for k, v in TEXTS.items() if k != "a2"}))) == []
    gate(agent, corpus())
    split = corpus()
    split[1] = stored(split[1].entry.evolve(category="work"))
    settings = CycleSettings(same_category_clusters=True)
    assert ids(gate(agent, split, settings)) == []  # a1 (people) and a2 (work) are not linked
    assert ids(gate(agent, corpus(), CycleSettings(max_cluster_size=0))) == []
    assert counting.calls == 5


def write_vector(agent: Path, entry_id: str, vector: list[float]) -> Path:
    path = agent / "memory" / ".embeddings" / f"{entry_id}.bin"
    path.write_bytes(np.asarray(vector, dtype="<f4").tobytes())
    return path


def test_a_changed_vector_clusters_again(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counting = Counting(monkeypatch)
    texts = {"x1": "Alpha entry about invoices.", "x2": "Completely different words here."}
    for entry_id in texts:
        write_vector(agent, entry_id, [1.0, 0.0, 0.0])
    assert ids(gate(agent, corpus(texts))) == [("x1", "x2")]  # identical vectors: cosine 1.0
    path = write_vector(agent, "x2", [0.0, 1.0, 0.0])  # rewritten in place: same size, same inode
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - 5_000_000_000))  # its old mtime back: ctime still moved
    assert ids(gate(agent, corpus(texts))) == []
    assert counting.calls == 2


def test_a_vector_written_within_the_racy_window_is_never_keyed(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cc, "_now_ns", cc.time.time_ns)  # this very moment: the vector was just written
    write_vector(agent, "a1", [1.0, 0.0])
    counting = Counting(monkeypatch)
    gate(agent, corpus())
    gate(agent, corpus())
    assert counting.calls == 2
    assert not cache_path(agent).exists()


@pytest.mark.parametrize(
    "damage",
    ["truncated", "flipped", "other-version", "not-json", "bad-cluster", "directory", "empty"],
)
def test_a_damaged_cache_clusters_again(agent: Path, monkeypatch: pytest.MonkeyPatch, damage: str) -> None:
    gate(agent, corpus())
    path = cache_path(agent)
    data = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(data[:-10])
    elif damage == "flipped":
        path.write_bytes(data.replace(b'"a2"', b'"d1"'))  # a planted cluster, the checksum not updated
    elif damage == "other-version":
        path.write_bytes(data.replace(FORMAT, b"dreamkeeper-cluster-cache 0\n"))
    elif damage in ("not-json", "bad-cluster"):
        import hashlib
        import json

        key = json.loads(data.split(b"\n", 2)[2])["key"]
        payload = (
            b"{not json"
            if damage == "not-json"
            else json.dumps({"key": key, "clusters": [[["d1"], 1, "x", 0, []]]}).encode()
        )
        path.write_bytes(FORMAT + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
    elif damage == "directory":
        path.unlink()
        path.mkdir()
    else:
        path.write_bytes(b"")
    counting = Counting(monkeypatch)
    assert ids(gate(agent, corpus())) == [("a1", "a2")]
    assert counting.calls == 1
    if damage == "directory":
        assert path.is_dir()  # not ours to replace: left as it is


def test_a_planted_cache_with_a_valid_checksum_but_another_key_is_not_used(
    agent: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate(agent, corpus())
    counting = Counting(monkeypatch)
    edited = corpus({**TEXTS, "d1": "Rose (Jordan's sister) lives in Portland, her birthday is May 14!"})
    assert ids(gate(agent, edited)) == [("a1", "a2"), ("c1", "d1")]
    assert counting.calls == 1


def test_a_dry_run_reads_the_cache_and_never_writes_it(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gate(agent, corpus(), read_only=True)
    assert not cache_path(agent).exists()
    gate(agent, corpus())
    before = cache_path(agent).read_bytes()
    added = corpus({**TEXTS, "b2": "On host db-stage-3 the staging database runs PostgreSQL 16!"})
    assert ids(gate(agent, added, read_only=True)) == [("a1", "a2"), ("b1", "b2")]
    assert cache_path(agent).read_bytes() == before


def test_cycles_reuse_the_clusters_and_offer_a_new_duplicate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through real cycles: the second clusters nothing; an agent's new duplicate is clustered and offered."""
    real = cc.time.time_ns
    monkeypatch.setattr(cc, "_now_ns", lambda: real() + LATER_NS)
    write_corpus(tmp_path, [Seed(i, t, category="people") for i, t in TEXTS.items()])
    counting = Counting(monkeypatch)
    settings = CycleSettings(archive_cap=1.0)

    def cycle(days: int) -> object:
        options = CycleOptions(agent_dir=tmp_path, settings=settings, force=True, now=BASE_TIME + timedelta(days=days))
        return asyncio.run(run_cycle(options, OfflineProposer()))

    cycle(0)  # merges a1 and a2: the corpus changed
    cycle(1)
    calls = counting.calls
    assert calls >= 2
    cycle(2)
    assert counting.calls == calls  # nothing changed what the clustering reads (decay writes importance): reused
    write_corpus(tmp_path, [Seed("b2", "On host db-stage-3 the staging database runs PostgreSQL 16!", "people")])
    outcome = cycle(3)
    assert counting.calls == calls + 1
    assert outcome.gating is not None  # type: ignore[attr-defined]
    offered = {i for c in outcome.gating.clusters for i in c.ids}  # type: ignore[attr-defined]
    assert {"b1", "b2"} <= offered


def settled(texts: dict[str, str] | None = None) -> list[StoredEntry]:
    """The corpus reviewed, and its one cluster (a1, a2) declined today: nothing is due (reopens in 7 days)."""
    stamp = format_timestamp(BASE_TIME)
    declined = {DECLINED_CLUSTER: cluster_hash(["a1", "a2"]), DECLINED_AT: stamp, DECLINED_COUNT: "1"}
    out = []
    for s in corpus(texts):
        meta = {REVIEWED_HASH: review_hash(s.entry.content), REVIEWED_AT: stamp}
        if s.id in ("a1", "a2"):
            meta |= declined
        out.append(stored(s.entry.evolve(metadata=meta)))
    return out


def test_a_settled_corpus_loads_no_vector_on_a_cache_hit(agent: Path) -> None:
    """Issue 27 (S2): a cache hit that offers nothing reads no vector (subsumption compares only offered clusters);
    a hit that offers a cluster loads exactly its members'."""
    store = MemoryStore(agent / "memory")
    cache = ClusterCache(cache_path(agent), store.embeddings_dir)
    first = select_candidates(settled(), CycleSettings(), BASE_TIME, store.load_embedding, cache=cache)
    assert ids(first) == [("a1", "a2")] and not first.clusters and not first.eligible
    loaded: list[str] = []

    def counted(entry_id: str) -> np.ndarray | None:
        loaded.append(entry_id)
        return store.load_embedding(entry_id)

    hit = ClusterCache(cache_path(agent), store.embeddings_dir)
    again = select_candidates(settled(), CycleSettings(), BASE_TIME, counted, cache=hit)
    assert hit.hits == 1 and ids(again) == [("a1", "a2")]
    assert loaded == [] and not again.clusters and not again.degraded
    due = select_candidates(settled(), CycleSettings(), BASE_TIME + timedelta(days=8), counted, cache=hit)
    assert [c.ids for c in due.reopened] == [("a1", "a2")]
    assert sorted(loaded) == ["a1", "a2"] and set(due.items) == {"a1", "a2"}


def test_a_vector_loader_failing_on_a_cache_hit_degrades_the_offer(agent: Path) -> None:
    store = MemoryStore(agent / "memory")
    gate(agent, corpus())

    def failing(entry_id: str) -> np.ndarray | None:
        raise OSError(f"vector of {entry_id} unreadable")

    cache = ClusterCache(cache_path(agent), store.embeddings_dir)
    result = select_candidates(corpus(), CycleSettings(), BASE_TIME, failing, cache=cache)
    assert cache.hits == 1
    assert result.degraded and "unreadable" in (result.degraded_reason or "")
    assert result.all_clusters == [] and result.clusters == [] and result.reopened == [] and not result.merge_only
    assert {s.id for s in result.eligible} == set(TEXTS)  # every entry unreviewed: offered alone, never clustered
    assert result.items == {}


def test_the_key_covers_this_cycles_generated_vectors_and_every_field(agent: Path) -> None:
    """A vector generated by this cycle (never written in a dry run) is keyed by its bytes; and a field moved from one
    entry's text into another's (same characters overall) is another key: the key's text is injective."""
    store = MemoryStore(agent / "memory")
    settings = CycleSettings()

    def key(live: list[StoredEntry], generated: dict[str, np.ndarray] | None = None) -> str | None:
        return ClusterCache(cache_path(agent), store.embeddings_dir, generated).key(live, settings)

    vector = np.ones(8, dtype=np.float32)
    base = key(corpus(), {"a1": vector})
    assert base is not None and base == key(corpus(), {"a1": vector.copy()})
    assert base != key(corpus(), {"a1": vector * 2}) and base != key(corpus(), {"a1": vector.astype(np.float64)})
    assert base != key(corpus()) and base != key(corpus(), {"a2": vector})
    split = corpus({"a": "ab", "b": "c"})
    assert key(split) != key(corpus({"a": "a", "b": "bc"}))
    assert key(corpus({"a": "x"}, category="p")) != key(corpus({"a": "x"}, category="p/"))


def gate_as(agent: Path, live: list[StoredEntry], generation: str | None, **kw: object) -> tuple[GatingResult, int]:
    """``gate`` with the corpus index's generation of ``live`` given; also how many keys came from it."""
    store = MemoryStore(agent / "memory")
    settings: CycleSettings = kw.pop("settings", None) or CycleSettings()  # type: ignore[assignment]
    cache = ClusterCache(cache_path(agent), store.embeddings_dir, **kw)  # type: ignore[arg-type]
    result = select_candidates(
        live,
        settings,
        BASE_TIME,
        store.load_embedding,
        cache=cache,
        generation=generation,
    )
    return result, cache.by_generation


def test_a_generation_saved_with_the_key_gives_it_back_without_hashing(agent: Path) -> None:
    """The key saved for a generation is what that generation's corpus hashes to: given the same generation (and
    context) it is taken as it is; the entries are not read for it. Shown by lying: another corpus under the same
    generation gets the saved key, hence the saved clusters (the caller vouches; memory/corpus_index.py)."""
    first, taken = gate_as(agent, corpus(), "G1")
    assert ids(first) == [("a1", "a2")] and taken == 0
    again, taken = gate_as(agent, corpus(), "G1")
    assert ids(again) == ids(first) and taken == 1
    lie, taken = gate_as(agent, corpus({k: v for k, v in TEXTS.items() if k != "a2"}), "G1")
    assert taken == 1 and ids(lie) == [("a1", "a2")]


@pytest.mark.parametrize("change", ["generation", "none", "vector", "settings", "generated"])
def test_the_key_is_hashed_again_when_anything_besides_the_corpus_differs(agent: Path, change: str) -> None:
    gate_as(agent, corpus(), "G1")
    live = corpus({k: v for k, v in TEXTS.items() if k != "a2"})  # another corpus: a key taken by mistake shows
    generation: str | None = "G1"
    kw: dict[str, object] = {}
    if change == "generation":
        generation = "G2"
    elif change == "none":
        generation = None
    elif change == "vector":
        path = write_vector(agent, "zz", [1.0, 0.0])  # any vector file, even of no entry: the context differs
        st = os.stat(path)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - 5_000_000_000))
    elif change == "settings":
        kw["settings"] = CycleSettings(similarity_threshold=0.5)
    else:
        kw["generated"] = {"a1": np.asarray([1.0, 0.0], dtype="<f4")}
    result, taken = gate_as(agent, live, generation, **kw)
    assert taken == 0 and ids(result) == []


def test_a_vector_directory_listed_in_another_order_misses_the_saved_key_and_hashes_again(
    agent: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The context hashes the vector files' records in the directory's own order (not sorted: a sixth of a steady
    key's cost at 100k). The same files listed in another order (a directory restored from a backup) are another
    context: the saved key is not taken by the generation, the corpus is hashed again, and the clusters are the same
    (the full key does not depend on the listing's order)."""
    for name in ("v1", "v2", "v3"):  # vector files of no entry: each only adds its record to the context
        path = write_vector(agent, name, [1.0, 0.0])
        st = os.stat(path)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - 5_000_000_000))
    first, taken = gate_as(agent, corpus(), "G1")
    assert taken == 0
    again, taken = gate_as(agent, corpus(), "G1")
    assert taken == 1 and ids(again) == ids(first)  # the same order: the saved key
    real_scandir = cc.os.scandir

    class Reversed(list[os.DirEntry[str]]):
        """The directory's entries in reverse order, used as ``os.scandir``'s iterator is (a context manager)."""

        def __enter__(self) -> Reversed:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def close(self) -> None:
            return None

    def reversed_scandir(path: Any = ".") -> Any:
        with real_scandir(path) as listing:
            entries = list(listing)
        return Reversed(entries[::-1])

    monkeypatch.setattr(cc.os, "scandir", reversed_scandir)
    again, taken = gate_as(agent, corpus(), "G1")
    assert taken == 0 and ids(again) == ids(first)
    monkeypatch.setattr(cc.os, "scandir", real_scandir)
    _, taken = gate_as(agent, corpus(), "G1")
    assert taken == 0  # saved again under the reversed order's context: this order is again another one


def test_a_reused_key_is_saved_under_the_new_generation(agent: Path) -> None:
    """The corpus was read again (a new index) but is unchanged: the clusters are a hit by the full key, and saved
    under the new generation, so that the next cycle takes the key from it."""
    gate_as(agent, corpus(), "G1")
    _, taken = gate_as(agent, corpus(), "G2")
    assert taken == 0
    _, taken = gate_as(agent, corpus(), "G2")
    assert taken == 1


def test_steady_cycles_take_the_key_from_the_generation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through real cycles with the corpus index: once the corpus settles, the key comes from its generation; an
    entry the agent edits gives the scan no generation, and the corpus is hashed (and clustered) again."""
    from dreamkeeper.memory import corpus_index as ci

    real = cc.time.time_ns
    monkeypatch.setattr(cc, "_now_ns", lambda: real() + LATER_NS)
    monkeypatch.setattr(ci, "_now_ns", lambda: real() + LATER_NS)
    write_corpus(tmp_path, [Seed(i, t, category="people") for i, t in TEXTS.items()])
    settings = CycleSettings(archive_cap=1.0, reopen_interval_days=365.0)
    taken: list[int] = []
    real_key = ClusterCache.key

    def key(self: ClusterCache, *args: object) -> str | None:
        before = self.by_generation
        out = real_key(self, *args)  # type: ignore[arg-type]
        taken.append(self.by_generation - before)
        return out

    monkeypatch.setattr(ClusterCache, "key", key)

    def cycle() -> object:
        options = CycleOptions(agent_dir=tmp_path, settings=settings, force=True, now=BASE_TIME)
        return asyncio.run(run_cycle(options, OfflineProposer()))

    for _ in range(5):
        cycle()
    assert taken[-1] == 1, taken
    counting = Counting(monkeypatch)
    path = next((tmp_path / "memory").rglob("d1.json"))
    path.write_text(path.read_text(encoding="utf-8").replace("January", "February"), encoding="utf-8")
    cycle()
    assert taken[-1] == 0 and counting.calls == 1
