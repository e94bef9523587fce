"""kind itself, as the design card names it and a user's first try goes: `kind create cluster --image <ours>` with
the podman provider, the project image loaded with `kind load image-archive`, then `helm install` of the chart with
its defaults; the operator pod becomes Ready inside kind's node. The node image and kind come from
tests/cluster/build-kind.sh (no registry: every image in the node was built here). docs/kind.md."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.cluster.realnode import chart_image, prepare_images
from tests.packaging.helm import CHART, helm
from tests.realnode.kind import Kind, lib_modules, node_image

pytestmark = [pytest.mark.realnode, pytest.mark.cluster]


def _podman(*args: str, check: bool = True) -> str:
    result = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=600, check=False)
    if check and result.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} exited {result.returncode}: {result.stderr}")
    return result.stdout


def _networks() -> set[str]:
    return set(_podman("network", "ls", "--format", "{{.Name}}").split())


def _config(directory: Path) -> Path:
    """Only kubeadm's timeouts, raised: on 2 cores shared with other test runs (load 14-16 seen) the apiserver in
    kind's node can take longer than kubeadm's 1-minute API-call default to come up. Everything else is kind's."""
    path = directory / "kind.yaml"
    path.write_text(
        "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nkubeadmConfigPatches:\n- |\n  kind: InitConfiguration\n"
        "  timeouts:\n    controlPlaneComponentHealthCheck: 10m0s\n    kubeletHealthCheck: 10m0s\n"
        "    kubernetesAPICall: 5m0s\n"
    )
    return path


def test_kind_create_cluster_with_the_node_image_built_here_then_helm_install_runs_the_operator(
    tmp_path: Path,
) -> None:
    image = node_image()
    project = prepare_images().project
    kind = Kind(f"dk-{uuid.uuid4().hex[:6]}", tmp_path)
    networks_before = _networks()
    default_tag = chart_image()
    try:
        with lib_modules():
            try:
                kind.run("create", "cluster", "--name", kind.name, "--image", image, "--config", str(_config(tmp_path)),
                         "--kubeconfig", str(kind.kubeconfig), "--wait", "6m")  # fmt: skip
                nodes = json.loads(kind.kubectl("get", "nodes", "-o", "json").stdout)["items"]
                assert [n["status"]["nodeInfo"]["kubeletVersion"] for n in nodes] == [
                    image.split(":")[1].split("-r")[0]
                ]
                assert nodes[0]["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://2.")
                # Every system pod runs: etcd, the control plane and kube-proxy from images built here, CoreDNS too.
                kind.kubectl("wait", "-n", "kube-system", "--for=condition=Ready", "pod", "--all", "--timeout=240s")

                # The project image loaded into kind, then named as the chart's default (as a user tags a local
                # build; tagged inside the node, so the shared podman store is left as it is).
                archive = tmp_path / "project.tar"
                _podman("save", "--format", "docker-archive", "-o", str(archive), project)
                kind.run("load", "image-archive", str(archive), "--name", kind.name)
                node = f"{kind.name}-control-plane"
                _podman("exec", node, "ctr", "-n", "k8s.io", "images", "tag", project, default_tag)

                kind.kubectl("create", "namespace", "dreamkeeper-system")
                kind.kubectl(
                    "label", "namespace", "dreamkeeper-system", "pod-security.kubernetes.io/enforce=restricted"
                )
                helm("install", "dreamkeeper", str(CHART), "--namespace", "dreamkeeper-system", "--wait",
                     "--timeout", "6m", kubeconfig=kind.kubeconfig)  # fmt: skip
                pods = json.loads(kind.kubectl("get", "pods", "-n", "dreamkeeper-system", "-o", "json").stdout)
                (pod,) = pods["items"]
                ready = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
                assert ready["Ready"] == "True", pod["status"]
                assert pod["spec"]["containers"][0]["image"] == default_tag
                # Ready as soon as it runs (the chart has a liveness probe only): it reaches kind's API server.
                deadline = time.monotonic() + 180
                log = ""
                while "Initial authentication has finished" not in log:
                    assert time.monotonic() < deadline, log[-2000:]
                    time.sleep(2)
                    log = kind.kubectl("logs", "-n", "dreamkeeper-system", pod["metadata"]["name"]).stdout
                helm("uninstall", "dreamkeeper", "--namespace", "dreamkeeper-system", "--wait",
                     kubeconfig=kind.kubeconfig)  # fmt: skip
            finally:
                kind.run("delete", "cluster", "--name", kind.name)
    finally:
        for network in _networks() - networks_before:
            _podman("network", "rm", network, check=False)  # kind leaves its network behind on delete
    left = _podman("ps", "-a", "--filter", f"label=io.x-k8s.kind.cluster={kind.name}", "--format", "{{.Names}}")
    assert left.strip() == "", left
