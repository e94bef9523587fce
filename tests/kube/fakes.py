"""An in-memory ``ClusterApi`` with the API server semantics the reconciler relies on.

resourceVersion preconditions (409 on a stale write), AlreadyExists on create, JSON merge patch (null deletes,
lists replaced), uid preconditions on delete, equality label selectors. The real API server is exercised by the
cluster tests; this fake lets the counting and scheduling rules be tested exhaustively and fast.
"""

from __future__ import annotations

import copy
import itertools
import uuid
from datetime import UTC, datetime
from typing import Any

from dreamkeeper.kube.api import ConflictError, NotFoundError

Obj = dict[str, Any]


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _matches(labels: dict[str, str], selector: str | None) -> bool:
    if not selector:
        return True
    for term in selector.split(","):
        key, _, value = term.partition("=")
        if labels.get(key.strip()) != value.strip():
            return False
    return True


def stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class FakeCluster:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], Obj] = {}  # (kind, namespace, name)
        self._rv = itertools.count(1)
        self.events: list[Obj] = []  # what the operator posted
        self.controller_events: list[Obj] = []  # what other controllers posted (the Job controller's FailedCreate)
        self.calls: list[str] = []
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    # ---- helpers for tests -------------------------------------------------------------------------------------

    def put(self, kind: str, obj: Obj) -> Obj:
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", stamp(self.now))
        meta.setdefault("generation", 1)
        meta["resourceVersion"] = str(next(self._rv))
        self.objects[(kind, meta.get("namespace", ""), meta["name"])] = obj
        return copy.deepcopy(obj)

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        obj = self.objects.get((kind, namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    def of_kind(self, kind: str, namespace: str | None = None) -> list[Obj]:
        return [copy.deepcopy(o) for (k, ns, _), o in self.objects.items() if k == kind and namespace in (None, ns)]

    def edit_spec(self, kind: str, namespace: str, name: str, **changes: Any) -> Obj:
        obj = self.objects[(kind, namespace, name)]
        obj["spec"] = {**obj.get("spec", {}), **changes}
        obj["metadata"]["generation"] += 1
        obj["metadata"]["resourceVersion"] = str(next(self._rv))
        return copy.deepcopy(obj)

    def finish_job(
        self,
        namespace: str,
        name: str,
        *,
        succeeded: bool = True,
        message: str | None = None,
        exit_code: int | None = None,
        seed_message: str | None = None,
        seed_exit: int = 0,
        reason: str | None = None,
    ) -> None:
        """Play the Job controller and kubelet: a pod with terminated containers, a terminal Job condition."""
        job = self.objects[("Job", namespace, name)]
        uid = job["metadata"]["uid"]
        code = exit_code if exit_code is not None else (0 if succeeded else 1)
        pod: Obj = {
            "metadata": {
                "name": f"{name}-pod",
                "namespace": namespace,
                "labels": {"batch.kubernetes.io/controller-uid": uid, "job-name": name},
                "creationTimestamp": stamp(self.now),
            },
            "spec": {},
            "status": {
                "phase": "Succeeded" if succeeded else "Failed",
                "containerStatuses": [
                    {
                        "name": "dream",
                        "state": {
                            "terminated": {
                                "exitCode": code,
                                "message": message or "",
                                "startedAt": stamp(self.now),
                                "finishedAt": stamp(self.now),
                            }
                        },
                    }
                ],
            },
        }
        if seed_message is not None:
            pod["status"]["initContainerStatuses"] = [
                {"name": "seed-vocabulary", "state": {"terminated": {"exitCode": seed_exit, "message": seed_message}}}
            ]
        self.put("Pod", pod)
        condition = {
            "type": "Complete" if succeeded else "Failed",
            "status": "True",
            "lastTransitionTime": stamp(self.now),
        }
        if reason:
            condition["reason"] = reason
        job["status"] = {"conditions": [condition], "completionTime": stamp(self.now)}
        job["metadata"]["resourceVersion"] = str(next(self._rv))

    # ---- ClusterApi --------------------------------------------------------------------------------------------

    def _patch(self, kind: str, namespace: str, name: str, patch: Obj) -> Obj:
        obj = self.objects.get((kind, namespace, name))
        if obj is None:
            raise NotFoundError(404, "NotFound", f"{kind} {name} not found")
        wanted_rv = (patch.get("metadata") or {}).get("resourceVersion")
        if wanted_rv is not None and wanted_rv != obj["metadata"]["resourceVersion"]:
            raise ConflictError(409, "Conflict", "the object has been modified")
        body = copy.deepcopy(patch)
        (body.get("metadata") or {}).pop("resourceVersion", None)
        updated = merge_patch(obj, body)
        updated["metadata"]["resourceVersion"] = str(next(self._rv))
        self.objects[(kind, namespace, name)] = updated
        return copy.deepcopy(updated)

    def get_schedule(self, namespace: str, name: str) -> Obj | None:
        return self.get("DreamSchedule", namespace, name)

    def patch_schedule_status(self, namespace: str, name: str, patch: Obj) -> Obj:
        self.calls.append(f"patch_status {name}")
        allowed = {k: v for k, v in patch.items() if k in ("metadata", "status")}
        return self._patch("DreamSchedule", namespace, name, allowed)

    def patch_schedule(self, namespace: str, name: str, patch: Obj) -> Obj:
        self.calls.append(f"patch_schedule {name}")
        return self._patch("DreamSchedule", namespace, name, {k: v for k, v in patch.items() if k == "metadata"})

    def get_vocabulary(self, namespace: str, name: str) -> Obj | None:
        return self.get("MemoryVocabulary", namespace, name)

    def patch_vocabulary_status(self, namespace: str, name: str, patch: Obj) -> Obj:
        return self._patch("MemoryVocabulary", namespace, name, patch)

    def get_pvc(self, namespace: str, name: str) -> Obj | None:
        return self.get("PersistentVolumeClaim", namespace, name)

    def list_pods(self, namespace: str, label_selector: str | None = None) -> list[Obj]:
        return [
            p for p in self.of_kind("Pod", namespace) if _matches(p["metadata"].get("labels") or {}, label_selector)
        ]

    def list_jobs(self, namespace: str, label_selector: str) -> list[Obj]:
        self.calls.append("list_jobs")
        return [
            j for j in self.of_kind("Job", namespace) if _matches(j["metadata"].get("labels") or {}, label_selector)
        ]

    def get_job(self, namespace: str, name: str) -> Obj | None:
        return self.get("Job", namespace, name)

    def create_job(self, namespace: str, body: Obj) -> Obj:
        self.calls.append(f"create_job {body['metadata']['name']}")
        if ("Job", namespace, body["metadata"]["name"]) in self.objects:
            raise ConflictError(409, "AlreadyExists", "jobs.batch already exists")
        body = copy.deepcopy(body)
        body["status"] = {"active": 1}
        return self.put("Job", body)

    def patch_job(self, namespace: str, name: str, patch: Obj) -> Obj:
        return self._patch("Job", namespace, name, patch)

    def delete_job(self, namespace: str, name: str, uid: str) -> None:
        obj = self.objects.get(("Job", namespace, name))
        if obj is None:
            return
        if obj["metadata"]["uid"] != uid:
            raise ConflictError(409, "Conflict", "uid precondition failed")
        del self.objects[("Job", namespace, name)]

    def get_config_map(self, namespace: str, name: str) -> Obj | None:
        return self.get("ConfigMap", namespace, name)

    def create_config_map(self, namespace: str, body: Obj) -> Obj:
        if ("ConfigMap", namespace, body["metadata"]["name"]) in self.objects:
            raise ConflictError(409, "AlreadyExists", "configmaps already exists")
        return self.put("ConfigMap", body)

    def patch_config_map(self, namespace: str, name: str, patch: Obj) -> Obj:
        return self._patch("ConfigMap", namespace, name, patch)

    def create_event(self, namespace: str, body: Obj) -> Obj:
        self.events.append(copy.deepcopy(body))
        return body

    def list_events(self, namespace: str, field_selector: str) -> list[Obj]:
        """Events from other components (``controller_events``), by ``involvedObject.uid=<uid>``."""
        key, _, value = field_selector.partition("=")
        assert key == "involvedObject.uid", field_selector
        return [
            copy.deepcopy(e)
            for e in self.controller_events
            if e["metadata"].get("namespace") == namespace and e["involvedObject"].get("uid") == value
        ]

    # ---- the agent's workload (apps/v1) -------------------------------------------------------------------

    def get_workload(self, namespace: str, kind: str, name: str) -> Obj | None:
        return self.get(kind, namespace, name)

    def patch_workload(self, namespace: str, kind: str, name: str, patch: Obj) -> Obj:
        self.calls.append(f"patch_workload {name}")
        before = self.objects.get((kind, namespace, name))
        updated = self._patch(kind, namespace, name, patch)
        if before is not None and updated.get("spec") != before.get("spec"):
            self._bump_generation(kind, namespace, name)
        return updated

    def scale_workload(self, namespace: str, kind: str, name: str, replicas: int) -> Obj:
        """The scale subresource: only spec.replicas changes (the generation moves when it does)."""
        self.calls.append(f"scale {name} {replicas}")
        obj = self.objects.get((kind, namespace, name))
        if obj is None:
            raise NotFoundError(404, "NotFound", f"{kind} {name} not found")
        if obj.setdefault("spec", {}).get("replicas", 1) != replicas:
            obj["spec"]["replicas"] = replicas
            obj["metadata"]["resourceVersion"] = str(next(self._rv))
            self._bump_generation(kind, namespace, name)
        return {"spec": {"replicas": replicas}}

    def _bump_generation(self, kind: str, namespace: str, name: str) -> None:
        meta = self.objects[(kind, namespace, name)]["metadata"]
        meta["generation"] = int(meta.get("generation", 1)) + 1

    def reasons(self) -> list[str]:
        return [e["reason"] for e in self.events]
