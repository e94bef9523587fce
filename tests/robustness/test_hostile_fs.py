"""The hostile filesystem (issue 16): random special files, permissions, names, sizes, nesting and encodings in
random places of an agent directory, and a cycle run on it as the agent's own (unprivileged) user.

Invariants: the cycle ends within a bound with a clear result (``completed`` or ``failed``, or one clear error);
every parseable entry's file is still where it was with its content; every hazard outside our own state directory
is left exactly as it was (never opened, never written); nothing outside the agent directory is touched."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dreamkeeper.memory import MemoryStoreError
from tests.robustness.conftest import as_nobody, give_to_nobody, make_agent, privileges, run_dream, tree, warm_up

BOUND_SECONDS = 120
KINDS = (
    "fifo",
    "socket",
    "device",
    "symlink-out-file",
    "symlink-out-dir",
    "symlink-loop",
    "dangling-symlink",
    "unreadable-file",
    "unwritable-dir",
    "odd-name",
    "long-name",
    "sparse-huge",
    "empty",
    "deep-json",
    "nested-500",
    "utf16",
    "latin1",
    "nul-bytes",
    "bom-valid",
    "duplicate-keys",
    "misfiled",
    "extreme-values",
)
PLACES = ("root", "category", "new-dir", "embeddings", "vocabulary", "directive", "state")


@dataclass(frozen=True)
class Hazard:
    kind: str
    place: str
    salt: int


hazards = st.lists(
    st.builds(Hazard, st.sampled_from(KINDS), st.sampled_from(PLACES), st.integers(0, 10**6)), min_size=1, max_size=8
)


def _entry(entry_id: str, **fields: Any) -> dict[str, Any]:
    return {"id": entry_id, "content": f"Hostile note {entry_id}", "category": None, **fields}


def _place(agent: Path, hazard: Hazard, categories: list[Path]) -> Path:
    memory = agent / "memory"
    name = f"hz{hazard.salt:010d}"
    if hazard.place == "root":
        return memory / f"{name}.json"
    if hazard.place == "category":
        return categories[hazard.salt % len(categories)] / f"{name}.json"
    if hazard.place == "new-dir":
        return memory / f"d{hazard.salt % 7}" / f"{name}.json"
    if hazard.place == "embeddings":
        return memory / ".embeddings" / f"{name}.bin"
    if hazard.place == "vocabulary":
        return agent / "merge-coverage-vocabulary.json"
    if hazard.place == "directive":
        return agent / "dream.md"
    return agent / ".dreamkeeper" / ("ledger.json", "lock.json", "journal/x.jsonl", "cycles/x.json")[hazard.salt % 4]


def _make(agent: Path, outside: Path, hazard: Hazard, categories: list[Path]) -> Path | None:
    """Put one hazard in place; returns its path (None when the place was taken)."""
    path = _place(agent, hazard, categories)
    if os.path.lexists(path) or os.path.lexists(path.with_suffix("")):  # symlink-out-dir takes the stem
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    kind, stem = hazard.kind, path.stem
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        if len(str(path)) > 100:
            return None  # AF_UNIX paths are short
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(path))
    elif kind == "device":
        try:
            os.mknod(path, 0o644 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero's numbers
        except PermissionError:
            os.mkfifo(path)
    elif kind == "symlink-out-file":
        path.symlink_to(outside / "secret.json")
    elif kind == "symlink-out-dir":
        path.with_suffix("").symlink_to(outside, target_is_directory=True)
        return path.with_suffix("")
    elif kind == "symlink-loop":
        path.symlink_to(path)
    elif kind == "dangling-symlink":
        path.symlink_to(outside / "no-such-file")
    elif kind == "unreadable-file":
        path.write_text(json.dumps(_entry(stem)))
        os.chmod(path, 0)
    elif kind == "unwritable-dir":
        directory = path.parent / f"ro{hazard.salt % 5}"
        directory.mkdir(exist_ok=True)
        (directory / f"{stem}.json").write_text(json.dumps(_entry(stem, category=None)))  # misfiled, too
        os.chmod(directory, 0o555)
        return directory
    elif kind == "odd-name":
        odd = path.with_name(f"{stem} é\n\t.json")
        odd.write_text(json.dumps(_entry(odd.stem)))
        return odd
    elif kind == "long-name":
        long = path.with_name(("x" * 245) + ".json")
        long.write_text(json.dumps(_entry("x" * 245)))
        return long
    elif kind == "sparse-huge":
        with open(path, "wb") as out:
            out.truncate(9 * 1024 * 1024)
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "deep-json":
        path.write_text(f'{{"id": "{stem}", "x": {"[" * 100_000 + "]" * 100_000}}}')
    elif kind == "nested-500":
        path.write_text(f'{{"id": "{stem}", "x": {"[" * 500 + "]" * 500}}}')
    elif kind == "utf16":
        path.write_bytes(json.dumps(_entry(stem)).encode("utf-16"))
    elif kind == "latin1":
        path.write_bytes(json.dumps(_entry(stem, content="caf\u00e9"), ensure_ascii=False).encode("latin-1"))
    elif kind == "nul-bytes":
        path.write_bytes(b'{"id": "' + stem.encode() + b'", "content": "a\x00b"}\x00')
    elif kind == "bom-valid":
        path.write_bytes(b"\xef\xbb\xbf" + json.dumps(_entry(stem, category=_category_of(agent, path))).encode())
        return None  # a valid entry: a parseable entry, not a hazard (its content must survive)
    elif kind == "duplicate-keys":
        path.write_text(f'{{"id": "{stem}", "content": "one", "content": "two"}}')
    elif kind == "misfiled":
        path.write_text(json.dumps(_entry(stem.upper(), category="elsewhere")))
    elif kind == "extreme-values":
        stamps = {"consolidationDeclinedCount": "1000000", "consolidationDeclinedAt": "9999-12-31T23:59:59+00:00"}
        obj = _entry(
            stem,
            category=_category_of(agent, path),
            createdAt="0001-01-01T00:00:00+00:00",
            lastSeenAt="9999-12-31T23:59:59.9999999+00:00",
            importanceScore=1e308,
            reinforcementCount=10**18,
            metadata=stamps,
        )
        path.write_text(json.dumps(obj))
        return None  # parseable: it must survive like any entry
    return path


def _category_of(agent: Path, path: Path) -> str | None:
    try:
        relative = path.parent.relative_to(agent / "memory")
    except ValueError:
        return None
    return None if str(relative) == "." else relative.as_posix()


def _entries(agent: Path) -> dict[str, str]:
    """Every parseable entry file (as RockBot would read it, our rules aside): path -> content."""
    found = {}
    for path in (agent / "memory").rglob("*.json"):
        if path.is_symlink() or not path.is_file():
            continue
        try:
            with privileges():
                obj = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            continue
        if isinstance(obj, dict) and isinstance(obj.get("content"), str):
            found[str(path)] = obj["content"]
    return found


def _run_bounded(agent: Path) -> tuple[Any, BaseException | None]:
    result: list[Any] = []
    error: list[BaseException] = []

    def work() -> None:
        try:
            result.append(run_dream(agent, retention_days=0).report)  # type: ignore[attr-defined]
        except BaseException as exc:
            error.append(exc)

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(BOUND_SECONDS)
    assert not worker.is_alive(), f"the cycle did not end within {BOUND_SECONDS} s"
    return (result[0] if result else None), (error[0] if error else None)


def check_hostile(base: Path, drawn: list[Hazard]) -> None:
    agent = make_agent(base / "agent", size=40)
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.json").write_text(json.dumps(_entry("secret0000001", content="outside the agent dir")))
    categories = sorted({p.parent for p in (agent / "memory").rglob("*.json")})
    made = [p for p in (_make(agent, outside, h, categories) for h in drawn) if p is not None]
    give_to_nobody(agent)
    before_outside, before_all = tree(outside), tree(agent)
    before_hazards = {str(p): before_all.get(p.relative_to(agent).as_posix()) for p in made}
    entries = _entries(agent)
    with as_nobody():
        report, error = _run_bounded(agent)
    if error is not None:
        assert isinstance(error, MemoryStoreError | OSError), repr(error)  # a clear error, not a crash
        assert "Traceback" not in str(error)
    else:
        assert report.result in ("completed", "failed")
        read = [  # hazards the scan reads (it lists only regular *.json files; links and special files it passes)
            p
            for p in made
            if (agent / "memory") in p.parents
            and ".embeddings" not in p.parts
            and p.suffix == ".json"
            and stat.S_ISREG(os.lstat(p).st_mode)
        ]
        assert report.malformed + report.quarantined >= min(1, len(read))  # the scan met them
    after_all = tree(agent)
    for path, content in entries.items():
        key = Path(path).relative_to(agent).as_posix()
        assert key in after_all, f"{path} is gone"
        assert json.loads(after_all[key])["content"] == content  # type: ignore[arg-type]
    for path, kind in before_hazards.items():
        if (agent / ".dreamkeeper") in Path(path).parents:
            continue  # our own state: a FIFO named ledger.json is replaced by the ledger, a bad journal set aside
        assert after_all.get(Path(path).relative_to(agent).as_posix()) == kind, path
    assert tree(outside) == before_outside
    assert sorted(p.name for p in base.iterdir()) == ["agent", "outside"]


@pytest.fixture(scope="module")
def warmed(cli_app: typer.Typer, tmp_path_factory: pytest.TempPathFactory) -> None:
    warm_up(cli_app, tmp_path_factory.mktemp("warm"))


def _base() -> Path:
    base = Path(tempfile.mkdtemp(prefix="dk-hostile-", dir="/tmp"))
    os.chmod(base, 0o755)
    return base


def _remove(base: Path) -> None:
    for directory, subdirs, _ in os.walk(base):
        for name in subdirs:
            sub = Path(directory, name)
            if not sub.is_symlink():
                os.chmod(sub, 0o755)  # the unwritable directories, so that their files can go
    shutil.rmtree(base, ignore_errors=True)


def in_fresh_base(drawn: list[Hazard]) -> None:
    base = _base()
    try:
        check_hostile(base, drawn)
    finally:
        _remove(base)


def test_every_hazard_at_once(warmed: None) -> None:
    places = [p for p in PLACES if p != "state"]  # a hostile state file may stop the cycle (clearly): not here
    in_fresh_base([Hazard(kind, places[i % len(places)], i * 7919) for i, kind in enumerate(KINDS * 2)])


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=hazards)
def test_random_hazards(warmed: None, drawn: list[Hazard]) -> None:
    in_fresh_base(drawn)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=hazards)
@example(drawn=[Hazard("deep-json", "state", 0)])  # a 100k-deep ledger.json: RecursionError, not ValueError
@example(drawn=[Hazard("symlink-out-dir", "root", 0), Hazard("symlink-out-dir", "root", 0)])  # one place, twice
@example(drawn=[Hazard("sparse-huge", "state", 2)])  # 9 MB of NULs as a journal: a LookupError from json
def test_random_hazards_quick(warmed: None, drawn: list[Hazard]) -> None:
    in_fresh_base(drawn)
