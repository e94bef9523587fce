"""The project image, built with podman from the Dockerfile and run for real.

Fails (never skips) without podman: `make tools` installs it. The image is built once per module by
tests/tools/build-image.sh, which reuses it when the Dockerfile, pyproject.toml and operator/ are unchanged.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

import dreamkeeper
from tests.packaging.podman import (
    NONROOT_UID,
    REPO,
    ContainerResult,
    ContainerSpec,
    Volume,
    chown_for_container,
    image_config,
    image_size,
    podman_run,
    start_container,
)
from tests.packaging.podman import build_image as build_project_image

pytestmark = pytest.mark.podman

SIZE_RESULT = REPO / "bench" / "results" / "image-size.json"
DEFAULT_BASE = "localhost/python-base:3.11-bookworm"


@pytest.fixture(scope="module")
def image() -> str:
    return build_project_image()


@pytest.fixture
def agent_volume(tmp_path: Path) -> Path:
    """A host directory mounted at /data, owned by the image's user the way fsGroup would make it."""
    data = tmp_path / "data"
    data.mkdir()
    chown_for_container(data)
    return data


def test_version_is_the_package_version(image: str) -> None:
    result = podman_run(["--version"], image=image).check()
    assert result.stdout.strip() == f"dreamkeeper {dreamkeeper.__version__}"


def test_entrypoint_is_the_cli_and_user_is_numeric_non_root(image: str) -> None:
    assert image_config(image, ".Config.Entrypoint") == "[dreamkeeper]"
    # Numeric, so the kubelet can enforce runAsNonRoot without reading /etc/passwd.
    assert image_config(image, ".Config.User") == f"{NONROOT_UID}:{NONROOT_UID}"
    result = podman_run(["-c", "id -u; id -g"], image=image, entrypoint="sh").check()
    uid, gid = result.stdout.split()
    assert int(uid) != 0
    assert (int(uid), int(gid)) == (NONROOT_UID, NONROOT_UID)


def test_final_stage_has_no_compiler_toolchain_or_pip(image: str) -> None:
    script = r"""
        for tool in gcc cc c++ g++ clang ld as make cpp pip pip3; do command -v "$tool" || true; done
        # gcc-12-base and libgcc-s1 are runtime libraries every Debian system has; the compilers are not.
        toolchain='^(gcc|gcc-[0-9]+|g\+\+(-[0-9]+)?|cpp(-[0-9]+)?|clang.*|binutils.*|make|libc6?-dev|.*python3.*-dev)$'
        dpkg-query -W -f '${Package}\n' | grep -E "$toolchain" || true
    """
    result = podman_run(["-c", script], image=image, entrypoint="sh").check()
    assert result.stdout.strip() == ""


def test_read_only_root_filesystem_as_non_root(image: str) -> None:
    """Everything imports with a read-only root and no bytecode to write (it was compiled at build time),
    and the root really is read-only while /tmp stays writable."""
    probe = r"""
import errno, importlib, importlib.util, json, pkgutil, sys
import dreamkeeper
# Every module of the package: the build-time generators (codegen/, dev-only dependencies) are not in it.
modules = [m.name for m in pkgutil.walk_packages(dreamkeeper.__path__, "dreamkeeper.")]
for name in modules:
    importlib.import_module(name)
# A module imported from source without a cached .pyc was compiled at start-up, every start.
uncached = sorted(
    name for name, mod in list(sys.modules.items())
    if getattr(mod, "__file__", None) and mod.__file__.endswith(".py")
    and not __import__("os").path.exists(importlib.util.cache_from_source(mod.__file__))
)
def writable(path):
    try:
        with open(path, "w") as fh:
            fh.write("x")
        return "ok"
    except OSError as exc:
        return errno.errorcode[exc.errno]
print(json.dumps({"modules": len(modules), "uncached": uncached,
                  "opt": writable("/opt/dreamkeeper/probe"), "etc": writable("/etc/probe"),
                  "tmp": writable("/tmp/probe")}))
"""
    result = podman_run(["-c", probe], image=image, entrypoint="python3", read_only=True, user=NONROOT_UID).check()
    report = json.loads(result.stdout)
    assert report["modules"] > 10
    assert report["uncached"] == []
    assert report["opt"] == "EROFS"
    assert report["etc"] == "EROFS"
    assert report["tmp"] == "ok"
    version = podman_run(["--version"], image=image, read_only=True, user=NONROOT_UID).check()
    assert version.stdout.startswith("dreamkeeper ")


