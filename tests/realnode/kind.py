"""kind with the podman provider on this machine: the binary and node image of tests/cluster/build-kind.sh, and
the two host settings kind's `podman run` needs here (docs/kind.md says why)."""

from __future__ import annotations

import os
import resource
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from tests.cluster import tools
from tests.cluster.tools import ToolMissingError

LIB_MODULES = Path("/lib/modules")
# runc cannot raise RLIMIT_NPROC past this here (no CAP_SYS_RESOURCE; 40000 fails, 20000 works: measured).
NPROC_CEILING = 20000


def kind_dir() -> Path:
    return tools.k8s_cache() / f"kind-{tools.pins()['KIND_VERSION']}"


def node_image() -> str:
    """The newest node image build-kind.sh made (its tag carries the recipe)."""
    out = subprocess.run(
        ["podman", "images", "--format", "{{.Repository}}:{{.Tag}}", "localhost/dreamkeeper/kind-node"],
        capture_output=True, text=True, check=False,
    ).stdout.split()  # fmt: skip
    prefix = f"localhost/dreamkeeper/kind-node:{tools.pins()['K8S_VERSION']}-r"
    tags = sorted((t for t in out if t.startswith(prefix)), key=lambda t: int(t.rsplit("-r", 1)[1]))
    if not tags:
        raise ToolMissingError(
            f"no {prefix}N image in podman: build it with `make tools` (tests/cluster/build-kind.sh)"
        )
    return tags[-1]


def containers_conf(directory: Path) -> Path:
    """podman's default rlimits exceed what runc may set here: the limits this process has, for kind's nodes."""
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nproc = min(resource.getrlimit(resource.RLIMIT_NPROC)[1], NPROC_CEILING)
    path = directory / "containers.conf"
    path.write_text(f'[containers]\ndefault_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]\n')
    return path


@contextmanager
def lib_modules() -> Iterator[None]:
    """kind mounts /lib/modules into its node; this VM's kernel has its modules built in and no such directory.
    An empty one is made for the run and removed after it (only when this made it and it is still empty)."""
    made = not LIB_MODULES.exists()
    if made:
        LIB_MODULES.mkdir(parents=True)
    try:
        yield
    finally:
        if made:
            with suppress(OSError):
                LIB_MODULES.rmdir()


@dataclass
class Kind:
    name: str
    work: Path

    @property
    def binary(self) -> Path:
        path = kind_dir() / "kind"
        if not path.is_file():
            raise ToolMissingError(f"kind not found at {path}: `make tools` (tests/cluster/build-kind.sh)")
        return path

    @property
    def kubeconfig(self) -> Path:
        return self.work / "kubeconfig"

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "KIND_EXPERIMENTAL_PROVIDER": "podman",
            "CONTAINERS_CONF": str(containers_conf(self.work)),
            "KUBECONFIG": str(self.kubeconfig),
        }

    def run(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(self.binary), *args], capture_output=True, text=True, env=self.env(), timeout=timeout, check=False
        )
        if result.returncode != 0:
            raise AssertionError(f"kind {' '.join(args)} exited {result.returncode}:\n{result.stderr[-4000:]}")
        return result

    def kubectl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        argv = [str(tools.kubectl_binary()), f"--kubeconfig={self.kubeconfig}", *args]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} exited {result.returncode}: {result.stderr}")
        return result
