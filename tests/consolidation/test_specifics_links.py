"""Links by shared rare specifics (issue 23): paraphrases of one fact offered together, an over-large component cut
along them, and nothing else linked (clustering/specifics_links.py)."""

from __future__ import annotations

import asyncio
import itertools
from datetime import timedelta
from pathlib import Path

import numpy as np
from bench.realmodel_judge import Lexicon, missing
from hypothesis import given, settings
from hypothesis import strategies as st

from dreamkeeper.consolidation.clustering import ClusterItem, find_clusters
from dreamkeeper.consolidation.clustering.similarity import similarity
from dreamkeeper.consolidation.clustering.specifics_links import _EDGES, _SPECIFIC, specifics_links, specifics_of
from dreamkeeper.consolidation.cycle import CycleOptions, run_cycle
from dreamkeeper.consolidation.gating import select_candidates
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.demo.sample import generate_sample
from dreamkeeper.demo.world import ANCHOR
from dreamkeeper.memory import Entry, MemoryStore
from dreamkeeper.proposers import ScriptedProposer
from tests.consolidation.corpus import BASE_TIME, Seed, write_corpus
from tests.parity.test_parity_gating import stored

# Two wordings of one fact: the person, the role, the company and the e-mail, worded apart (Jaccard 0.67).
OKAFOR = "Mateo Okafor is a Producer at Tailspin Toys; email mateo.okafor@tailspintoys.com"
OKAFOR_AGAIN = "Mateo Okafor (Producer, Tailspin Toys) — mateo.okafor@tailspintoys.com, based in Chicago"
_WORDS = " ".join(
    [
        "apple basket candle drawer engine fabric garden hammer island jacket kettle ladder marble needle orchard",
        "pencil quilt ribbon saddle teapot umbrella violin wagon yogurt zipper anchor bucket cactus dolphin easel",
        "feather glacier harbor igloo jungle kayak lantern meadow nectar oyster parrot",
    ]
).split()


def fillers(count: int = 40) -> list[tuple[str, str]]:
    """Lone entries of ordinary words (no specifics, pairwise far apart): a corpus large enough for rarity."""
    triples = list(itertools.islice(itertools.combinations(_WORDS, 3), 0, None, 97))[:count]
    return [(f"f{k:03d}", f"remember the {a}, the {b} and the {c}") for k, (a, b, c) in enumerate(triples)]


def items_of(pairs: list[tuple[str, str]], vectors: dict[str, np.ndarray] | None = None) -> list[ClusterItem]:
    return [ClusterItem(i, text, "people", (vectors or {}).get(i)) for i, text in pairs]


def test_paraphrases_sharing_rare_specifics_are_clustered_though_their_wording_is_not_near() -> None:
    corpus = [*fillers(), ("m1", OKAFOR), ("m2", OKAFOR_AGAIN)]
    items = items_of(corpus)
    assert similarity(items[-2], items[-1], "rockbot")[0] < 0.88  # not near-duplicates by wording
    assert find_clusters(items, max_cluster_size=3, specifics=0.0) == []
    (cluster,) = find_clusters(items, max_cluster_size=3, specifics=0.5)
    assert (cluster.ids, cluster.measure) == (("m1", "m2"), "specifics")


def test_the_engine_offers_such_a_pair_together_by_default() -> None:
    # Through the gate with the engine's defaults (main had no links: the pair was never offered together).
    live = [
        stored(Entry(id=i, content=text, category="people", created_at=BASE_TIME, last_seen_at=BASE_TIME))
        for i, text in [*fillers(), ("m1", OKAFOR), ("m2", OKAFOR_AGAIN)]
    ]
    result = select_candidates(live, CycleSettings(), BASE_TIME)
    assert [c.ids for c in result.clusters] == [("m1", "m2")]
    off = select_candidates(live, CycleSettings(specifics_links=0.0), BASE_TIME)
    assert off.clusters == []


def test_a_pair_sharing_only_common_words_or_one_name_is_not_linked() -> None:
    signal = [(f"s{k}", f"Person number {k} of the team uses Signal daily") for k in range(4)]  # Signal: 9%
    corpus = [
        *fillers(),
        *signal,
        ("a1", "Ingrid Ferreira prefers Signal for quick questions."),
        ("a2", "Hiroshi Brandt prefers Signal for quick questions."),  # shares only the common "Signal"
        ("a3", "Met Ingrid Ferreira at Build in Lisbon on 2026-03-02."),  # a second fact about the same person
    ]
    items = items_of(corpus)
    index = {item.id: n for n, item in enumerate(sorted(items, key=lambda item: item.id))}
    linked = {(a, b) for a, b, _ in specifics_links(sorted(items, key=lambda item: item.id), 0.5)}
    assert (index["a1"], index["a2"]) not in linked
    assert (index["a1"], index["a3"]) not in linked
    assert not [c for c in find_clusters(items, max_cluster_size=3, specifics=0.5) if {"a1", "a2", "a3"} & set(c.ids)]


def test_nothing_is_rare_in_a_corpus_too_small_to_tell() -> None:
    # Two facts about the agent's own podcast in a corpus of six: every shared name is a topic, not a rare specific.
    items = items_of([("m1", OKAFOR), ("m2", OKAFOR_AGAIN), *fillers(4)])
    assert specifics_links(items, 0.5) == []


