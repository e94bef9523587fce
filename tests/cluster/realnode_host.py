"""The host side of the real test node: the machine lock, preflight checks, the pod bridge and its isolation,
kernel settings the kubelet changes, and the cleanup of everything a node leaves on the machine.

A real kubelet, containerd and kube-proxy are machine-wide citizens: kube-proxy owns fixed iptables chains
(KUBE-SERVICES, ...), the kubelet creates the `kubepods` cgroups and sets kernel tunables, and containerd's shims
outlive it. So there is one real node per machine at a time (`MachineLock`), its paths are fixed (`NodePaths`),
and `cleanup()` removes whatever a previous node left, crashed or not, before a new one starts and after it stops.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import ipaddress
import json
import logging
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

log = logging.getLogger(__name__)

NODE_NAME = "dk-realnode"
BRIDGE = "dk-node0"
POD_CIDR = "10.234.0.0/24"
GATEWAY = "10.234.0.1"  # the bridge's address: the node's InternalIP, where the apiserver and the kubelet listen
ISOLATION_CHAIN = "DK-NODE-ISOLATION"
CNI_BIN_DIR = Path("/usr/lib/cni")  # Debian's containernetworking-plugins
CNI_PLUGINS = ("bridge", "host-local", "loopback", "portmap")
RUNC = Path("/usr/sbin/runc")  # Debian's runc
# What preflight reads (module constants, so its tests can point them at a machine without the feature).
PROC_FILESYSTEMS = Path("/proc/filesystems")
CGROUP_ROOT = Path("/sys/fs/cgroup")
BRIDGE_NF = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")
# What the kubelet sets at start (pkg/kubelet/cm/container_manager_linux.go setupKernelTunables, v1.36.3), read
# before and written back after: kernel.panic_on_oops=1 and kernel.panic=10 would turn an oops of this shared
# VM into a reboot, and vm.overcommit_memory=1 changes how every other process' allocations fail.
KUBELET_TUNABLES = ("vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops")


class RealNodeError(RuntimeError):
    """The real node cannot run here or failed; the message says what was missing or what failed and how."""


@dataclass(frozen=True)
class NodePaths:
    """Fixed locations (one node per machine). `var` holds the kubelet's and containerd's roots (image layers,
    emptyDirs, pod logs) on a tmpfs of its own (`mount_var`): imports are faster, and removing a node's 300 MB
    of unpacked image files is one unmount instead of a minute of unlinks. `run` holds the sockets, netns mounts,
    CNI config and IPAM state."""

    var: Path = Path("/var/lib/dreamkeeper-node")
    run: Path = Path("/run/dreamkeeper-node")
    lock: Path = Path("/run/dreamkeeper-node.lock")
    var_size: str = "8g"  # the tmpfs' ceiling (pages are used only as files are written)

    @property
    def kubelet_root(self) -> Path:
        return self.var / "kubelet"

    @property
    def pod_logs(self) -> Path:
        return self.var / "pod-logs"

    @property
    def containerd_root(self) -> Path:
        return self.var / "containerd"

    @property
    def containerd_state(self) -> Path:
        return self.run / "containerd"

    @property
    def socket(self) -> Path:
        return self.run / "containerd.sock"

    @property
    def cni_conf_dir(self) -> Path:
        return self.run / "cni" / "net.d"

    @property
    def cni_ipam_dir(self) -> Path:
        return self.run / "cni" / "ipam"

    @property
    def sysctl_record(self) -> Path:
        return self.run.parent / "dreamkeeper-node.sysctl.json"  # survives the cleanup of `run`


def sh(*argv: str, check: bool = True, timeout: float = 120, input: str | None = None) -> str:
    """Run a host command; a failure raises RealNodeError with its stderr."""
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, input=input)
    except FileNotFoundError as exc:
        raise RealNodeError(f"{argv[0]} is not installed ({exc}); run `make tools`") from None
    if check and out.returncode != 0:
        raise RealNodeError(f"`{' '.join(argv)}` exited {out.returncode}: {(out.stderr or out.stdout).strip()}")
    return out.stdout


# ---- one node per machine ---------------------------------------------------------------------------------------


class MachineLock:
    """An exclusive flock on a fixed file, held for the node's life; the holder's pid and cwd are written in it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[str] | None = None

    def acquire(self, timeout: float) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+")  # noqa: SIM115 (held open until release)
        deadline = time.monotonic() + timeout
        waited = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if not waited:
                    handle.seek(0)
                    log.warning("another real node runs on this machine (%s); waiting", handle.read().strip())
                    waited = True
                if time.monotonic() > deadline:
                    handle.seek(0)
                    holder = handle.read().strip()
                    handle.close()
                    raise RealNodeError(
                        f"another real test node held {self.path} for {timeout:.0f}s ({holder}): one kubelet and "
                        "kube-proxy per machine (kube-proxy owns fixed iptables chains). Wait for it to finish."
                    ) from None
                time.sleep(2)
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid={os.getpid()} cwd={os.getcwd()} since={time.strftime('%H:%M:%S')}\n")
        handle.flush()
        self._file = handle

    def release(self) -> None:
        if self._file is not None:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None


