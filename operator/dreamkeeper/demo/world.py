"""The invented world behind the sample agent, read from ``data/world.yaml``: people and the facts about them.

The facts, names and wordings are data (see the YAML's header for the template and draw rules); this module only
fills the templates. Each :class:`Family` is one fact as the agent might have written it several times; sample.py
decides how many copies land on disk. The draws happen in the order the YAML lists them, so the same seed gives
the same world (and the bundled sample stays byte-identical to the generator's output).
"""

from __future__ import annotations

import random
import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cache
from importlib.resources import files
from types import SimpleNamespace
from typing import Any

import yaml

WORLD_FILE = "world.yaml"
Values = dict[str, Any]


@dataclass
class Person:
    first: str
    last: str
    company: str
    domain: str
    role: str
    city: str
    phone: str

    @property
    def name(self) -> str:
        return f"{self.first} {self.last}"

    @property
    def email(self) -> str:
        return f"{self.first}.{self.last}@{self.domain}".lower()

    @property
    def company_tag(self) -> str:
        return self.company.lower().replace(" ", "-")


@dataclass
class Family:
    """One fact and the ways the agent wrote it down. ``variants[0]`` is the canonical wording."""

    key: str
    category: str
    variants: list[str]
    importance: float
    tags: list[str] = field(default_factory=list)
    subject_time: str | None = None
    ephemeral: bool = False
    # Restatements carry exactly the canonical's specifics; elaborations add some (a merge must keep them).
    elaborations: list[str] = field(default_factory=list)
    reinforcement: int | None = None


class _Templates(string.Formatter):
    """str.format plus ``!l`` (lower), ``!c`` (str.capitalize) and the ``long`` date format ("May 4, 2026")."""

    def __init__(self, months: list[str]) -> None:
        self.months = months

    def convert_field(self, value: Any, conversion: str | None) -> Any:
        if conversion == "l":
            return str(value).lower()
        if conversion == "c":
            return str(value).capitalize()
        return super().convert_field(value, conversion)

    def format_field(self, value: Any, format_spec: str) -> Any:
        if format_spec == "long" and isinstance(value, datetime):
            return f"{self.months[value.month - 1]} {value.day}, {value.year}"
        return super().format_field(value, format_spec)


def _record(value: Any) -> Any:
    """List items that are mappings (a city, a company, a project) read as attributes in templates."""
    return SimpleNamespace(**value) if isinstance(value, Mapping) else value


@dataclass(frozen=True)
class _World:
    raw: dict[str, Any]
    anchor: datetime
    user: SimpleNamespace
    lists: dict[str, list[Any]]
    templates: _Templates

    def values(self, **context: Any) -> Values:
        return {"user": self.user, **self.lists, **context}

    def draw(self, rng: random.Random, draws: Mapping[str, Mapping[str, Any]], values: Values) -> None:
        """Each named draw, in order, into ``values`` (later draws and templates may use earlier ones)."""
        for name, spec in draws.items():
            values[name] = self._draw_one(rng, spec, values)

    def _draw_one(self, rng: random.Random, spec: Mapping[str, Any], values: Values) -> Any:
        if "choice" in spec:
            pool = spec["choice"]
            pool = values[pool] if isinstance(pool, str) else [_record(item) for item in pool]
            return rng.choice(pool[spec.get("skip", 0) :])
        if "randint" in spec:
            return rng.randint(*spec["randint"])
        if "uniform" in spec:
            return round(rng.uniform(*spec["uniform"]), 2)
        if "date" in spec:
            low, high = spec["date"]
            return self.anchor + timedelta(days=rng.randint(low, high), minutes=rng.randint(0, 24 * 60 - 1))
        if "chars" in spec:
            return "".join(rng.choice(spec["chars"]) for _ in range(spec["length"]))
        if "format" in spec:
            return self.fill(spec["format"], values)
        raise ValueError(f"{WORLD_FILE}: unknown draw {dict(spec)}")

    def fill(self, template: str, values: Values) -> str:
        return self.templates.vformat(template, (), values)

    def family(self, rng: random.Random, template: Mapping[str, Any], values: Values) -> Family | None:
        """One family from its template: probability roll, draws, pick, importance, in that order."""
        if "probability" in template and rng.random() >= template["probability"]:
            return None
        values = dict(values)
        self.draw(rng, template.get("draws", {}), values)
        spec = dict(template)
        if "pick" in template:
            spec.update(rng.choice(template["pick"]))
        importance = spec["importance"]
        if isinstance(importance, Mapping):
            importance = self._draw_one(rng, importance, values)
        subject_time = spec.get("subject_time")
        return Family(
            self.fill(spec["key"], values),
            self.fill(spec.get("category", ""), values),
            [self.fill(text, values) for text in spec["variants"]],
            importance,
            [self.fill(tag, values) for tag in spec.get("tags", [])],
            subject_time=None if subject_time is None else self.fill(subject_time, values),
            ephemeral=spec.get("ephemeral", False),
            elaborations=[self.fill(text, values) for text in spec.get("elaborations", [])],
            reinforcement=spec.get("reinforcement"),
        )

    def group(self, rng: random.Random, name: str, **context: Any) -> list[Family]:
        """One instance of a group: its draws, then each of its families."""
        group = self.raw[name]
        values = self.values(**context)
        self.draw(rng, group.get("draws", {}), values)
        made = (self.family(rng, template, values) for template in group["families"])
        return [family for family in made if family is not None]

    def shuffled(self, rng: random.Random, name: str, count: int) -> list[Family]:
        """A shuffled pool: the first ``count`` items, each merged into the group's family template."""
        group = self.raw[name]
        pool = list(group["shuffle"])
        rng.shuffle(pool)
        families: list[Family] = []
        for index, item in enumerate(pool[:count]):
            for template in group["families"]:
                family = self.family(rng, {**template, **item}, self.values(index=index))
                if family is not None:
                    families.append(family)
        return families


