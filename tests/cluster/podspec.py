"""What the kubelet resolves before starting a container: environment variables and volumes.

Works on the raw Pod dict (camelCase, as served by the API). Volumes are materialised as host directories under
the pod's directory; PersistentVolumeClaims resolve through their bound PersistentVolume (hostPath or local).
ConfigMap/Secret volumes are rendered once when the pod starts (no live updates, unlike a kubelet).
"""

from __future__ import annotations

import base64
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.cluster.kubeapi import KubeApi, Obj, namespaced
from tests.cluster.runners import Mount

log = logging.getLogger(__name__)

_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")


class PodConfigError(RuntimeError):
    """A referenced object is missing or not ready yet (kubelet: CreateContainerConfigError / FailedMount).
    `retry` is False for problems that waiting cannot fix (an unsupported volume type)."""

    def __init__(self, message: str, *, reason: str = "CreateContainerConfigError", retry: bool = True) -> None:
        super().__init__(message)
        self.reason = reason
        self.retry = retry


def expand(value: str, env: Mapping[str, str]) -> str:
    """Kubernetes `$(VAR)` expansion: defined vars are replaced, `$$` escapes, undefined refs stay verbatim."""
    out: list[str] = []
    i = 0
    while i < len(value):
        if value.startswith("$$", i):
            out.append("$")
            i += 2
        elif value.startswith("$(", i):
            end = value.find(")", i + 2)
            name = value[i + 2 : end] if end != -1 else ""
            if end != -1 and name in env:
                out.append(env[name])
                i = end + 1
            elif end != -1:
                out.append(value[i : end + 1])
                i = end + 1
            else:
                out.append(value[i:])
                break
        else:
            out.append(value[i])
            i += 1
    return "".join(out)


def field_value(pod: Obj, path: str, host_ip: str) -> str:
    """Downward API fieldRef values."""
    meta, spec, status = pod["metadata"], pod["spec"], pod.get("status") or {}
    simple = {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", ""),
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.hostIP": host_ip,
        "status.hostIPs": host_ip,
        "status.podIP": status.get("podIP", ""),
        "status.podIPs": ",".join(p.get("ip", "") for p in status.get("podIPs") or []),
    }
    if path in simple:
        return str(simple[path])
    match = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
    if match:
        return str((meta.get(match.group(1)) or {}).get(match.group(2), ""))
    if path in ("metadata.labels", "metadata.annotations"):
        items = meta.get(path.split(".")[1]) or {}
        return "\n".join(f'{k}="{v}"' for k, v in sorted(items.items()))
    raise PodConfigError(f"unsupported fieldRef {path!r}", retry=False)


def resource_value(container: Obj, resource: str) -> str:
    """resourceFieldRef without divisor arithmetic: the literal quantity, or "0" when unset."""
    kind, _, name = resource.partition(".")
    return str(((container.get("resources") or {}).get(kind) or {}).get(name, "0"))


