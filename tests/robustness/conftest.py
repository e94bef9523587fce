"""Shared pieces of the robustness suite: an agent directory, the root CLI in-process, a snapshot of a tree that
tells every kind of file apart, and a way to lose root's privileges for a while (CI runs the tests as root, for
whom permission bits mean nothing)."""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from bench.sim.world import write_synthetic_corpus
from typer.testing import CliRunner, Result

NOBODY = 65534


@pytest.fixture(scope="session")
def cli_app() -> typer.Typer:
    from dreamkeeper import cli

    cli._register()
    return cli.app


def invoke(app: typer.Typer, *args: object) -> Result:
    root = logging.getLogger()
    handlers = list(root.handlers)
    try:
        return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=True)
    finally:
        # The root command's logging.basicConfig attached a handler to the runner's stream, closed by now.
        for handler in root.handlers[len(handlers) :]:
            root.removeHandler(handler)


def make_agent(directory: Path, size: int = 60, seed: int = 7) -> Path:
    """An agent directory holding ``size`` synthetic entries (near-duplicates and exact duplicates among them)."""
    write_synthetic_corpus(directory / "memory", size, seed)
    return directory


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    return make_agent(tmp_path / "agent")


def tree(root: Path) -> dict[str, object]:
    """Every path under ``root`` (hidden ones too): a file's bytes, a symlink's target, or the kind of a special
    file, without ever opening a special file or following a link."""
    found: dict[str, object] = {}
    for directory, subdirs, files in os.walk(root, followlinks=False):
        for name in subdirs + files:
            path = Path(directory, name)
            st = os.lstat(path)
            key = path.relative_to(root).as_posix()
            if stat.S_ISLNK(st.st_mode):
                found[key] = ("symlink", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                found[key] = ("dir", stat.S_IMODE(st.st_mode))
            elif stat.S_ISREG(st.st_mode):
                with privileges():
                    found[key] = path.read_bytes()
            else:
                found[key] = ("special", stat.S_IFMT(st.st_mode))
    return found


@contextlib.contextmanager
def privileges() -> Iterator[None]:
    """Root's privileges back for a moment (inside ``as_nobody``); nothing when not dropped."""
    if os.geteuid() != 0 and os.getuid() == 0:
        euid, egid = os.geteuid(), os.getegid()
        os.seteuid(0)
        os.setegid(0)
        try:
            yield
        finally:
            os.setegid(egid)
            os.seteuid(euid)
    else:
        yield


@contextlib.contextmanager
def as_nobody() -> Iterator[None]:
    """Run the block with effective uid/gid nobody when the tests run as root, so permission bits really apply
    (root's capabilities are dropped from the effective set with the uid, and restored after). As another user
    this does nothing: the bits already apply.

    Python's own files may be out of nobody's reach (a pyenv under /root): whatever the block imports lazily must
    be imported before (``warm_up``)."""
    if os.geteuid() != 0:
        yield
        return
    groups = os.getgroups()
    os.setgroups([])
    os.setegid(NOBODY)
    os.seteuid(NOBODY)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)
        os.setgroups(groups)


def give_to_nobody(root: Path) -> None:
    """Hand ``root``'s tree to nobody (the agent's own user, as on a volume with fsGroup): what the cycle then writes
    it writes as nobody. ``root`` must sit where nobody can reach it (``reachable_dir``)."""
    if os.geteuid() != 0:
        return
    for directory, subdirs, files in os.walk(root):
        for name in [".", *subdirs, *files]:
            path = Path(directory, name)
            if not path.is_symlink():
                os.chown(path, NOBODY, NOBODY)


@pytest.fixture
def reachable_dir() -> Iterator[Path]:
    """A directory nobody can reach (pytest's tmp_path sits in a 0700 directory of root's)."""
    import shutil
    import tempfile

    directory = Path(tempfile.mkdtemp(prefix="dk-robust-", dir="/tmp"))
    os.chmod(directory, 0o755)
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


class Killed(BaseException):
    """Stands for SIGKILL at that instant: not an Exception, so no handler of ours turns it into an outcome."""


def run_dream(agent_dir: Path, *, now: object = None, trust_clock: bool = False, **settings: object) -> object:
    """One offline cycle, in process (no blast-radius hold: these tests are about files, and undo a whole plan)."""
    import asyncio

    from dreamkeeper.consolidation import CycleOptions, CycleSettings, run_cycle
    from dreamkeeper.proposers import ProposerConfig, make_proposer

    # Subsumption off unless asked for: these tests are about what undo, repair and recovery do to the model's
    # merges (new successors); subsumption (issue 23) folds a cluster into a member that was live before the
    # cycle, a different shape, tested with subsume=True where it matters (test_clock.py).
    options = CycleOptions(
        agent_dir=agent_dir,
        settings=CycleSettings(**{"min_interval_hours": 0, "archive_cap": 1.0, "subsume": False, **settings}),  # type: ignore[arg-type]
        now=now,  # type: ignore[arg-type]
        trust_clock=trust_clock,
    )
    return asyncio.run(run_cycle(options, make_proposer(ProposerConfig())))


def dream_killed_at(agent_dir: Path, writes: int, **settings: object) -> None:
    """A cycle killed at its ``writes``-th guarded write (archives and stamps swap; creates do not count)."""
    from dreamkeeper.memory import atomic as atomic_module

    seen = [0]

    def hook(stage: str, path: Path) -> None:
        if stage == "checked":
            seen[0] += 1
            if seen[0] == writes:
                raise Killed

    with atomic_module.write_seam(hook), contextlib.suppress(Killed):
        run_dream(agent_dir, **settings)
    assert seen[0] >= writes, f"the cycle made only {seen[0]} guarded writes"


def warm_up(app: typer.Typer, workdir: Path) -> None:
    """Run the commands once with our own privileges, on a throwaway agent, failures included: every module and
    codec they import lazily is then loaded before ``as_nobody`` drops the right to read them."""
    agent = make_agent(workdir / "warm-up", size=30)
    for args in (["dream", agent], ["dream", agent, "--json"], ["recover", agent], ["dream", workdir / "none"]):
        invoke(app, *args)
    b"".decode("utf-8-sig")
    import shutil

    shutil.rmtree(agent)
