"""The world an agent mines memories from, and the mining schedule of a simulated year.

Facts come from the sample agent's invented world (people, accounts, trips, projects, infrastructure, status
notes) plus parametric account and preference facts, so a year has enough distinct facts. Every cycle the agent
writes a few new facts and restates a few known ones: byte-identical restatements (what the exact fold is for),
reworded ones with the same specifics, and elaborations that add specifics (what a lossy merge drops).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from dreamkeeper.demo.world import (
    USER_FIRST,
    Family,
    ephemeral_families,
    fixed_families,
    knowledge_families,
    make_people,
    misc_families,
    person_families,
    preference_families,
    project_families,
    trip_families,
)

EPHEMERAL_CATEGORY = "episodes/status"
FACT_TAG = "fact:"

_SERVICES = [
    ("Tripit", "travel"), ("Delta SkyMiles", "travel"), ("Marriott Bonvoy", "travel"), ("Fastmail", "accounts"),
    ("Dropbox", "accounts"), ("Spotify", "accounts"), ("Costco", "accounts"), ("Audible", "accounts"),
    ("Hertz Gold", "travel"), ("Alaska Mileage Plan", "travel"), ("Kindle", "accounts"), ("Patreon", "accounts"),
]  # fmt: skip
_DISHES = ["pad see ew", "the mushroom risotto", "a flat white", "the lamb vindaloo", "oat-milk chai", "pho tai"]
_PLACES = ["Quang", "Hai Hai", "Spoon and Stable", "Young Joni", "Colossal Cafe", "Bar La Grassa", "Tilia"]
_CITIES = ["Minneapolis", "St. Paul", "Seattle", "Lisbon", "Oslo", "Austin", "Denver"]


@dataclass(frozen=True, slots=True)
class MinedEntry:
    """One entry the agent writes. Both arms of the simulation receive exactly these."""

    id: str
    content: str
    category: str | None
    tags: tuple[str, ...]
    importance: float
    reinforcement: int
    created_at: datetime
    family: str
    kind: str  # canonical | restatement | elaboration | duplicate
    subject_time: str | None = None

    @property
    def ephemeral(self) -> bool:
        return self.category == EPHEMERAL_CATEGORY


def _account_families(rng: random.Random, count: int) -> list[Family]:
    """Accounts and memberships: numbers, handles and e-mails in a protected category."""
    families = []
    for index in range(count):
        service, area = _SERVICES[index % len(_SERVICES)]
        number = "".join(rng.choice("0123456789") for _ in range(rng.choice([8, 10, 12])))
        handle = f"jellery{rng.randint(10, 99)}"
        email = f"jordan+{service.split()[0].lower()}{index}@ellery.example"
        families.append(
            Family(
                f"account-{index}",
                f"user-preferences/{area}",
                [
                    f"{USER_FIRST}'s {service} account is {handle}, member number {number}, login {email}.",
                    f"{service}: {USER_FIRST} logs in as {email} (handle {handle}, member {number}).",
                ],
                round(rng.uniform(0.55, 0.95), 2),
                ["account", service.split()[0].lower()],
                elaborations=[
                    f"{USER_FIRST}'s {service} account is {handle}, member number {number}, login {email}; "
                    f"recovery codes are in 1Password under '{service} {2024 + index % 3}'.",
                ],
            )
        )
    return families


def _taste_families(rng: random.Random, count: int) -> list[Family]:
    families = []
    for index in range(count):
        dish, place, city = rng.choice(_DISHES), rng.choice(_PLACES), rng.choice(_CITIES)
        families.append(
            Family(
                f"taste-{index}",
                "user-preferences/food",
                [
                    f"At {place} in {city}, {USER_FIRST} always orders {dish}.",
                    f"{USER_FIRST}'s usual at {place} ({city}) is {dish}.",
                ],
                round(rng.uniform(0.4, 0.85), 2),
                ["preference", "food"],
                elaborations=[f"At {place} in {city}, {USER_FIRST} always orders {dish}, table for {index % 4 + 2}."],
            )
        )
    return families


def family_pool(rng: random.Random, people: int) -> tuple[list[Family], list[Family]]:
    """(fixed high-value families, the shuffled pool of everything else)."""
    crowd = make_people(rng, people)
    pool: list[Family] = []
    for index, person in enumerate(crowd):
        pool += person_families(rng, person, index)
    pool += project_families(rng, crowd)
    pool += trip_families(rng, max(8, people // 4))
    pool += ephemeral_families(rng, crowd, max(12, people // 2))
    pool += misc_families(rng, 6)
    pool += knowledge_families(rng, max(8, people // 4))
    pool += preference_families(rng, 6)
    pool += _account_families(rng, max(6, people // 10))
    pool += _taste_families(rng, max(6, people // 10))
    rng.shuffle(pool)
    return fixed_families(), pool


@dataclass
class World:
    """Deterministic for a seed: the same calls produce the same entries, ids included."""

    seed: int
    people: int = 500
    rng: random.Random = field(init=False)
    fixed: list[Family] = field(init=False)
    pool: list[Family] = field(init=False)
    known: list[Family] = field(init=False, default_factory=list)
    _ids: set[str] = field(init=False, default_factory=set)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.fixed, self.pool = family_pool(self.rng, self.people)
        self.pool.reverse()  # pop() from the end keeps the shuffled order

    def _new_id(self) -> str:
        while True:
            candidate = f"{self.rng.getrandbits(48):012x}"
            if candidate not in self._ids:
                self._ids.add(candidate)
                return candidate

    def _entry(self, family: Family, text: str, kind: str, when: datetime) -> MinedEntry:
        rng = self.rng
        if kind == "canonical" and family.reinforcement is not None:
            reinforcement = family.reinforcement
        else:
            reinforcement = 1 if rng.random() < 0.8 else rng.randint(2, 4)
        importance = family.importance if kind == "canonical" else family.importance + rng.uniform(-0.08, 0.05)
        return MinedEntry(
            id=self._new_id(),
            content=text,
            category=family.category or None,
            tags=(*family.tags, FACT_TAG + family.key),
            importance=round(min(1.0, max(0.05, importance)), 2),
            reinforcement=reinforcement,
            created_at=when,
            family=family.key,
            kind=kind,
            subject_time=family.subject_time,
        )

    def initial(self, families: int, when: datetime) -> list[MinedEntry]:
        """The corpus on day 0: the fixed high-value entries (every wording) and ``families`` random facts."""
        out: list[MinedEntry] = []
        for family in self.fixed:
            self.known.append(family)
            texts = [(family.variants[0], "canonical")]
            texts += [(t, "restatement") for t in family.variants[1:]]
            texts += [(t, "elaboration") for t in family.elaborations]
            out += [self._entry(family, t, k, when - timedelta(days=30)) for t, k in texts]
        for _ in range(families):
            out += self._new_fact(when - timedelta(days=self.rng.randint(1, 60)), extra_copies=True)
        return out

    def _new_fact(self, when: datetime, extra_copies: bool = False) -> list[MinedEntry]:
        if not self.pool:
            return []
        family = self.pool.pop()
        if not family.ephemeral:
            self.known.append(family)
        out = [self._entry(family, family.variants[0], "canonical", when)]
        if extra_copies and not family.ephemeral and self.rng.random() < 0.35:
            out += self._restate(family, when)
        return out

    def _restate(self, family: Family, when: datetime) -> list[MinedEntry]:
        roll = self.rng.random()
        if roll < 0.30:
            return [self._entry(family, family.variants[0], "duplicate", when)]
        if roll < 0.65 and len(family.variants) > 1:
            return [self._entry(family, self.rng.choice(family.variants[1:]), "restatement", when)]
        if family.elaborations:
            return [self._entry(family, self.rng.choice(family.elaborations), "elaboration", when)]
        return [self._entry(family, family.variants[0], "duplicate", when)]

    def mine(self, when: datetime) -> list[MinedEntry]:
        """One half-day of mining: 0-3 new facts and 0-3 restatements of known ones (1.5 + 1.5 on average)."""
        rng = self.rng
        out: list[MinedEntry] = []
        for _ in range(rng.choice((0, 1, 1, 2, 2, 3))):
            out += self._new_fact(when - timedelta(minutes=rng.randint(10, 700)))
        for _ in range(rng.choice((0, 1, 1, 2, 2, 3))):
            if self.known:
                family = rng.choice(self.known)
                out += self._restate(family, when - timedelta(minutes=rng.randint(10, 700)))
        return out


# ---- synthetic corpora for the scale bench ---------------------------------------------------------------------

EMBEDDING_DIM = 64


def _copies(rng: random.Random, family: Family) -> list[str]:
    """How many times a fact is on disk, in which wordings: the sample agent's near-duplicate rates."""
    canonical = family.variants[0]
    if family.ephemeral:
        return [canonical, canonical] if rng.random() < 0.1 else [canonical]
    texts = [canonical]
    roll = rng.random()
    restated, elaborated = family.variants[1:], family.elaborations
    if roll < 0.55:
        pass
    elif roll < 0.70 and restated:
        texts.append(rng.choice(restated))
    elif roll < 0.82 and elaborated:
        texts.append(rng.choice(elaborated))
    elif roll < 0.86:
        texts.append(canonical)
    else:
        texts += [*restated, *elaborated]
    return texts


