"""How the test node agent runs one container: the pluggable `ContainerRunner` interface and its runners.

`LocalProcessRunner` runs the container's command as a local process. A local process cannot see mount points
at the container's paths, so every mount (volumes, the termination-message file, the service-account dir) is
*rewritten*: occurrences of a mountPath (as a whole path prefix) in command, args, env values and workingDir are
replaced by the host directory, and the full map is passed as JSON in `DREAMKEEPER_PATH_MAP` for code that
builds paths itself. `PodmanRunner` is the slot for running the project image for real (bind mounts, no
rewriting); the packaging work fills it in.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from tests.cluster import tools
from tests.cluster.procs import ManagedProcess

log = logging.getLogger(__name__)

PATH_MAP_ENV = "DREAMKEEPER_PATH_MAP"


class ContainerStartError(RuntimeError):
    """The container could not be started (kubelet reports state.terminated reason StartError, exit code 128)."""


@dataclass(frozen=True)
class Mount:
    container_path: str
    host_path: Path
    read_only: bool = False


@dataclass(frozen=True)
class ContainerLaunch:
    """Everything a runner needs, already resolved by the agent ($(VAR) expanded, env from Secrets/ConfigMaps)."""

    pod_namespace: str
    pod_name: str
    pod_uid: str
    container_name: str
    image: str
    command: tuple[str, ...]  # container.command ("entrypoint"); empty = the image's ENTRYPOINT
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    working_dir: str | None
    mounts: tuple[Mount, ...]
    log_path: Path
    scratch_dir: Path  # per-container host dir the runner may use (HOME, unmapped workingDir)
    api_host: str = ""
    api_port: int = 0
    kubeconfig: Path | None = None  # a kubeconfig with the pod's ServiceAccount token, when one is mounted


class RunningContainer(Protocol):
    container_id: str
    started_at: datetime

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int | None: ...

    def terminate(self, grace: float) -> int: ...


class ContainerRunner(Protocol):
    """Starts containers. `start` raises ContainerStartError when the command cannot be run at all."""

    name: str

    def start(self, launch: ContainerLaunch) -> RunningContainer: ...


def exit_status(returncode: int) -> int:
    """Popen's -N (killed by signal N) as a container runtime reports it: 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


# ---- path rewriting ----------------------------------------------------------------------------------------------


def path_rewriter(mounts: Sequence[Mount]) -> re.Pattern[str] | None:
    """One regex for all mount paths, longest first, matching only whole path prefixes: `/data` matches in
    `/data`, `/data/x`, `--dir=/data` and `'/data'` but not in `/database` or `/x/data`."""
    paths = sorted({m.container_path.rstrip("/") or "/" for m in mounts}, key=len, reverse=True)
    paths = [p for p in paths if p != "/"]
    if not paths:
        return None
    alternation = "|".join(re.escape(p) for p in paths)
    return re.compile(rf"(?<![\w.\-/~])({alternation})(?=/|$|[^\w.\-])")


def rewrite_paths(value: str, mounts: Sequence[Mount]) -> str:
    pattern = path_rewriter(mounts)
    if pattern is None:
        return value
    table = {m.container_path.rstrip("/"): str(m.host_path) for m in mounts}
    return pattern.sub(lambda match: table[match.group(1)], value)


# ---- local processes ------------------------------------------------------------------------------------------


class _LocalContainer:
    def __init__(self, proc: ManagedProcess) -> None:
        self._proc = proc
        self.container_id = f"local://{proc.pid}"
        self.started_at = datetime.now(UTC)
        self._lock = threading.Lock()

    def poll(self) -> int | None:
        return self._reap(self._proc.returncode())

    def wait(self, timeout: float | None = None) -> int | None:
        return self._reap(self._proc.wait(timeout))

    def _reap(self, code: int | None) -> int | None:
        if code is None:
            return None
        # Like a container runtime tearing down the cgroup: when the main process exits, whatever it left
        # running in its process group goes too.
        with self._lock:
            self._proc.stop(grace=0)
        return exit_status(code)

    def terminate(self, grace: float) -> int:
        with self._lock:
            return exit_status(self._proc.stop(grace=grace))


