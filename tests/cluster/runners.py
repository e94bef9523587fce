"""How the test node agent runs one container: the pluggable `ContainerRunner` interface and its runners.

`LocalProcessRunner` runs the container's command as a local process. A local process cannot see mount points
at the container's paths, so every mount (volumes, the termination-message file, the service-account dir) is
*rewritten*: occurrences of a mountPath (as a whole path prefix) in command, args, env values and workingDir are
replaced by the host directory, and the full map is passed as JSON in `DREAMKEEPER_PATH_MAP` for code that
builds paths itself. `PodmanRunner` runs the container image for real with podman: every mount is bind-mounted
at its own mountPath (no rewriting), and the merged securityContext (`SecurityContext`) is enforced.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import re
import shutil
import stat
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import yaml

from tests.cluster import tools
from tests.cluster.procs import ManagedProcess
from tests.packaging import podman as pm

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
class SecurityContext:
    """A container's effective securityContext: the pod's fields, overridden by the container's (as the kubelet
    merges them). Only runners that isolate containers (podman) can enforce it; local processes ignore it."""

    run_as_user: int | None = None
    run_as_group: int | None = None
    run_as_non_root: bool = False
    fs_group: int | None = None
    fs_group_change_policy: str = "Always"
    supplemental_groups: tuple[int, ...] = ()
    read_only_root_filesystem: bool = False
    allow_privilege_escalation: bool = True
    privileged: bool = False
    capabilities_add: tuple[str, ...] = ()
    capabilities_drop: tuple[str, ...] = ()
    seccomp_profile: str | None = None  # RuntimeDefault | Unconfined | Localhost

    @classmethod
    def of(cls, pod_spec: Mapping[str, Any], container: Mapping[str, Any]) -> SecurityContext:
        pod = pod_spec.get("securityContext") or {}
        own = container.get("securityContext") or {}

        def pick(key: str) -> Any:
            return own[key] if own.get(key) is not None else pod.get(key)

        caps = own.get("capabilities") or {}
        return cls(
            run_as_user=pick("runAsUser"),
            run_as_group=pick("runAsGroup"),
            run_as_non_root=bool(pick("runAsNonRoot")),
            fs_group=pod.get("fsGroup"),
            fs_group_change_policy=pod.get("fsGroupChangePolicy") or "Always",
            supplemental_groups=tuple(pod.get("supplementalGroups") or ()),
            read_only_root_filesystem=bool(own.get("readOnlyRootFilesystem")),
            allow_privilege_escalation=own.get("allowPrivilegeEscalation") is not False,
            privileged=bool(own.get("privileged")),
            capabilities_add=tuple(caps.get("add") or ()),
            capabilities_drop=tuple(caps.get("drop") or ()),
            seccomp_profile=(pick("seccompProfile") or {}).get("type"),
        )


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
    security: SecurityContext = field(default_factory=SecurityContext)
    # The pod's volume directories whose ownership a kubelet manages for fsGroup (not inline hostPath), each with
    # whether the volume is read-only (configMap, secret, projected, downwardAPI, readOnly claims).
    owned_volumes: tuple[tuple[Path, bool], ...] = ()


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


# ---- podman ---------------------------------------------------------------------------------------------------

# Where a container finds the pod's kubeconfig (the host file names host paths, so a rewritten copy is mounted).
KUBECONFIG_MOUNT = "/var/run/dreamkeeper-test/kubeconfig"
# The kubelet's masks for fsGroup ownership (pkg/volume/volume_linux.go): group rw (ro for read-only volumes),
# plus setgid and group x on directories so new files inherit the group.
_FS_GROUP_RW = 0o660
_FS_GROUP_RO = 0o440
_FS_GROUP_DIR = stat.S_ISGID | 0o110
NODE_LABEL = "dreamkeeper.test/node-agent"  # on every container the runner starts (cleanup by label)
POD_UID_LABEL = "dreamkeeper.test/pod-uid"


def _fs_group_mask(read_only: bool, is_dir: bool) -> int:
    mask = _FS_GROUP_RO if read_only else _FS_GROUP_RW
    return mask | _FS_GROUP_DIR if is_dir else mask


def apply_fs_group(root: Path, gid: int, *, read_only: bool = False, policy: str = "Always") -> bool:
    """What the kubelet does to a volume for a pod's fsGroup: every file and directory gets group `gid` and
    group read(/write) permission; directories get setgid. `OnRootMismatch` skips the walk when the volume root
    already matches. Returns whether anything was walked. Needs root (the node agent runs as root)."""
    st = root.lstat()
    wanted = _fs_group_mask(read_only, stat.S_ISDIR(st.st_mode))
    if policy == "OnRootMismatch" and st.st_gid == gid and st.st_mode & wanted == wanted:
        return False
    for directory, dirs, files in os.walk(root):
        for path in [directory, *(os.path.join(directory, n) for n in [*dirs, *files])]:
            info = os.lstat(path)
            os.chown(path, -1, gid, follow_symlinks=False)
            if not stat.S_ISLNK(info.st_mode):
                os.chmod(path, stat.S_IMODE(info.st_mode) | _fs_group_mask(read_only, stat.S_ISDIR(info.st_mode)))
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(directory, d))]
    return True


@dataclass
class PodmanRunner:
    """Runs a container from its image with podman, the way a kubelet + CRI runtime would.

    - image: must be in local podman storage (`--pull never`; no registry is reachable). Missing → StartError.
    - command/args: `command` replaces the image ENTRYPOINT (and drops its CMD), `args` follow; neither → the
      image's ENTRYPOINT + CMD.
    - env, workingDir, hostname (= pod name); `KUBERNETES_SERVICE_HOST/PORT` and, with a projected SA token, a
      `KUBECONFIG` (CA inlined) mounted at `KUBECONFIG_MOUNT`. Host network, so the apiserver on 127.0.0.1 is
      reachable.
    - every mount bind-mounted at its mountPath (ro when readOnly), the termination-message file included
      (made 0666 like the kubelet does, so any user can write it).
    - securityContext: runAsUser/runAsGroup → `--user`, fsGroup and supplementalGroups → `--group-add` plus
      the kubelet's fsGroup ownership change on every mounted directory (honouring fsGroupChangePolicy),
      runAsNonRoot checked against the effective uid, readOnlyRootFilesystem → `--read-only` without podman's
      extra tmpfs mounts (only volumes are writable), capabilities → `--cap-drop/--cap-add`,
      allowPrivilegeEscalation=false → no-new-privileges, seccomp Unconfined → `seccomp=unconfined`
      (RuntimeDefault is podman's default profile).
    - exit codes as podman reports them (128+N for signal N); `terminate(grace)` = `podman stop --time grace`:
      SIGTERM, then SIGKILL after the grace period.
    """

    name: str = "podman"
    network: str = "host"
    node_name: str = "dk-node-0"
    _image_users: dict[str, str] = field(default_factory=dict, repr=False)

    def image_user(self, image: str) -> str:
        """The image's USER (cached): decides the uid when the pod sets none, for runAsNonRoot."""
        if image not in self._image_users:
            self._image_users[image] = pm.image_config(image, ".Config.User")
        return self._image_users[image]

    def user(self, launch: ContainerLaunch) -> str | None:
        """The `--user` value, after the kubelet's runAsNonRoot verification."""
        sc = launch.security
        image_user = self.image_user(launch.image)
        image_uid = image_user.split(":", 1)[0]
        uid = str(sc.run_as_user) if sc.run_as_user is not None else image_uid
        if sc.run_as_non_root:
            if not uid.isdigit():
                raise ContainerStartError(
                    f"container has runAsNonRoot and image has non-numeric user ({uid or 'unset'}), "
                    "cannot verify user is non-root"
                )
            if int(uid) == 0:
                raise ContainerStartError("container has runAsNonRoot and image will run as root")
        if sc.run_as_user is None and sc.run_as_group is None:
            return None
        return uid if sc.run_as_group is None else f"{uid}:{sc.run_as_group}"

    def prepare_mounts(self, launch: ContainerLaunch) -> list[pm.Volume]:
        sc = launch.security
        if sc.fs_group is not None:
            for root, read_only in launch.owned_volumes:
                apply_fs_group(root, sc.fs_group, read_only=read_only, policy=sc.fs_group_change_policy)
        volumes = []
        for mount in launch.mounts:
            if mount.host_path.is_file() and mount.host_path.name.startswith("termination-log"):
                mount.host_path.chmod(0o666)  # the kubelet's mode: writable whatever user the container runs as
            volumes.append(pm.Volume(mount.host_path, mount.container_path, mount.read_only))
        return volumes

    def kubeconfig(self, launch: ContainerLaunch) -> Path | None:
        """The pod's kubeconfig with its CA inlined: the original names a host file the container cannot see."""
        if launch.kubeconfig is None:
            return None
        doc = yaml.safe_load(launch.kubeconfig.read_text())
        for cluster in doc.get("clusters") or []:
            settings = cluster.get("cluster") or {}
            ca = settings.pop("certificate-authority", None)
            if ca:
                settings["certificate-authority-data"] = base64.b64encode(Path(ca).read_bytes()).decode()
        path = launch.scratch_dir / "kubeconfig.podman"
        path.write_text(yaml.safe_dump(doc))
        path.chmod(0o644)
        return path

    def spec(self, launch: ContainerLaunch) -> pm.ContainerSpec:
        sc = launch.security
        volumes = self.prepare_mounts(launch)
        env: dict[str, str] = {}
        if launch.api_port:
            env["KUBERNETES_SERVICE_HOST"] = launch.api_host
            env["KUBERNETES_SERVICE_PORT"] = str(launch.api_port)
        kubeconfig = self.kubeconfig(launch)
        if kubeconfig is not None:
            volumes.append(pm.Volume(kubeconfig, KUBECONFIG_MOUNT, read_only=True))
            env["KUBECONFIG"] = KUBECONFIG_MOUNT
        env.update(launch.env)
        extra = [
            "--pull", "never", "--hostname", launch.pod_name[:63],
            "--label", f"{NODE_LABEL}={self.node_name}", "--label", f"{POD_UID_LABEL}={launch.pod_uid}",
        ]  # fmt: skip
        if sc.read_only_root_filesystem:
            extra.append("--read-only-tmpfs=false")  # Kubernetes adds no writable /tmp, /run: volumes only
        for gid in (*((sc.fs_group,) if sc.fs_group is not None else ()), *sc.supplemental_groups):
            extra += ["--group-add", str(gid)]
        if sc.privileged:
            extra.append("--privileged")
        for cap in sc.capabilities_drop:
            extra += ["--cap-drop", cap.lower()]
        for cap in sc.capabilities_add:
            extra += ["--cap-add", cap.lower()]
        if not sc.allow_privilege_escalation:
            extra += ["--security-opt", "no-new-privileges"]
        if sc.seccomp_profile == "Unconfined":
            extra += ["--security-opt", "seccomp=unconfined"]
        return pm.ContainerSpec(
            image=launch.image,
            args=list(launch.args),
            entrypoint=list(launch.command) if launch.command else None,
            volumes=volumes,
            env=env,
            user=self.user(launch),
            read_only=sc.read_only_root_filesystem,
            workdir=launch.working_dir or None,
            network=self.network,
            name=f"dk-{launch.pod_uid[:8]}-{launch.container_name}-{uuid.uuid4().hex[:6]}"[:63],
            extra=extra,
        )

    def start(self, launch: ContainerLaunch) -> RunningContainer:
        try:
            exists = subprocess.run([pm.podman(), "image", "exists", launch.image], capture_output=True, check=False)
            if exists.returncode != 0:
                raise ContainerStartError(
                    f"image {launch.image!r} is not in local podman storage and is never pulled "
                    "(build it with tests/packaging/podman.py build_image())"
                )
            spec = self.spec(launch)
        except pm.PodmanMissingError as exc:
            raise ContainerStartError(str(exc)) from exc
        except OSError as exc:  # fsGroup ownership change or kubeconfig rewrite failed
            raise ContainerStartError(f"preparing mounts for podman: {exc}") from exc
        with open(launch.log_path, "ab") as out:
            shown = [*(launch.command or ["<entrypoint>"]), *launch.args]
            out.write(f"# {datetime.now(UTC).isoformat()} podman {spec.name} {launch.image} {shown!r}\n".encode())
        container = pm.start_container(spec, launch.log_path)
        log.info("started %s/%s in podman as %s", launch.pod_namespace, launch.pod_name, spec.name)
        return container


def remove_node_containers(node_name: str) -> list[str]:
    """Force-remove every container a PodmanRunner started for `node_name` (teardown after a hard kill)."""
    listed = subprocess.run(
        [pm.podman(), *pm.PODMAN_GLOBAL, "ps", "-a", "-q", "--filter", f"label={NODE_LABEL}={node_name}"],
        capture_output=True,
        text=True,
        check=False,
    )
    ids = listed.stdout.split()
    for container in ids:
        pm.remove_container(container)
    return ids


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
    "SecurityContext",
    "apply_fs_group",
    "exit_status",
    "remove_node_containers",
    "rewrite_paths",
]