# ---- what this machine must offer ------------------------------------------------------------------------------


def _cgroup_controllers() -> set[str]:
    """Memory, cpu, pids controllers available: v1 hierarchies mounted under /sys/fs/cgroup, or v2's list."""
    found: set[str] = set()
    root = CGROUP_ROOT
    unified = root / "cgroup.controllers"
    if unified.exists():
        found |= set(unified.read_text().split())
    for name in ("memory", "cpu", "pids", "cpuset", "cpuacct"):
        if (root / name / "cgroup.procs").exists():
            found.add(name)
    return found


def preflight(binaries: dict[str, Path]) -> None:
    """Every kernel feature and tool the node needs, checked up front: one error naming all that is missing (the
    tests that need the node then error with it; nothing is skipped)."""
    problems: list[str] = []
    if os.geteuid() != 0:
        problems.append("not root: the kubelet, containerd and kube-proxy need root (mounts, cgroups, iptables)")
    for name, path in binaries.items():
        if not (path.is_file() and os.access(path, os.X_OK)):
            problems.append(f"{name} missing at {path} (`make tools`: tests/cluster/build-node.sh)")
    if not (RUNC.is_file() and os.access(RUNC, os.X_OK)):
        problems.append(f"runc missing at {RUNC} (Debian package runc; `make tools`)")
    for plugin in CNI_PLUGINS:
        if not (CNI_BIN_DIR / plugin).is_file():
            problems.append(f"CNI plugin {plugin} missing in {CNI_BIN_DIR} (containernetworking-plugins; `make tools`)")
    for tool in ("iptables", "iptables-restore", "ip", "mount", "umount"):
        if shutil.which(tool) is None:
            problems.append(f"{tool} is not installed (`make tools` installs iptables)")
    filesystems = PROC_FILESYSTEMS.read_text()
    if "\toverlay\n" not in filesystems:
        problems.append("the kernel has no overlay filesystem (/proc/filesystems): containerd's snapshotter needs it")
    missing = {"memory", "cpu", "pids"} - _cgroup_controllers()
    if missing:
        problems.append(f"cgroup controllers {sorted(missing)} are not mounted: the kubelet cannot enforce limits")
    if not BRIDGE_NF.exists():
        problems.append(f"{BRIDGE_NF} is missing (module br_netfilter): Services between pods on one bridge need it")
    if shutil.which("iptables") is not None:
        probe = subprocess.run(["iptables", "-t", "nat", "-L", "-n"], capture_output=True, text=True, check=False)
        if probe.returncode != 0:
            problems.append(f"iptables does not work here: {probe.stderr.strip()} (kube-proxy programs Services)")
    if shutil.which("ip") is not None:
        problems += _route_conflicts()
    if problems:
        raise RealNodeError("the real test node cannot run on this machine:\n  - " + "\n  - ".join(problems))


def _route_conflicts() -> list[str]:
    """The pod network must not overlap a network this machine already routes (other than our own bridge)."""
    pods = ipaddress.ip_network(POD_CIDR)
    out = subprocess.run(["ip", "-j", "-4", "route", "show"], capture_output=True, text=True, check=False).stdout
    conflicts = []
    for route in json.loads(out or "[]"):
        dst, dev = route.get("dst", ""), route.get("dev", "")
        if dst in ("default", "") or dev == BRIDGE:
            continue
        if ipaddress.ip_network(dst, strict=False).overlaps(pods):
            conflicts.append(f"the pod network {POD_CIDR} overlaps the route {dst} dev {dev}")
    return conflicts


# ---- kernel settings ----------------------------------------------------------------------------------------------


def read_sysctl(key: str) -> str:
    return (Path("/proc/sys") / key).read_text().strip()


def write_sysctl(key: str, value: str) -> None:
    (Path("/proc/sys") / key).write_text(value + "\n")


def record_sysctls(paths: NodePaths, keys: tuple[str, ...]) -> None:
    """Remember the values the node may change, unless a crashed node's record is still there (its values are the
    machine's real ones; the current ones may be the kubelet's)."""
    if paths.sysctl_record.exists():
        return
    paths.sysctl_record.write_text(json.dumps({k: read_sysctl(k) for k in keys}))


def restore_sysctls(paths: NodePaths) -> None:
    if not paths.sysctl_record.exists():
        return
    for key, value in json.loads(paths.sysctl_record.read_text()).items():
        if read_sysctl(key) != value:
            log.info("restoring %s=%s (was %s)", key, value, read_sysctl(key))
            write_sysctl(key, value)
    paths.sysctl_record.unlink()


