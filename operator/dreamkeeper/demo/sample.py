"""A deterministic sample agent directory in RockBot's on-disk format, for ``make demo``, tests and benches.

``generate_sample(agent_dir, seed, size)`` writes ``size`` entry files (plus exactly one malformed, torn file)
under ``agent_dir/memory``, embeddings under ``memory/.embeddings``, and ``merge-coverage-vocabulary.json``.
The shapes are the ones that matter for consolidation: high-value entries (0.99 importance, 200x reinforcement),
restatements of one fact, restatements that add specifics, byte-identical duplicates, stale status notes, review
and decline stamps, archived and superseded entries, older files without the archive fields, PascalCase keys,
unknown fields and metadata keys.

The facts come from ``world.py`` (data in ``data/world.yaml``), the vocabulary file is ``data/vocabulary.json``
verbatim. The default sample is shipped in the package (``dreamkeeper/demo/data/sample-agent``); regenerate it
with ``python -m dreamkeeper.demo.sample --write-bundled``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import struct
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from dreamkeeper.coverage import VOCABULARY_FILE
from dreamkeeper.demo.world import (
    ANCHOR,
    Family,
    ephemeral_families,
    fixed_families,
    fragment_family,
    knowledge_families,
    make_people,
    misc_families,
    person_families,
    preference_families,
    project_families,
    torn_entry,
    trip_families,
)
from dreamkeeper.memory import (
    EMBEDDINGS_DIR,
    REASON_EPHEMERAL,
    REASON_MERGED_INTO,
    cluster_hash,
    embedding_file_name,
    memory_root,
    review_hash,
)

DEFAULT_SEED = 7
DEFAULT_SIZE = 300
EMBEDDING_DIM = 64
DATA = Path(__file__).resolve().parent / "data"
BUNDLED_SAMPLE = DATA / "sample-agent"
VOCABULARY_SOURCE = DATA / "vocabulary.json"  # RockBot's format: JSON with comments and trailing commas


class SampleSummary(BaseModel):
    """What was generated. Ids in the groups are in file-writing order; the canonical entry comes first."""

    agent_dir: Path
    memory_dir: Path
    seed: int
    size: int
    anchor: datetime
    entry_files: int
    live: int
    archived: int
    superseded: int
    embeddings: int
    malformed: list[str]
    categories: dict[str, int]
    exact_duplicate_groups: list[list[str]]
    near_duplicate_groups: list[list[str]]
    high_value_ids: list[str]
    purge_due_ids: list[str]


class SampleExistsError(FileExistsError):
    def __init__(self, path: Path) -> None:
        super().__init__(f"{path} exists and is not empty; the sample is only written into a new or empty directory")


@dataclass
class _Planned:
    family: Family
    text: str
    kind: str  # canonical | restatement | elaboration | duplicate | fragment
    index: int  # position within the family on disk
    obj: dict[str, Any] = field(default_factory=dict)
    vector: list[float] | None = None
    updated: datetime = ANCHOR


def generate_sample(agent_dir: Path, seed: int = DEFAULT_SEED, size: int = DEFAULT_SIZE) -> SampleSummary:
    """Write a sample agent directory. Same (seed, size) → byte-identical files. Refuses a non-empty directory."""
    if size < 20:
        raise ValueError(f"size must be at least 20 (got {size}): the fixed high-value entries alone need 20")
    agent_dir = Path(agent_dir)
    if agent_dir.exists() and (not agent_dir.is_dir() or any(agent_dir.iterdir())):
        raise SampleExistsError(agent_dir)
    rng = random.Random(seed)
    planned = _plan(rng, size)
    ids = _assign_ids(rng, planned)
    _fill_entries(rng, planned, ids)
    _embed(rng, planned)
    return _write(agent_dir, rng, planned, ids, seed, size)


# ---- planning -------------------------------------------------------------------------------------------------


def _families(rng: random.Random, size: int) -> list[Family]:
    people = make_people(rng, max(12, size // 4))
    random_families: list[Family] = []
    for index, person in enumerate(people[1:]):
        random_families += person_families(rng, person, index)
    random_families += project_families(rng, people)
    random_families += trip_families(rng, max(4, size // 15))
    random_families += ephemeral_families(rng, people, max(6, size // 12))
    random_families += misc_families(rng, 6)
    random_families += knowledge_families(rng, max(4, size // 12))
    random_families += preference_families(rng, 6)
    rng.shuffle(random_families)
    return [*fixed_families(), fragment_family(rng, people[0]), *random_families]


def _plan(rng: random.Random, size: int) -> list[_Planned]:
    planned: list[_Planned] = []
    for family in _families(rng, size):
        if family.key == "fragments":
            texts = [(text, "fragment") for text in family.variants]
        elif family.reinforcement is not None:  # the fixed entries: every wording is on disk
            texts = [(family.variants[0], "canonical")]
            texts += [(text, "restatement") for text in family.variants[1:]]
            texts += [(text, "elaboration") for text in family.elaborations]
        else:
            texts = _pick_copies(rng, family)
        for index, (text, kind) in enumerate(texts):
            planned.append(_Planned(family, text, kind, index))
        if len(planned) >= size:
            break
    return planned[:size]


def _pick_copies(rng: random.Random, family: Family) -> list[tuple[str, str]]:
    canonical = family.variants[0]
    texts = [(canonical, "canonical")]
    if family.ephemeral:
        if rng.random() < 0.1:
            texts.append((canonical, "duplicate"))
        return texts
    roll = rng.random()
    restatements = family.variants[1:]
    if roll < 0.55:
        pass
    elif roll < 0.70 and restatements:
        texts.append((rng.choice(restatements), "restatement"))
    elif roll < 0.82 and family.elaborations:
        texts.append((rng.choice(family.elaborations), "elaboration"))
    elif roll < 0.86:
        texts.append((canonical, "duplicate"))
    elif roll < 0.93:
        texts += [(text, "restatement") for text in restatements]
        texts += [(text, "elaboration") for text in family.elaborations]
    else:
        texts += [(text, "restatement") for text in restatements]
        texts += [(text, "elaboration") for text in family.elaborations]
        texts.append((canonical, "duplicate"))
    return texts


def _assign_ids(rng: random.Random, planned: list[_Planned]) -> list[str]:
    ids: list[str] = []
    seen: set[str] = set()
    while len(ids) < len(planned):
        candidate = f"{rng.getrandbits(48):012x}"
        if candidate not in seen:
            seen.add(candidate)
            ids.append(candidate)
    return ids


# ---- entry fields ---------------------------------------------------------------------------------------------


def dotnet_timestamp(value: datetime, rng: random.Random) -> str:
    """.NET round-trip ("O") form of a DateTimeOffset: 7 fractional digits and an explicit +00:00 offset."""
    # The 7th digit (100 ns ticks) is below Python's resolution: random, so order between values is kept.
    return f"{value:%Y-%m-%dT%H:%M:%S}.{value.microsecond:06d}{rng.randrange(10)}+00:00"


def _reinforcement(rng: random.Random) -> int:
    count = 1
    while count < 12 and rng.random() < 0.35:
        count += rng.randint(1, 2)
    return count


def _fill_entries(rng: random.Random, planned: list[_Planned], ids: list[str]) -> None:
    family_start: dict[str, datetime] = {}
    canonical_of: dict[str, int] = {}
    for position, item in enumerate(planned):
        family = item.family
        start = family_start.setdefault(family.key, ANCHOR - timedelta(days=rng.randint(20, 400)))
        created = start + timedelta(
            days=rng.randint(0, 15) * item.index, seconds=rng.randint(0, 86399), microseconds=rng.randrange(10**6)
        )
        updated = min(created + timedelta(days=rng.choice([0, 0, 0, 1, 3, 12])), ANCHOR - timedelta(hours=1))
        last_seen = min(created + timedelta(days=rng.randint(0, 60)), ANCHOR - timedelta(hours=2))
        created_text = dotnet_timestamp(created, rng)
        item.updated = max(updated, created)
        if item.kind == "canonical" and family.reinforcement is not None:
            reinforcement = family.reinforcement
        else:
            reinforcement = _reinforcement(rng)
        importance = family.importance if item.index == 0 else family.importance + rng.uniform(-0.08, 0.05)
        metadata: dict[str, str] | None = None
        if family.subject_time or rng.random() < 0.35:
            metadata = {}
            if family.subject_time:
                metadata["subjectTime"] = family.subject_time
            if rng.random() < 0.6:
                metadata["source"] = rng.choice(["conversation", "email-mining", "calendar", "preference-inference"])
            if rng.random() < 0.3:
                metadata["sessionId"] = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        item.obj = {
            "id": ids[position],
            "content": item.text,
            "category": family.category or None,
            "tags": list(family.tags),
            "createdAt": created_text,
            "updatedAt": created_text if updated <= created else dotnet_timestamp(updated, rng),
            "lastSeenAt": created_text if last_seen <= created else dotnet_timestamp(last_seen, rng),
            "reinforcementCount": reinforcement,
            "importanceScore": round(min(1.0, max(0.05, importance)), 2),
            "metadata": metadata,
            "supersededBy": None,
            "archivedAt": None,
            "archiveReason": None,
        }
        if item.index == 0:
            canonical_of[family.key] = position
    _stamp_reviews(rng, planned)
    _archive_some(rng, planned, canonical_of)
    _vary_shapes(rng, planned)


def _set_meta(obj: dict[str, Any], **values: str) -> None:
    metadata = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
    metadata.update(values)
    obj["metadata"] = metadata


def _stamp_reviews(rng: random.Random, planned: list[_Planned]) -> None:
    """About 40% reviewed-and-unchanged, a few with a stale stamp (content edited after review)."""
    for item in planned:
        roll = rng.random()
        if roll < 0.40:
            reviewed_hash = review_hash(item.text)
        elif roll < 0.45:
            reviewed_hash = review_hash(item.text + " (earlier wording)")
        else:
            continue
        reviewed_at = ANCHOR - timedelta(
            days=rng.randint(1, 10), seconds=rng.randint(0, 86399), microseconds=rng.randrange(10**6)
        )
        _set_meta(
            item.obj,
            consolidationReviewedHash=reviewed_hash,
            consolidationReviewedAt=dotnet_timestamp(reviewed_at, rng),
        )
    # One restatement pair that a pass left separate: decline stamps, as RockBot writes them.
    by_family: dict[str, list[_Planned]] = {}
    for item in planned:
        by_family.setdefault(item.family.key, []).append(item)
    for members in by_family.values():
        if len(members) == 2 and members[1].kind == "restatement":
            ids = [m.obj["id"] for m in members]
            declined_at = dotnet_timestamp(ANCHOR - timedelta(days=3, seconds=rng.randint(0, 86399)), rng)
            for member in members:
                _set_meta(
                    member.obj,
                    consolidationReviewedHash=review_hash(member.text),
                    consolidationReviewedAt=declined_at,
                    consolidationDeclinedCluster=cluster_hash(ids),
                    consolidationDeclinedAt=declined_at,
                    consolidationDeclinedCount="1",
                )
            break


def _archive_some(rng: random.Random, planned: list[_Planned], canonical_of: dict[str, int]) -> None:
    """What earlier dream cycles left behind: merged-away copies and pruned status notes, old and recent."""
    ages = [150, 120, 100, 60, 20, 5]
    merged = 0
    for item in planned:
        if item.kind not in ("duplicate", "restatement") or merged >= 8 or rng.random() < 0.6:
            continue
        survivor = planned[canonical_of[item.family.key]]
        age = timedelta(days=ages[merged % len(ages)])
        if (
            survivor is item
            or survivor.obj["archivedAt"] is not None
            or max(item.updated, survivor.updated) > ANCHOR - age
        ):
            continue
        archived_at = dotnet_timestamp(
            ANCHOR - timedelta(days=ages[merged % len(ages)], seconds=rng.randint(0, 86399)), rng
        )
        item.obj["archivedAt"] = archived_at
        item.obj["archiveReason"] = REASON_MERGED_INTO + survivor.obj["id"]
        meta = survivor.obj.get("metadata") or {}
        sources = [s for s in meta.get("mergedFrom", "").split(",") if s] + [item.obj["id"]]
        _set_meta(survivor.obj, mergedFrom=",".join(sources), mergedAt=archived_at)
        merged += 1
    pruned = 0
    for item in planned:
        if not item.family.ephemeral or item.kind != "canonical" or pruned >= 6 or rng.random() < 0.5:
            continue
        if "mergedFrom" in (item.obj.get("metadata") or {}) or item.updated > ANCHOR - timedelta(
            days=ages[pruned % len(ages)]
        ):
            continue  # a merge survivor stays live; nothing is archived before it was last written
        item.obj["archivedAt"] = dotnet_timestamp(
            ANCHOR - timedelta(days=ages[pruned % len(ages)], seconds=rng.randint(0, 86399)), rng
        )
        item.obj["archiveReason"] = REASON_EPHEMERAL
        pruned += 1
    # A high-value entry archived long ago: purge must keep it whatever its age.
    for item in planned:
        if item.kind == "elaboration" and item.family.key == "family-will":
            item.obj["archivedAt"] = dotnet_timestamp(ANCHOR - timedelta(days=200), rng)
            item.obj["archiveReason"] = "replaced by identity reflection"
    # A superseded entry: hidden from live listing by RockBot, not archived.
    for item in planned:
        if item.kind == "elaboration" and item.obj["archivedAt"] is None and item.family.key.startswith("trip-"):
            survivor = planned[canonical_of[item.family.key]]
            item.obj["supersededBy"] = survivor.obj["id"]
            break


def _vary_shapes(rng: random.Random, planned: list[_Planned]) -> None:
    """The file shapes a real volume accumulates across RockBot versions."""
    pascal_budget = 3
    for item in planned:
        obj = item.obj
        roll = rng.random()
        if roll < 0.08 and obj["archivedAt"] is None and obj["supersededBy"] is None:
            # Written before the archive tier existed: no archive fields at all.
            for key in ("supersededBy", "archivedAt", "archiveReason"):
                del obj[key]
        elif roll < 0.14:
            obj["sourceSessionId"] = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        elif roll < 0.17 and (obj["category"] or "").startswith("agent-knowledge"):
            obj["verify"] = {"command": "kubectl get pods -n agents", "expect": "Running", "checkedAt": None}
        if obj.get("metadata") and rng.random() < 0.1:
            obj["metadata"]["x-importedBy"] = "memory-mining/v2"
        if pascal_budget and obj.get("archivedAt") is None and rng.random() < 0.02:
            # An early release serialised with PascalCase names; RockBot reads case-insensitively.
            item.obj = {key[0].upper() + key[1:]: value for key, value in obj.items()}
            pascal_budget -= 1


# ---- embeddings -----------------------------------------------------------------------------------------------


def _unit(values: list[float]) -> list[float]:
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [v / norm for v in values]


def _gauss_vector(rng: random.Random) -> list[float]:
    return _unit([rng.gauss(0.0, 1.0) for _ in range(EMBEDDING_DIM)])


def _embed(rng: random.Random, planned: list[_Planned]) -> None:
    """Most entries have a vector; copies of one fact get close vectors (noise by how much the wording differs)."""
    category_base: dict[str, list[float]] = {}
    family_base: dict[str, list[float] | None] = {}
    canonical_vector: dict[str, list[float]] = {}
    noise = {"canonical": 0.12, "restatement": 0.28, "elaboration": 0.38, "fragment": 0.55}
    for item in planned:
        family = item.family
        if family.key not in family_base:
            if rng.random() < 0.3:
                family_base[family.key] = None  # mined before embeddings were enabled
            else:
                top = family.category.split("/")[0] if family.category else ""
                cat = category_base.setdefault(top, _gauss_vector(rng))
                own = _gauss_vector(rng)
                family_base[family.key] = _unit([0.45 * c + o for c, o in zip(cat, own, strict=True)])
        base = family_base[family.key]
        if base is None or rng.random() < 0.1:
            continue
        if item.kind == "duplicate" and family.key in canonical_vector:
            item.vector = canonical_vector[family.key]  # same text, same embedding
            continue
        eps = noise.get(item.kind, 0.12)
        item.vector = _unit([b + eps * g for b, g in zip(base, _gauss_vector(rng), strict=True)])
        if item.kind == "canonical":
            canonical_vector[family.key] = item.vector


# ---- writing --------------------------------------------------------------------------------------------------


def _entry_relpath(obj: dict[str, Any]) -> Path:
    lowered = {key.lower(): value for key, value in obj.items()}
    category = lowered.get("category")
    directory = Path(*category.split("/")) if category else Path()
    return directory / f"{lowered['id']}.json"


def _write(
    agent_dir: Path, rng: random.Random, planned: list[_Planned], ids: list[str], seed: int, size: int
) -> SampleSummary:
    memory_dir = memory_root(agent_dir)
    embeddings_dir = memory_dir / EMBEDDINGS_DIR
    embeddings_dir.mkdir(parents=True, exist_ok=True)
    for entry_id, item in zip(ids, planned, strict=True):
        path = memory_dir / _entry_relpath(item.obj)
        path.parent.mkdir(parents=True, exist_ok=True)
        # RockBot: System.Text.Json, indented, no trailing newline.
        path.write_text(json.dumps(item.obj, indent=2, ensure_ascii=False), encoding="utf-8")
        if item.vector is not None:
            (embeddings_dir / embedding_file_name(entry_id)).write_bytes(
                struct.pack(f"<{EMBEDDING_DIM}f", *item.vector)
            )
    # Exactly one torn file, as a non-atomic write interrupted mid-way leaves it.
    torn_id = f"{rng.getrandbits(48):012x}"
    while torn_id in ids:
        torn_id = f"{rng.getrandbits(48):012x}"
    torn_obj = torn_entry(torn_id)
    torn = json.dumps(torn_obj, indent=2)
    torn_path = memory_dir / _entry_relpath(torn_obj)
    torn_path.parent.mkdir(parents=True, exist_ok=True)
    torn_path.write_text(torn[: len(torn) * 3 // 5], encoding="utf-8")
    (agent_dir / VOCABULARY_FILE).write_bytes(VOCABULARY_SOURCE.read_bytes())
    return _summarise(agent_dir, planned, [torn_path.relative_to(agent_dir).as_posix()], seed, size)


def _summarise(agent_dir: Path, planned: list[_Planned], malformed: list[str], seed: int, size: int) -> SampleSummary:
    def field_of(item: _Planned, name: str) -> Any:
        return {key.lower(): value for key, value in item.obj.items()}.get(name.lower())

    categories: dict[str, int] = {}
    families: dict[str, list[_Planned]] = {}
    for item in planned:
        top = (item.family.category or "(uncategorized)").split("/")[0]
        categories[top] = categories.get(top, 0) + 1
        families.setdefault(item.family.key, []).append(item)
    exact: list[list[str]] = []
    near: list[list[str]] = []
    for members in families.values():
        if len(members) < 2 or members[0].kind == "fragment":
            continue
        near.append([field_of(m, "id") for m in members])
        texts: dict[str, list[str]] = {}
        for member in members:
            texts.setdefault(member.text, []).append(field_of(member, "id"))
        exact += [group for group in texts.values() if len(group) > 1]
    archived = [item for item in planned if field_of(item, "archivedAt")]
    purge_cutoff = ANCHOR - timedelta(days=90)
    purge_due = [
        field_of(item, "id")
        for item in archived
        if datetime.fromisoformat(field_of(item, "archivedAt")[:26] + "+00:00") < purge_cutoff
        and field_of(item, "importanceScore") < 0.8
        and field_of(item, "reinforcementCount") < 5
    ]
    return SampleSummary(
        agent_dir=agent_dir,
        memory_dir=memory_root(agent_dir),
        seed=seed,
        size=size,
        anchor=ANCHOR,
        entry_files=len(planned),
        live=sum(1 for item in planned if not field_of(item, "archivedAt") and not field_of(item, "supersededBy")),
        archived=len(archived),
        superseded=sum(1 for item in planned if field_of(item, "supersededBy")),
        embeddings=sum(1 for item in planned if item.vector is not None),
        malformed=malformed,
        categories=dict(sorted(categories.items())),
        exact_duplicate_groups=exact,
        near_duplicate_groups=near,
        high_value_ids=[
            field_of(item, "id")
            for item in planned
            if field_of(item, "importanceScore") >= 0.8 or field_of(item, "reinforcementCount") >= 5
        ],
        purge_due_ids=purge_due,
    )


# ---- the bundled copy -----------------------------------------------------------------------------------------


def copy_bundled(dest: Path) -> None:
    """Copy the shipped default sample (seed 7, size 300) into a new or empty directory."""
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise SampleExistsError(dest)
    if not memory_root(BUNDLED_SAMPLE).is_dir():
        raise FileNotFoundError(f"the bundled sample is missing from the package ({BUNDLED_SAMPLE})")
    shutil.copytree(BUNDLED_SAMPLE, dest, dirs_exist_ok=True)


def write_bundled(target: Path = BUNDLED_SAMPLE) -> SampleSummary:
    """Regenerate the shipped sample. Package data, not an agent's memory: replacing it is not a memory deletion."""
    staging = target.with_name(target.name + ".new")
    if staging.exists():
        shutil.rmtree(staging)
    summary = generate_sample(staging, DEFAULT_SEED, DEFAULT_SIZE)
    if target.exists():
        shutil.rmtree(target)
    os.rename(staging, target)
    return summary.model_copy(update={"agent_dir": target, "memory_dir": memory_root(target)})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m dreamkeeper.demo.sample", description=__doc__.split("\n")[0])
    parser.add_argument("dest", nargs="?", type=Path, help="new or empty agent directory to write")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--size", type=int, default=DEFAULT_SIZE)
    parser.add_argument("--write-bundled", action="store_true", help=f"regenerate {BUNDLED_SAMPLE}")
    args = parser.parse_args(argv)
    if args.write_bundled:
        summary = write_bundled()
    elif args.dest is None:
        parser.error("give DEST or --write-bundled")
    else:
        summary = generate_sample(args.dest, args.seed, args.size)
    print(summary.model_dump_json(indent=2))


if __name__ == "__main__":
    main()
