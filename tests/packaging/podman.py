"""Build the project image and run containers with podman the way a kubelet would run a pod's container.

Used by the image tests and by the control plane's node agent (its "PodmanRunner" runs Job pods with the
project image). Every run goes through `ContainerSpec.command()`, so a caller that needs its own process
handling (streaming, cancellation) can take the argv and still get the same flags.

Podman here needs `--runtime runc --cgroup-manager cgroupfs` (crun fails on the host's hybrid cgroup
layout) and explicit `--ulimit`s (runc may not raise the default rlimits on this kernel).
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "tests" / "tools" / "build-image.sh"
PODMAN_GLOBAL = ("--runtime", "runc", "--cgroup-manager", "cgroupfs")
RUN_LIMITS = ("--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024")
# The image's numeric USER (Dockerfile ARG DREAMKEEPER_UID).
NONROOT_UID = 65532
# Where Kubernetes mounts the file a container writes its termination message to.
TERMINATION_LOG = "/dev/termination-log"


class PodmanMissingError(RuntimeError):
    """podman is not installed: the tool scripts (`make tools`) install it, so tests fail rather than skip."""


class ImageBuildError(RuntimeError):
    """tests/tools/build-image.sh failed; the message carries the tail of its log."""


def podman() -> str:
    """Path of the podman binary, or a clear error saying how to get it."""
    path = shutil.which("podman")
    if path is None:
        raise PodmanMissingError(
            "podman is not installed; run `make tools` (tests/tools/install.d/30-podman.sh installs "
            "podman, runc and debootstrap from Debian)"
        )
    return path


def build_image(*, base_image: str | None = None, rebuild: bool = False, timeout: float = 1800) -> str:
    """Build (or reuse) the project image and return its content-addressed ref, `localhost/dreamkeeper:src-<hash>`.

    Cheap when nothing changed: the script hashes the Dockerfile, pyproject.toml and operator/ and reuses the
    image with that tag. The same image is also tagged `localhost/dreamkeeper:dev`.
    """
    podman()
    env = dict(os.environ)
    if base_image is not None:
        env["BASE_IMAGE"] = base_image
    if rebuild:
        env["DREAMKEEPER_REBUILD_IMAGE"] = "1"
    proc = subprocess.run(
        ["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, env=env, timeout=timeout, check=False
    )
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.splitlines()[-40:])
        raise ImageBuildError(f"{BUILD_SCRIPT.name} exited {proc.returncode}:\n{tail}")
    lines = proc.stdout.split()
    if not lines:
        raise ImageBuildError(f"{BUILD_SCRIPT.name} printed no image reference; stderr:\n{proc.stderr}")
    log.info("project image %s", lines[-1])
    return lines[-1]


def image_size(image: str) -> int:
    """Size of a local image in bytes, as podman reports it (uncompressed layers)."""
    out = subprocess.run(
        [podman(), "image", "inspect", "--format", "{{.Size}}", image],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return int(out.strip())


def image_config(image: str, field_path: str) -> str:
    """One field of the image config, e.g. `.Config.User`, via podman's Go template."""
    return subprocess.run(
        [podman(), "image", "inspect", "--format", "{{" + field_path + "}}", image],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


@dataclass(frozen=True)
class Volume:
    """A host path bind-mounted into the container (a directory or a single file)."""

    host: Path
    container: str
    read_only: bool = False

    def flag(self) -> str:
        # Z/z relabelling is omitted on purpose: the test hosts run without SELinux.
        return f"{self.host}:{self.container}:{'ro' if self.read_only else 'rw'}"


@dataclass
class ContainerSpec:
    """What a pod's container spec says, in podman terms."""

    image: str
    args: Sequence[str] = ()
    # Kubernetes `command`: replaces the image ENTRYPOINT (a list becomes podman's JSON-array form).
    entrypoint: str | Sequence[str] | None = None
    volumes: Sequence[Volume] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    user: int | str | None = None
    read_only: bool = False
    workdir: str | None = None
    # Host file mounted at /dev/termination-log; created (writable by the container user) if missing.
    termination_log: Path | None = None
    network: str = "none"
    name: str = field(default_factory=lambda: f"dk-{uuid.uuid4().hex[:12]}")
    extra: Sequence[str] = ()

    def command(self) -> list[str]:
        """The full podman argv for this container (`--rm`, named, so it can be stopped by name)."""
        cmd = [podman(), *PODMAN_GLOBAL, "run", "--rm", "--name", self.name, *RUN_LIMITS]
        cmd += ["--network", self.network]
        if self.read_only:
            # A read-only root as Kubernetes' readOnlyRootFilesystem; podman still mounts a tmpfs at /tmp
            # (the chart mounts an emptyDir there), /dev and /run.
            cmd += ["--read-only"]
        if self.user is not None:
            cmd += ["--user", str(self.user)]
        if self.workdir is not None:
            cmd += ["--workdir", self.workdir]
        for key, value in self.env.items():
            cmd += ["--env", f"{key}={value}"]
        for volume in self.volumes:
            cmd += ["--volume", volume.flag()]
        if self.termination_log is not None:
            cmd += ["--volume", f"{self.termination_log}:{TERMINATION_LOG}:rw"]
        if self.entrypoint is not None:
            entry = self.entrypoint if isinstance(self.entrypoint, str) else json.dumps(list(self.entrypoint))
            cmd += ["--entrypoint", entry]
        cmd += [*self.extra, self.image, *self.args]
        return cmd

    def prepare(self) -> None:
        """Create the termination-log file so that the container's (possibly non-root) user can write it."""
        if self.termination_log is None:
            return
        self.termination_log.parent.mkdir(parents=True, exist_ok=True)
        self.termination_log.touch(exist_ok=True)
        uid = _numeric_uid(self.user)
        if uid is not None and os.geteuid() == 0:
            os.chown(self.termination_log, uid, -1)
        else:
            self.termination_log.chmod(0o666)


@dataclass(frozen=True)
class ContainerResult:
    """How a container ended: the argv that ran it, exit code, output and termination message."""

    command: list[str]
    returncode: int
    stdout: str
    stderr: str
    termination_message: str | None

    def check(self) -> ContainerResult:
        """Raise with the container's stderr unless it exited 0."""
        if self.returncode != 0:
            raise AssertionError(
                f"container exited {self.returncode}: {' '.join(self.command)}\n"
                f"stdout:\n{self.stdout}\nstderr:\n{self.stderr}"
            )
        return self


def podman_run(
    args: Sequence[str],
    *,
    image: str | None = None,
    entrypoint: str | Sequence[str] | None = None,
    volumes: Sequence[Volume] | Mapping[Path | str, str] = (),
    env: Mapping[str, str] | None = None,
    user: int | str | None = None,
    read_only: bool = False,
    workdir: str | None = None,
    termination_log: Path | None = None,
    network: str = "none",
    timeout: float = 300,
    extra: Sequence[str] = (),
) -> ContainerResult:
    """Run one container to completion (image defaults to `build_image()`) and return how it ended.

    `volumes` is a list of `Volume`s or a `{host_path: container_path}` mapping (read-write). On timeout the
    container is removed by name and `subprocess.TimeoutExpired` propagates.
    """
    spec = ContainerSpec(
        image=image if image is not None else build_image(),
        args=list(args),
        entrypoint=entrypoint,
        volumes=_volumes(volumes),
        env=dict(env or {}),
        user=user,
        read_only=read_only,
        workdir=workdir,
        termination_log=termination_log,
        network=network,
        extra=list(extra),
    )
    return run_spec(spec, timeout=timeout)


def run_spec(spec: ContainerSpec, *, timeout: float = 300) -> ContainerResult:
    """Run a prepared `ContainerSpec` to completion."""
    spec.prepare()
    cmd = spec.command()
    log.debug("podman run: %s", " ".join(cmd))
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        remove_container(spec.name)
        raise
    message = spec.termination_log.read_text() if spec.termination_log is not None else None
    return ContainerResult(cmd, proc.returncode, proc.stdout, proc.stderr, message)


class PodmanContainer:
    """A container started in the background, shaped like the node agent's `RunningContainer`.

    `podman run` stays attached (its exit code is the container's: 128+N when killed by signal N, 125-127
    when podman itself could not start it) and its output goes to `log_path`.
    """

    def __init__(self, spec: ContainerSpec, log_path: Path) -> None:
        spec.prepare()
        self.spec = spec
        self.name = spec.name
        self.container_id = f"podman://{spec.name}"
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log: IO[bytes] = open(log_path, "ab")  # noqa: SIM115 (closed when the container is reaped)
        cmd = spec.command()
        log.info("podman start %s: %s", spec.name, " ".join(cmd))
        self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)
        self.started_at = datetime.now(UTC)

    def poll(self) -> int | None:
        return self._reaped(self._proc.poll())

    def wait(self, timeout: float | None = None) -> int | None:
        try:
            return self._reaped(self._proc.wait(timeout))
        except subprocess.TimeoutExpired:
            return None

    def terminate(self, grace: float) -> int:
        """SIGTERM, then SIGKILL after `grace` seconds (podman stop), as the kubelet does; returns the exit code."""
        deadline = time.monotonic() + grace + 30
        while self._proc.poll() is None and time.monotonic() < deadline:
            subprocess.run(
                [podman(), *PODMAN_GLOBAL, "stop", "--ignore", "--time", str(max(0, math.ceil(grace))), self.name],
                capture_output=True,
                check=False,
            )
            try:
                self._proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                continue  # asked before podman had created the container: ask again
        if self._proc.poll() is None:
            remove_container(self.name)
        code = self._proc.wait()
        self._reaped(code)
        return code

    def termination_message(self) -> str | None:
        if self.spec.termination_log is None or not self.spec.termination_log.exists():
            return None
        return self.spec.termination_log.read_text()

    def _reaped(self, code: int | None) -> int | None:
        if code is not None and not self._log.closed:
            self._log.close()
        return code


def start_container(spec: ContainerSpec, log_path: Path) -> PodmanContainer:
    """Start a container in the background; see `PodmanContainer`."""
    return PodmanContainer(spec, log_path)


def chown_for_container(path: Path, uid: int = NONROOT_UID, gid: int | None = None) -> None:
    """Hand a host directory tree to the container user, as the kubelet's fsGroup handling would (needs root)."""
    gid = uid if gid is None else gid
    os.chown(path, uid, gid)
    for root, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            os.chown(os.path.join(root, name), uid, gid, follow_symlinks=False)


def remove_container(name: str) -> None:
    """Kill and remove a container by name; a container that is already gone is fine."""
    subprocess.run(
        [podman(), *PODMAN_GLOBAL, "rm", "--force", "--time", "0", "--ignore", name],
        capture_output=True,
        check=False,
    )


def _volumes(volumes: Sequence[Volume] | Mapping[Path | str, str]) -> list[Volume]:
    if isinstance(volumes, Mapping):
        return [Volume(Path(host), container) for host, container in volumes.items()]
    return list(volumes)


def _numeric_uid(user: int | str | None) -> int | None:
    if user is None:
        return NONROOT_UID
    head = str(user).split(":", 1)[0]
    return int(head) if head.isdigit() else None