# ---- the pod network -------------------------------------------------------------------------------------------


def setup_network() -> None:
    """The bridge with the node's address (the CNI bridge plugin attaches pods to it), bridged traffic through
    iptables (Services between pods), IPv4 forwarding (Service traffic is routed), and isolation: forwarded
    traffic may only stay on the bridge, so nothing a pod sends ever leaves this machine."""
    if subprocess.run(["ip", "link", "show", BRIDGE], capture_output=True, check=False).returncode != 0:
        sh("ip", "link", "add", BRIDGE, "type", "bridge")
    addrs = sh("ip", "-4", "-o", "addr", "show", "dev", BRIDGE)
    if f"{GATEWAY}/" not in addrs:
        sh("ip", "addr", "add", f"{GATEWAY}/{POD_CIDR.split('/')[1]}", "dev", BRIDGE)
    sh("ip", "link", "set", BRIDGE, "up")
    write_sysctl("net/bridge/bridge-nf-call-iptables", "1")
    write_sysctl("net/ipv4/ip_forward", "1")
    if subprocess.run(["iptables", "-n", "-L", ISOLATION_CHAIN], capture_output=True, check=False).returncode != 0:
        sh("iptables", "-N", ISOLATION_CHAIN)
    sh("iptables", "-F", ISOLATION_CHAIN)
    sh("iptables", "-A", ISOLATION_CHAIN, "-i", BRIDGE, "-o", BRIDGE, "-j", "RETURN")
    sh("iptables", "-A", ISOLATION_CHAIN, "-i", BRIDGE, "-j", "DROP")
    sh("iptables", "-A", ISOLATION_CHAIN, "-o", BRIDGE, "-j", "DROP")
    jump = ("FORWARD", "-j", ISOLATION_CHAIN)
    if subprocess.run(["iptables", "-C", *jump], capture_output=True, check=False).returncode != 0:
        sh("iptables", "-I", *jump)


def remove_network() -> None:
    while subprocess.run(["iptables", "-D", "FORWARD", "-j", ISOLATION_CHAIN], capture_output=True).returncode == 0:
        pass
    subprocess.run(["iptables", "-F", ISOLATION_CHAIN], capture_output=True, check=False)
    subprocess.run(["iptables", "-X", ISOLATION_CHAIN], capture_output=True, check=False)
    subprocess.run(["ip", "link", "delete", BRIDGE], capture_output=True, check=False)


def mount_var(paths: NodePaths) -> None:
    paths.var.mkdir(parents=True, exist_ok=True)
    sh("mount", "-t", "tmpfs", "-o", f"size={paths.var_size},mode=0711", "dreamkeeper-node", str(paths.var))


# ---- cleanup ------------------------------------------------------------------------------------------------------


def _pids_referencing(*roots: Path) -> list[int]:
    """Processes whose command line names one of `roots` (containerd, its shims, the kubelet, kube-proxy)."""
    needles = [str(r).encode() for r in roots]
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if any(n in cmdline for n in needles):
            found.append(int(entry.name))
    return found


def _kubepods_cgroups() -> list[Path]:
    """Every `kubepods` cgroup directory tree the kubelet made, in every hierarchy, deepest first."""
    root = Path("/sys/fs/cgroup")
    tops = [p for p in root.glob("*/kubepods") if p.is_dir()] + [p for p in root.glob("kubepods") if p.is_dir()]
    dirs: list[Path] = []
    for top in tops:
        dirs += [Path(d) for d, _, _ in os.walk(top)]
    return sorted(dirs, key=lambda p: len(p.parts), reverse=True)


def _kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def kill_pod_processes(timeout: float = 20) -> None:
    """SIGKILL every process in the kubelet's pod cgroups (containers and sandboxes), until none is left."""
    deadline = time.monotonic() + timeout
    while True:
        pids = set()
        for d in _kubepods_cgroups():
            try:
                pids |= {int(p) for p in (d / "cgroup.procs").read_text().split()}
            except OSError:
                continue
        if not pids:
            return
        if time.monotonic() > deadline:
            raise RealNodeError(f"pod processes {sorted(pids)} survived SIGKILL for {timeout:.0f}s")
        _kill(sorted(pids))
        time.sleep(0.2)


def _mounts_under(*roots: Path) -> list[str]:
    """Mount points under `roots` (from /proc/self/mountinfo), deepest first."""
    points = []
    prefixes = [str(r).rstrip("/") + "/" for r in roots]
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if any(point.startswith(p) or point + "/" == p for p in prefixes):
            points.append(point)
    return sorted(set(points), key=lambda p: p.count("/"), reverse=True)