def test_an_over_large_component_is_cut_along_its_links_into_one_fact_each() -> None:
    # A small embedding model puts "Met X at a conference" sentences about different people above the threshold:
    # one component of six, which RockBot's id-order chunks cut into two clusters of three different facts each.
    facts = [
        ("e1", "Met Amara Moreau at KubeCon on 2026-02-26; discussed licensing."),
        ("e2", "Met Olivia Rasmussen at NDC Oslo on 2026-03-16; discussed mobile."),
        ("e3", "Met Hiroshi Brandt at That Conference on 2026-08-07; discussed Kafka."),
        ("e4", "Met Amara Moreau at KubeCon in St. Paul on 2026-02-26 (February 26, 2026)."),
        ("e5", "Met Olivia Rasmussen at NDC Oslo in Denver on 2026-03-16 (March 16, 2026)."),
        ("e6", "Met Hiroshi Brandt at That Conference in Chicago on 2026-08-07 (August 7, 2026)."),
    ]
    rng = np.random.default_rng(7)
    base = rng.standard_normal(16).astype(np.float32)
    vectors = {i: base + 0.01 * rng.standard_normal(16).astype(np.float32) for i, _ in facts}
    items = items_of([*fillers(), *facts], vectors)
    chunks = find_clusters(items, max_cluster_size=3, split="rockbot", specifics=0.0)
    assert [c.ids for c in chunks] == [("e1", "e2", "e3"), ("e4", "e5", "e6")]
    cut = find_clusters(items, max_cluster_size=3, split="rockbot", specifics=0.5)
    assert [c.ids for c in cut] == [("e1", "e4"), ("e2", "e5"), ("e3", "e6")]
    assert len({c.component for c in cut}) == 3  # each its own request


def test_a_link_never_lets_subsumption_archive_a_different_fact(tmp_path: Path) -> None:
    # Same specifics, different facts: linked, so asked about; not near-duplicates, so never settled without a model.
    seeds = [Seed(i, text, "people") for i, text in fillers()]
    seeds += [
        Seed("b1", "Bob Tanaka works for Contoso in Oslo.", "people", age_days=20),
        Seed("b2", "Bob Tanaka lives in Oslo, near the Contoso office.", "people", age_days=5),
    ]
    write_corpus(tmp_path, seeds)
    asked: list[set[str]] = []

    def distinct(batch, request):  # type: ignore[no-untyped-def]
        asked.append({o.entry.id for o in batch.entries})
        return {"toDelete": [], "toSave": []}

    options = CycleOptions(tmp_path, CycleSettings(min_interval_hours=0), now=BASE_TIME + timedelta(hours=1))
    outcome = asyncio.run(run_cycle(options, ScriptedProposer(distinct)))
    assert {"b1", "b2"} in asked
    assert outcome.report.subsumed == 0 and outcome.report.saved == 0


def test_on_the_sample_the_defaults_offer_more_families_and_settle_none_wrongly(tmp_path: Path) -> None:
    # Cycle 1 of the sample with the defaults (links, new clusters offered at once) against the trial (35
    # clusters with both off: test_subsume.py): more of the world's families put side by side, and every subsumption
    # still one family's copies with every fact still said.
    agent = tmp_path / "agent"
    summary = generate_sample(agent)
    family = {i: n for n, group in enumerate(summary.near_duplicate_groups) for i in group}
    store = MemoryStore(agent / "memory")
    before = [s.entry.content for s in store.scan().live]

    def families_together(settings: CycleSettings) -> int:
        offered = select_candidates(store.scan().live, settings, ANCHOR + timedelta(days=1)).clusters
        together: set[int] = set()
        for cluster in offered:
            known = [family[i] for i in cluster.ids if i in family]
            together.update(f for f in known if known.count(f) > 1)
        return len(together)

    old = CycleSettings(specifics_links=0.0, offer_new_clusters=False)
    assert families_together(CycleSettings()) > families_together(old)
    settings = CycleSettings(min_interval_hours=0, archive_cap=1.0)
    proposer = ScriptedProposer(lambda batch, request: {"toDelete": [], "toSave": []})
    outcome = asyncio.run(run_cycle(CycleOptions(agent, settings, now=ANCHOR + timedelta(days=1)), proposer))
    assert outcome.plan is not None and outcome.report.specifics_lost == 0
    subsumed = [m for m in outcome.plan.merges if m.subsumed]
    assert len(subsumed) >= 25
    lexicon = Lexicon.of(before)
    live = "\n".join(s.entry.content for s in store.scan().live)
    for merge in subsumed:
        assert merge.into is not None
        members = [merge.into.id, *(s.id for s in merge.sources)]
        assert len({family.get(i) for i in members}) == 1 and family.get(members[0]) is not None
        assert not missing([s.entry.content for s in merge.sources], live, lexicon)


@settings(max_examples=300, deadline=None)
@given(
    st.text(max_size=80)
    | st.lists(st.sampled_from(["Paul.", "paul", "v2.1", "a@b.co", "-x-", "O'Neil", "\n", "Ab", "A"]), max_size=12).map(
        " ".join
    )
)
def test_specifics_of_reads_the_keys_each_match_gives(content: str) -> None:
    """The set-first reading (issue 27) gives the keys the match-by-match reading gave."""
    reference = frozenset(
        key for key in (m.strip(_EDGES).casefold() for m in _SPECIFIC.findall(content)) if len(key) >= 2
    )
    assert specifics_of(ClusterItem("a", content, None, None)) == reference