@dataclass
class Resolver:
    """Reads ConfigMaps, Secrets, PVCs and PVs for one pod (with the agent's admin client)."""

    api: KubeApi
    namespace: str

    def _read(self, resource: str, kind: str, name: str, optional: bool) -> Obj | None:
        obj = self.api.get_or_none(namespaced(self.namespace, resource, name))
        if obj is None and not optional:
            raise PodConfigError(f'{kind.lower()} "{name}" not found')
        return obj

    def data(self, kind: str, name: str, optional: bool) -> dict[str, bytes] | None:
        """ConfigMap data+binaryData or decoded Secret data, as bytes."""
        resource = {"ConfigMap": "configmaps", "Secret": "secrets"}[kind]
        obj = self._read(resource, kind, name, optional)
        if obj is None:
            return None
        if kind == "Secret":
            return {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
        out = {k: str(v).encode() for k, v in (obj.get("data") or {}).items()}
        out.update({k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()})
        return out

    def key(self, kind: str, ref: Obj) -> str | None:
        optional = bool(ref.get("optional", False))
        data = self.data(kind, ref["name"], optional)
        if data is None:
            return None
        if ref["key"] not in data:
            if optional:
                return None
            raise PodConfigError(f"couldn't find key {ref['key']} in {kind} {self.namespace}/{ref['name']}")
        return data[ref["key"]].decode(errors="replace")

    def claim_host_path(self, claim_name: str) -> Path:
        pvc = self._read("persistentvolumeclaims", "PersistentVolumeClaim", claim_name, optional=False)
        assert pvc is not None
        volume_name = (pvc.get("spec") or {}).get("volumeName")
        phase = (pvc.get("status") or {}).get("phase")
        if not volume_name or phase != "Bound":
            raise PodConfigError(f'persistentvolumeclaim "{claim_name}" is not bound yet', reason="FailedMount")
        pv = self.api.get_or_none(f"/api/v1/persistentvolumes/{volume_name}")
        if pv is None:
            raise PodConfigError(f'persistentvolume "{volume_name}" not found', reason="FailedMount")
        spec = pv.get("spec") or {}
        for source in ("hostPath", "local"):
            if source in spec:
                return Path(spec[source]["path"])
        raise PodConfigError(
            f"persistentvolume {volume_name} is neither hostPath nor local; the test node agent cannot mount it",
            reason="FailedMount",
            retry=False,
        )


def container_env(pod: Obj, container: Obj, resolver: Resolver, host_ip: str) -> dict[str, str]:
    """envFrom first, then env in order, each value $(VAR)-expanded against what is defined so far."""
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        prefix = source.get("prefix", "")
        for kind, key in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
            if key in source:
                ref = source[key]
                data = resolver.data(kind, ref["name"], bool(ref.get("optional", False))) or {}
                for name, value in data.items():
                    if _ENV_NAME.match(prefix + name):  # invalid names are skipped, like the kubelet does
                        env[prefix + name] = value.decode(errors="replace")
    for var in container.get("env") or []:
        name = var["name"]
        if "valueFrom" not in var:
            env[name] = expand(var.get("value", ""), env)
            continue
        source = var["valueFrom"]
        resolved: str | None
        if "secretKeyRef" in source:
            resolved = resolver.key("Secret", source["secretKeyRef"])
        elif "configMapKeyRef" in source:
            resolved = resolver.key("ConfigMap", source["configMapKeyRef"])
        elif "fieldRef" in source:
            resolved = field_value(pod, source["fieldRef"]["fieldPath"], host_ip)
        elif "resourceFieldRef" in source:
            resolved = resource_value(container, source["resourceFieldRef"]["resource"])
        else:
            raise PodConfigError(f"unsupported valueFrom for env {name}: {sorted(source)}", retry=False)
        if resolved is not None:
            env[name] = resolved
    return env


def _write_items(target: Path, data: Mapping[str, bytes], items: list[Obj] | None, mode: int) -> None:
    selected = [(i["key"], i["path"], i.get("mode", mode)) for i in items] if items else [(k, k, mode) for k in data]
    for key, rel, item_mode in selected:
        if key not in data:
            raise PodConfigError(f"configured key {key!r} not found", reason="FailedMount")
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data[key])
        path.chmod(item_mode & 0o777)