def test_memory_stats_and_dream_on_a_mounted_agent_directory(image: str, agent_volume: Path) -> None:
    """The image works on a mounted volume the way a cycle Job does: read-only root, non-root user, the
    agent's data under /data. The container's view of the store equals the host CLI's view of the same files."""

    def run(*args: str) -> ContainerResult:
        volumes = [Volume(agent_volume, "/data")]
        return podman_run(args, image=image, volumes=volumes, read_only=True, user=NONROOT_UID).check()

    run("sample", "/data/agent")
    assert (agent_volume / "agent" / "memory").is_dir()
    # Written by the container user into the volume, not by root.
    assert (agent_volume / "agent" / "memory").stat().st_uid == NONROOT_UID

    inside = json.loads(run("memory", "stats", "/data/agent", "--json").stdout)
    host_agent = agent_volume / "agent"
    host = subprocess.run(
        [sys.executable, "-m", "dreamkeeper", "memory", "stats", str(host_agent), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert inside["memoryDir"] == "/data/agent/memory"
    assert inside["live"] > 0
    # Same counts, same malformed files (the sample ships some on purpose), once host paths read as mounted.
    assert inside == json.loads(host.stdout.replace(str(host_agent), "/data/agent"))

    report = json.loads(run("dream", "/data/agent", "--proposer", "offline", "--json").stdout)
    after = json.loads(run("memory", "stats", "/data/agent", "--json").stdout)
    # A cycle archives or merges; the only entries that leave the disk are the purged ones (archived past the
    # retention window; the sample has some).
    assert after["entries"] == inside["entries"] - report["purged"] + report["saved"]
    assert report["hardDeletes"] == 0
    # Malformed files are reported and left exactly where they were.
    assert after["malformed"] == inside["malformed"]


def test_termination_message_env_and_workdir_reach_the_container(image: str, agent_volume: Path) -> None:
    """What the node agent relies on: env, workingDir, a bind-mounted termination-log file and the exit code."""
    message = agent_volume.parent / "termination-log"
    result = podman_run(
        ["-c", 'printf "%s in %s" "$DK_PROBE" "$(pwd)" > /dev/termination-log; exit 3'],
        image=image,
        entrypoint="sh",
        env={"DK_PROBE": "cycle done"},
        workdir="/data",
        volumes={agent_volume: "/data"},
        read_only=True,
        user=NONROOT_UID,
        termination_log=message,
    )
    assert result.returncode == 3
    assert result.termination_message == "cycle done in /data"


def test_background_container_is_terminated_like_a_kubelet_would(image: str, tmp_path: Path) -> None:
    """SIGTERM reaches a handler (its exit code is reported); a process that ignores it is SIGKILLed: 137."""
    polite = ContainerSpec(
        image=image,
        entrypoint=["sh", "-c"],
        args=['trap "echo bye; exit 7" TERM; echo ready; while :; do sleep 0.1; done'],
    )
    container = start_container(polite, tmp_path / "polite.log")
    _wait_for_line(tmp_path / "polite.log", "ready")
    assert container.poll() is None
    assert container.terminate(grace=20) == 7
    assert "bye" in (tmp_path / "polite.log").read_text()

    # PID 1 without a handler ignores SIGTERM, so only the SIGKILL after the grace period stops it.
    stubborn = ContainerSpec(image=image, entrypoint=["sh", "-c"], args=["echo ready; exec sleep 600"])
    container = start_container(stubborn, tmp_path / "stubborn.log")
    _wait_for_line(tmp_path / "stubborn.log", "ready")
    assert container.terminate(grace=1) == 137


def _wait_for_line(log: Path, line: str) -> None:
    container_start_budget = 120  # podman's own start-up on a loaded 2-core machine, not a speed assertion
    deadline = time.monotonic() + container_start_budget
    while time.monotonic() < deadline:
        if log.exists() and line in log.read_text().splitlines():
            return
        time.sleep(0.1)
    raise AssertionError(f"{line!r} never appeared in {log}: {log.read_text() if log.exists() else '(no log)'}")


def test_image_size_is_recorded(image: str) -> None:
    size = image_size(image)
    base = image_size(DEFAULT_BASE)
    # The venv is added on top of the base; an image no bigger than its base would mean an empty install.
    assert size > base
    record = {
        "image": image,
        "bytes": size,
        "megabytes": round(size / 1e6, 1),
        "base_image": DEFAULT_BASE,
        "base_bytes": base,
        "venv_and_user_layers_bytes": size - base,
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "bash tests/tools/build-image.sh && podman image inspect --format '{{.Size}}' "
        "localhost/dreamkeeper:dev",
        "produced_by": "pytest tests/packaging/test_image.py::test_image_size_is_recorded",
    }
    SIZE_RESULT.parent.mkdir(parents=True, exist_ok=True)
    SIZE_RESULT.write_text(json.dumps(record, indent=2) + "\n")
    assert json.loads(SIZE_RESULT.read_text())["bytes"] == size
