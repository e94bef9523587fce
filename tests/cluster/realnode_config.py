"""The real node's configuration files: containerd's config.toml, the CNI network, the kubelet's and kube-proxy's
configurations. Pure functions of the paths and ports, so every setting is in one place with its reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.cluster.realnode_host import BRIDGE, CNI_BIN_DIR, GATEWAY, NODE_NAME, POD_CIDR, RUNC, NodePaths


def containerd_config(paths: NodePaths, sandbox_image: str) -> str:
    """containerd 2.x (config version 3). Every path is the node's own, so it never meets a system containerd."""
    return f"""version = 3
root = '{paths.containerd_root}'
state = '{paths.containerd_state}'

[grpc]
  address = '{paths.socket}'

[ttrpc]
  address = '{paths.socket}.ttrpc'

[plugins]
  # Shim sockets and runc's state under the node's own run dir (defaults: /run/containerd/s, /run/containerd/runc).
  [plugins.'io.containerd.shim.v1.manager']
    socket_dir = '{paths.run / "s"}'

  # NRI would listen on the fixed /run/nri/nri.sock; nothing here plugs into it.
  [plugins.'io.containerd.nri.v1.nri']
    disable = true

  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      # Built here (tests/cluster/node/pause) and imported: no registry can be pulled.
      sandbox = '{sandbox_image}'

  [plugins.'io.containerd.cri.v1.runtime']
    # This VM refuses a negative oom_score_adj: without this every sandbox fails with runc's "can't get final
    # child's PID from pipe: EOF". The kubelet's per-QoS scores are clamped to containerd's own (0) instead.
    restrict_oom_score_adj = true
    # Pod network namespaces under the node's own state dir, not /var/run/netns (cleanup finds them there).
    netns_mounts_under_state_dir = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = '{RUNC}'
          Root = '{paths.run / "runc"}'
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ['{CNI_BIN_DIR}']
      conf_dir = '{paths.cni_conf_dir}'

  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = '127.0.0.1'
    stream_server_port = '0'
"""


def cni_config(paths: NodePaths) -> str:
    """One bridge network: pods get an address of POD_CIDR on BRIDGE, the node's address as their gateway. No
    masquerade (ipMasq false) and the isolation chain of realnode_host: nothing a pod sends leaves the machine."""
    conf = {
        "cniVersion": "1.0.0",
        "name": "dreamkeeper-node",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,  # a pod reaching itself through its own Service
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_CIDR, "gateway": GATEWAY}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(paths.cni_ipam_dir),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }
    return json.dumps(conf, indent=2)


def kubelet_config(paths: NodePaths, ca_file: Path, port: int, healthz_port: int) -> str:
    config: dict[str, Any] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # Listens on the bridge only (the apiserver reaches it there for logs and exec), never on the machine's
        # external address.
        "address": GATEWAY,
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca_file)},
        },
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": f"unix://{paths.socket}",
        "imageServiceEndpoint": f"unix://{paths.socket}",
        "podLogsDir": str(paths.pod_logs),
        # This machine: cgroup v1 (hybrid), no systemd as init, no swap accounting. Kubernetes 1.36 refuses
        # cgroup v1 unless told otherwise.
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,
        "failSwapOn": False,
        # The kubelet's own score would be -999; this VM refuses negative values (see containerd_config).
        "oomScoreAdj": 0,
        # No cluster DNS is deployed: pods get the host's resolv.conf (nothing here resolves names).
        "clusterDomain": "cluster.local",
        "resolvConf": "/etc/resolv.conf",
        "hairpinMode": "hairpin-veth",
        "maxPods": 60,
        # The images were imported, not pulled: image GC must never remove them (there is no registry to pull them
        # back from), and a busy shared disk must not evict the tests' pods.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "serializeImagePulls": False,
        "protectKernelDefaults": False,  # it would refuse to start on this VM's values (realnode_host restores)
        "syncFrequency": "10s",  # ConfigMap volumes follow edits within seconds, not a minute
        "shutdownGracePeriod": "0s",
        "registerNode": True,
        "rotateCertificates": False,
    }
    return yaml.safe_dump(config, sort_keys=False)


def kube_proxy_config(kubeconfig: Path, metrics_port: int, healthz_port: int) -> str:
    config: dict[str, Any] = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": NODE_NAME,
        "mode": "iptables",
        "clusterCIDR": POD_CIDR,
        "bindAddress": GATEWAY,
        "metricsBindAddress": f"127.0.0.1:{metrics_port}",
        "healthzBindAddress": f"127.0.0.1:{healthz_port}",
        "oomScoreAdj": 0,
        # 0 leaves the machine's conntrack table size and timeouts alone (kube-proxy would set them globally).
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
        "iptables": {"syncPeriod": "10s", "minSyncPeriod": "0s"},
        "nodePortAddresses": [f"{GATEWAY}/32"],
    }
    return yaml.safe_dump(config, sort_keys=False)