def write_synthetic_corpus(
    memory_dir: Path,
    size: int,
    seed: int = 7,
    embedded: float = 0.5,
    *,
    dotnet_stamps: bool = False,
    anchor: datetime | None = None,
    max_age_days: int = 700,
) -> dict[str, int]:
    """Write ``size`` live entry files in RockBot's layout (no review stamps: a cold start), with float32
    embeddings for the facts of about ``embedded`` of the families. Plain writes: this is a fixture, not the store.
    ``dotnet_stamps``: timestamps as RockBot writes them (``JsonSerializer.Serialize`` of a ``DateTimeOffset``,
    FileMemoryStore.cs @029f5eea; System.Text.Json's JsonWriterHelper.Date.cs: the 'O' form with the fraction's
    trailing zeros trimmed, none at all when it is zero), with a sub-second part in 100 ns ticks as ``UtcNow`` has
    it, which the parser keeps raw; not Python's 6 digits. The same corpus otherwise (the ticks come from the id, not
    the random stream).
    ``anchor`` and ``max_age_days``: each entry is created (and last seen) 1 to ``max_age_days`` days before
    ``anchor`` (by default 2026-09-01 and 700: an old corpus, most of it decayed to the floor by now). A corpus made
    1-365 days before today is a young one, where about a third of the live entries are still decaying (about half
    in the year simulation's corpus: bench/results/limits-s42.md). The same generator, drawn differently (the ages).
    Returns counts (entries, families, embeddings)."""
    import json
    import struct

    rng = random.Random(seed)
    anchor = anchor or datetime(2026, 9, 1, tzinfo=UTC)
    written = embeddings = families = 0
    vectors_dir = memory_dir / ".embeddings"
    vectors_dir.mkdir(parents=True, exist_ok=True)
    made_dirs: set[Path] = set()
    canonical_texts: set[str] = set()
    world_index = 0
    while written < size:
        world = World(seed * 1000 + world_index, people=900)
        world_index += 1
        for family in [*(world.fixed if world_index == 1 else []), *reversed(world.pool)]:
            if written >= size:
                break
            if family.variants[0] in canonical_texts:
                continue  # another world drew the same template fact: one agent would not have 1000 copies
            canonical_texts.add(family.variants[0])
            families += 1
            base = [rng.gauss(0, 1) for _ in range(EMBEDDING_DIM)] if rng.random() < embedded else None
            for text in _copies(rng, family):
                if written >= size:
                    break
                entry_id = f"{rng.getrandbits(48):012x}"
                created = anchor - timedelta(days=rng.randint(1, max_age_days), seconds=rng.randint(0, 86399))
                stamp = created.isoformat(timespec="microseconds")
                if dotnet_stamps:  # "...02.000000+00:00" -> "...02.4102967+00:00" ("...02.41+00:00", "...02+00:00")
                    fraction = f"{int(entry_id, 16) % 10_000_000:07d}".rstrip("0")
                    stamp = f"{stamp[:19]}{'.' if fraction else ''}{fraction}{stamp[26:]}"
                obj = {
                    "id": entry_id,
                    "content": text,
                    "category": family.category or None,
                    "tags": list(family.tags),
                    "createdAt": stamp,
                    "updatedAt": stamp,
                    "lastSeenAt": stamp,
                    "reinforcementCount": family.reinforcement or (1 if rng.random() < 0.7 else rng.randint(2, 9)),
                    "importanceScore": round(min(1.0, max(0.05, family.importance + rng.uniform(-0.05, 0.05))), 2),
                    "metadata": {"subjectTime": family.subject_time} if family.subject_time else None,
                    "supersededBy": None,
                    "archivedAt": None,
                    "archiveReason": None,
                }
                directory = memory_dir.joinpath(*family.category.split("/")) if family.category else memory_dir
                if directory not in made_dirs:
                    directory.mkdir(parents=True, exist_ok=True)
                    made_dirs.add(directory)
                (directory / f"{entry_id}.json").write_text(json.dumps(obj, indent=2), encoding="utf-8")
                if base is not None:
                    vector = [b + rng.gauss(0, 0.08) for b in base]
                    (vectors_dir / f"{entry_id}.bin").write_bytes(struct.pack(f"<{EMBEDDING_DIM}f", *vector))
                    embeddings += 1
                written += 1
    return {"entries": written, "families": families, "embeddings": embeddings}