class VolumeMaterializer:
    """Turns the pod's volumes into host directories under `pod_dir/volumes`."""

    def __init__(self, pod: Obj, pod_dir: Path, resolver: Resolver, host_ip: str, sa_audience: str) -> None:
        self.pod = pod
        self.pod_dir = pod_dir
        self.resolver = resolver
        self.host_ip = host_ip
        self.sa_audience = sa_audience
        self.host_dirs: dict[str, Path] = {}

    def materialize(self) -> dict[str, Path]:
        """volume name -> host directory. Raises PodConfigError for what is missing (retryable) or unsupported."""
        for volume in self.pod["spec"].get("volumes") or []:
            name = volume["name"]
            if name not in self.host_dirs:
                self.host_dirs[name] = self._one(volume)
        return self.host_dirs

    def _rendered_dir(self, name: str) -> Path:
        path = self.pod_dir / "volumes" / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _one(self, volume: Obj) -> Path:
        name = volume["name"]
        if "emptyDir" in volume:
            return self._rendered_dir(name)
        if "hostPath" in volume:
            path = Path(volume["hostPath"]["path"])
            if volume["hostPath"].get("type") in ("DirectoryOrCreate",):
                path.mkdir(parents=True, exist_ok=True)
            return path
        if "persistentVolumeClaim" in volume:
            return self.resolver.claim_host_path(volume["persistentVolumeClaim"]["claimName"])
        if "configMap" in volume:
            src = volume["configMap"]
            data = self.resolver.data("ConfigMap", src["name"], bool(src.get("optional", False))) or {}
            target = self._rendered_dir(name)
            _write_items(target, data, src.get("items"), src.get("defaultMode", 0o644))
            return target
        if "secret" in volume:
            src = volume["secret"]
            data = self.resolver.data("Secret", src["secretName"], bool(src.get("optional", False))) or {}
            target = self._rendered_dir(name)
            _write_items(target, data, src.get("items"), src.get("defaultMode", 0o644))
            return target
        if "downwardAPI" in volume:
            target = self._rendered_dir(name)
            self._downward(target, volume["downwardAPI"].get("items") or [], volume["downwardAPI"])
            return target
        if "projected" in volume:
            return self._projected(name, volume["projected"])
        kinds = sorted(k for k in volume if k != "name")
        raise PodConfigError(
            f"volume {name!r} of type {kinds} is not supported by the test node agent",
            reason="FailedMount",
            retry=False,
        )

    def _downward(self, target: Path, items: list[Obj], src: Obj) -> None:
        mode = src.get("defaultMode", 0o644)
        for item in items:
            if "fieldRef" in item:
                value = field_value(self.pod, item["fieldRef"]["fieldPath"], self.host_ip)
            else:
                container = next(
                    (
                        c
                        for c in self.pod["spec"]["containers"]
                        if c["name"] == item["resourceFieldRef"].get("containerName")
                    ),
                    self.pod["spec"]["containers"][0],
                )
                value = resource_value(container, item["resourceFieldRef"]["resource"])
            _write_items(target, {"v": value.encode()}, [{"key": "v", "path": item["path"], **_mode(item)}], mode)

    def _projected(self, name: str, projected: Obj) -> Path:
        target = self._rendered_dir(name)
        mode = projected.get("defaultMode", 0o644)
        for source in projected.get("sources") or []:
            if "serviceAccountToken" in source:
                tok = source["serviceAccountToken"]
                token = self.service_account_token(tok.get("audience"), tok.get("expirationSeconds", 3607))
                _write_items(target, {"t": token.encode()}, [{"key": "t", "path": tok["path"]}], mode)
            elif "configMap" in source:
                src = source["configMap"]
                data = self.resolver.data("ConfigMap", src["name"], bool(src.get("optional", False))) or {}
                _write_items(target, data, src.get("items"), mode)
            elif "secret" in source:
                src = source["secret"]
                data = self.resolver.data("Secret", src["name"], bool(src.get("optional", False))) or {}
                _write_items(target, data, src.get("items"), mode)
            elif "downwardAPI" in source:
                self._downward(target, source["downwardAPI"].get("items") or [], {"defaultMode": mode})
            else:
                raise PodConfigError(
                    f"projected source {sorted(source)} is not supported by the test node agent",
                    reason="FailedMount",
                    retry=False,
                )
        return target

    def service_account_token(self, audience: str | None, expiration: int) -> str:
        """A token bound to this pod, like the kubelet requests for projected serviceAccountToken sources."""
        meta = self.pod["metadata"]
        request = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "audiences": [audience or self.sa_audience],
                "expirationSeconds": max(int(expiration), 600),
                "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"]},
            },
        }
        sa = self.pod["spec"].get("serviceAccountName") or "default"
        path = namespaced(meta["namespace"], "serviceaccounts", sa) + "/token"
        return str(self.resolver.api.create(path, request)["status"]["token"])


def _mode(item: Obj) -> dict[str, int]:
    return {"mode": item["mode"]} if "mode" in item else {}


def container_mounts(container: Obj, host_dirs: Mapping[str, Path], env: Mapping[str, str]) -> list[Mount]:
    """volumeMounts -> Mount(container path, host path), with subPath/subPathExpr resolved (created if absent)."""
    mounts: list[Mount] = []
    for vm in container.get("volumeMounts") or []:
        if vm["name"] not in host_dirs:
            raise PodConfigError(f"volumeMount {vm['name']!r} names no volume of the pod", retry=False)
        host = host_dirs[vm["name"]]
        sub = vm.get("subPath") or (expand(vm["subPathExpr"], env) if vm.get("subPathExpr") else "")
        if sub:
            if sub.startswith("/") or ".." in Path(sub).parts:
                raise PodConfigError(f"subPath {sub!r} must be a relative path without '..'", retry=False)
            host = host / sub
            if not host.exists():
                host.mkdir(parents=True, exist_ok=True)
        mounts.append(Mount(vm["mountPath"], host, bool(vm.get("readOnly", False))))
    return mounts