@dataclass
class LocalProcessRunner:
    """Runs containers as local processes in their own process groups (see module docstring for paths).

    `executables` maps a command[0] to a local program: `dreamkeeper` is the venv's console script and
    `python`/`python3` the venv's interpreter, because the project image *is* that environment. Other commands
    run as found on PATH. `entrypoints` stands in for image ENTRYPOINTs when a container has no `command`.
    """

    name: str = "local"
    executables: dict[str, str] = field(default_factory=dict)
    entrypoints: dict[str, tuple[str, ...]] = field(default_factory=dict)
    base_path: str = field(default_factory=lambda: os.environ.get("PATH", "/usr/bin:/bin"))

    def __post_init__(self) -> None:
        defaults = {"python": sys.executable, "python3": sys.executable}
        with contextlib.suppress(tools.ToolMissingError):  # no console script: the command is looked up on PATH
            defaults["dreamkeeper"] = str(tools.dreamkeeper_binary())
        self.executables = {**defaults, **self.executables}

    def entrypoint_for(self, image: str) -> tuple[str, ...]:
        if image in self.entrypoints:
            return self.entrypoints[image]
        repository = image.rsplit("@", 1)[0]
        base = repository.rsplit("/", 1)[-1].split(":", 1)[0]
        if base in self.entrypoints:
            return self.entrypoints[base]
        if base == "dreamkeeper":  # the project image's ENTRYPOINT is the dreamkeeper CLI
            return ("dreamkeeper",)
        raise ContainerStartError(
            f"container has no command and the local runner does not know the ENTRYPOINT of image {image!r}; "
            "set `command` or register the image in LocalProcessRunner.entrypoints"
        )

    def argv(self, launch: ContainerLaunch) -> list[str]:
        entry = list(launch.command) or list(self.entrypoint_for(launch.image))
        argv = [rewrite_paths(a, launch.mounts) for a in [*entry, *launch.args]]
        argv[0] = self.executables.get(argv[0], argv[0])
        return argv

    def environment(self, launch: ContainerLaunch) -> dict[str, str]:
        home = launch.scratch_dir / "home"
        home.mkdir(parents=True, exist_ok=True)
        # A small, container-like base environment: nothing leaks from the test process (e.g. its KUBECONFIG).
        env = {
            "PATH": self.base_path,
            "HOME": str(home),
            "HOSTNAME": launch.pod_name,
            "LANG": os.environ.get("LANG", "C.UTF-8"),
            "TMPDIR": str(launch.scratch_dir),
        }
        if launch.api_port:
            env["KUBERNETES_SERVICE_HOST"] = launch.api_host
            env["KUBERNETES_SERVICE_PORT"] = str(launch.api_port)
        if launch.kubeconfig:
            env["KUBECONFIG"] = str(launch.kubeconfig)
        for key, value in launch.env:
            env[key] = rewrite_paths(value, launch.mounts)
        env[PATH_MAP_ENV] = json.dumps({m.container_path: str(m.host_path) for m in launch.mounts})
        return env

    def working_dir(self, launch: ContainerLaunch) -> Path:
        if not launch.working_dir:
            return launch.scratch_dir
        mapped = Path(rewrite_paths(launch.working_dir, launch.mounts))
        if mapped.is_dir():
            return mapped
        # Not under a mount: the image's own filesystem, which a local process does not have. Use a scratch
        # copy of the path so relative paths still work, never the real host path.
        fallback = launch.scratch_dir / "rootfs" / launch.working_dir.lstrip("/")
        fallback.mkdir(parents=True, exist_ok=True)
        return fallback

    def start(self, launch: ContainerLaunch) -> RunningContainer:
        argv = self.argv(launch)
        env = self.environment(launch)
        program = argv[0]
        if "/" not in program and shutil.which(program, path=env["PATH"]) is None:
            raise ContainerStartError(f'exec: "{program}": executable file not found in $PATH')
        if "/" in program and not os.access(program, os.X_OK):
            raise ContainerStartError(f'exec: "{program}": no such file or not executable')
        cwd = self.working_dir(launch)
        with open(launch.log_path, "ab") as out:
            out.write(f"# {datetime.now(UTC).isoformat()} exec {argv!r} in {cwd}\n".encode())
        try:
            proc = ManagedProcess(
                f"{launch.pod_name}/{launch.container_name}",
                argv,
                launch.log_path,
                env=env,
                cwd=cwd,
                die_with_parent=True,
            )
        except OSError as exc:
            raise ContainerStartError(f"exec {program!r}: {exc}") from exc
        log.info("started %s/%s as pid %s: %s", launch.pod_namespace, launch.pod_name, proc.pid, argv)
        return _LocalContainer(proc)


@dataclass
class PodmanRunner:
    """Slot for running the container image with podman (bind-mounting `mounts`, host network so the apiserver
    at 127.0.0.1 is reachable). Not implemented yet: the packaging issue provides the image."""

    name: str = "podman"

    def start(self, launch: ContainerLaunch) -> RunningContainer:
        raise ContainerStartError(f"PodmanRunner is not implemented yet (image {launch.image!r})")


def wait_any(containers: Mapping[str, RunningContainer], timeout: float) -> None:
    """Sleep until one of `containers` exits or `timeout` passes (polling: local processes and podman alike)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(c.poll() is not None for c in containers.values()):
            return
        time.sleep(0.05)


__all__ = [
    "PATH_MAP_ENV",
    "ContainerLaunch",
    "ContainerRunner",
    "ContainerStartError",
    "LocalProcessRunner",
    "Mount",
    "PodmanRunner",
    "RunningContainer",
    "exit_status",
    "rewrite_paths",
]