@cache
def world() -> _World:
    raw = yaml.safe_load(files("dreamkeeper.demo").joinpath("data", WORLD_FILE).read_text(encoding="utf-8"))
    lists = {name: [_record(item) for item in items] for name, items in raw["lists"].items()}
    return _World(
        raw,
        datetime.fromisoformat(raw["anchor"]),
        SimpleNamespace(**raw["user"]),
        lists,
        _Templates(raw["lists"]["months"]),
    )


# The sample's "now": fixed so the generator is deterministic; archive ages are relative to it.
ANCHOR = world().anchor
USER_FIRST: str = world().user.first
USER_FULL: str = world().user.full
USER_LEGAL: str = world().user.legal


def make_people(rng: random.Random, count: int) -> list[Person]:
    data = world()
    names = [(first, last) for first in data.lists["first_names"] for last in data.lists["last_names"]]
    rng.shuffle(names)
    people = []
    for first, last in names[:count]:
        values = data.values()
        data.draw(rng, data.raw["person"]["draws"], values)
        company, city = values["company"], values["city"]
        people.append(Person(first, last, company.name, company.domain, values["role"], city.name, values["phone"]))
    return people


def fixed_families() -> list[Family]:
    """The entries every sample has: the high-value ones from RockBot's forensic table and the user's identity."""
    data = world()
    unused = random.Random(0)  # fixed families have no draws, so the caller's generator is not advanced
    return [family for t in data.raw["fixed"] if (family := data.family(unused, t, data.values())) is not None]


def person_families(rng: random.Random, person: Person, index: int) -> list[Family]:
    """Several facts about one person; the identity fact carries the contact specifics."""
    return world().group(rng, "colleague", person=person, index=index)


def project_families(rng: random.Random, people: list[Person]) -> list[Family]:
    data = world()
    return [f for project in data.lists["projects"] for f in data.group(rng, "project", project=project, people=people)]


def trip_families(rng: random.Random, count: int) -> list[Family]:
    return _indexed(rng, "trip", count)


def ephemeral_families(rng: random.Random, people: list[Person], count: int) -> list[Family]:
    """Present-tense status notes: the only thing consolidation may prune standalone."""
    return _indexed(rng, "status", count, people=people)


def misc_families(rng: random.Random, count: int) -> list[Family]:
    """Uncategorised odds and ends (RockBot puts these at the memory root)."""
    return world().shuffled(rng, "misc", count)


def fragment_family(rng: random.Random, person: Person) -> Family:
    """Many small notes about one colleague, each with its own specific — the shape of a good 13-source merge."""
    (family,) = world().group(rng, "fragments", person=person)
    return family


def knowledge_families(rng: random.Random, count: int) -> list[Family]:
    """What the agent learned about its tools and infrastructure: hostnames, ports, versions, quirks."""
    return _indexed(rng, "knowledge", count)


def preference_families(rng: random.Random, count: int) -> list[Family]:
    """Inferred preferences: the entries RockBot's #580 save-time dedupe found copied most often."""
    return world().shuffled(rng, "preferences", count)


def torn_entry(entry_id: str) -> dict[str, Any]:
    """The fields of the one torn file each sample has (written cut short by sample.py)."""
    return {"id": entry_id, **world().raw["torn"]}


def _indexed(rng: random.Random, name: str, count: int, **context: Any) -> list[Family]:
    families: Iterable[list[Family]] = (world().group(rng, name, index=index, **context) for index in range(count))
    return [family for group in families for family in group]