def unmount_all(*roots: Path) -> None:
    for _ in range(5):  # stacked mounts (a netns bind over a bind) need more than one pass
        points = _mounts_under(*roots)
        if not points:
            return
        for point in points:
            if subprocess.run(["umount", point], capture_output=True, check=False).returncode != 0:
                subprocess.run(["umount", "-l", point], capture_output=True, check=False)
    left = _mounts_under(*roots)
    if left:
        raise RealNodeError(f"could not unmount {left}")


def remove_kube_chains() -> None:
    """The iptables chains the kubelet makes for itself (KUBE-FIREWALL in filter's INPUT/OUTPUT,
    KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT) and any KUBE-* chain kube-proxy's --cleanup left, IPv4 and IPv6:
    first the jumps to them from the built-in chains, then the chains. Nothing else uses the KUBE- prefix here."""
    for tool in ("iptables", "ip6tables"):
        if shutil.which(tool) is None:
            continue
        for table in ("filter", "nat", "mangle", "raw"):
            rules = subprocess.run([tool, "-t", table, "-S"], capture_output=True, text=True, check=False).stdout
            chains = [line.split()[1] for line in rules.splitlines() if line.startswith("-N KUBE-")]
            for line in rules.splitlines():
                parts = line.split()
                if parts[:1] == ["-A"] and not parts[1].startswith("KUBE-") and "KUBE-" in line:
                    subprocess.run([tool, "-t", table, "-D", *parts[1:]], capture_output=True, check=False)
            for chain in chains:
                subprocess.run([tool, "-t", table, "-F", chain], capture_output=True, check=False)
            for chain in chains:
                subprocess.run([tool, "-t", table, "-X", chain], capture_output=True, check=False)


def kube_chains_left() -> list[str]:
    """`<tool> <table> <chain>` of every KUBE-* chain still present (empty after a clean teardown)."""
    left = []
    for tool in ("iptables", "ip6tables"):
        if shutil.which(tool) is None:
            continue
        for table in ("filter", "nat", "mangle", "raw"):
            rules = subprocess.run([tool, "-t", table, "-S"], capture_output=True, text=True, check=False).stdout
            left += [f"{tool} {table} {line.split()[1]}" for line in rules.splitlines() if line.startswith("-N KUBE-")]
    return left


DEVICE_PLUGINS = Path("/var/lib/kubelet/device-plugins")  # fixed in the kubelet, whatever its --root-dir


def remove_device_plugin_socket() -> None:
    """The kubelet's device-plugin registration socket, and the directories it made for it when they are empty
    (a kubelet of the machine's own would have other files there: they are left alone)."""
    (DEVICE_PLUGINS / "kubelet.sock").unlink(missing_ok=True)
    for d in (DEVICE_PLUGINS, DEVICE_PLUGINS.parent):
        with contextlib.suppress(OSError):
            d.rmdir()


def remove_cgroups() -> None:
    for d in _kubepods_cgroups():
        try:
            d.rmdir()
        except OSError as exc:
            log.warning("cgroup %s not removed: %s", d, exc)


def container_log_links(paths: NodePaths) -> list[Path]:
    """The kubelet links each container's log into the fixed /var/log/containers; ours point into pod_logs."""
    links = []
    base = Path("/var/log/containers")
    for link in base.glob("*.log") if base.is_dir() else ():
        try:
            if link.is_symlink() and str(os.readlink(link)).startswith(str(paths.pod_logs)):
                links.append(link)
        except OSError:
            continue
    return links


def cleanup(paths: NodePaths, kube_proxy: Path | None) -> None:
    """Remove everything a real node leaves on the machine, whether it stopped cleanly or crashed: its processes
    (kubelet, kube-proxy, containerd, shims, every pod process), mounts, kube-proxy's iptables rules, the bridge
    and its isolation chain, the kubepods cgroups, its directories, the kubelet's log links, and the kernel
    settings it changed. Idempotent; safe on a machine where no node ever ran."""
    _kill(_pids_referencing(paths.run, paths.var))
    kill_pod_processes()
    time.sleep(0.2)
    _kill(_pids_referencing(paths.run, paths.var))  # shims that noticed their container's end and lingered
    unmount_all(paths.var, paths.run)
    if kube_proxy is not None and kube_proxy.exists():
        # kube-proxy's own cleanup mode removes its chains and rules (KUBE-SERVICES, KUBE-POSTROUTING, ...).
        subprocess.run([str(kube_proxy), "--cleanup"], capture_output=True, check=False, timeout=120)
    remove_kube_chains()
    remove_network()
    remove_cgroups()
    for link in container_log_links(paths):
        link.unlink(missing_ok=True)
    remove_device_plugin_socket()
    for d in (paths.run, paths.var):
        shutil.rmtree(d, ignore_errors=True)
    restore_sysctls(paths)
