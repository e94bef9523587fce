"""MemoryVocabulary: render the CR into a ConfigMap the cycle's init container seeds from, and report it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime

from pydantic import ValidationError

from dreamkeeper.kube import (
    ANNOTATION_VOCABULARY_SHA256,
    API_VERSION,
    LABEL_COMPONENT,
    LABEL_MANAGED_BY,
    LABEL_NAME,
    LABEL_VOCABULARY,
    MANAGED_BY,
    VOCABULARY_KIND,
)
from dreamkeeper.kube.api import ApiError, ClusterApi, ConflictError, status_patch
from dreamkeeper.kube.conditions import READY, set_condition
from dreamkeeper.kube.models import MemoryVocabularySpec, MemoryVocabularyStatus
from dreamkeeper.kube.naming import label_value, vocabulary_config_map_name
from dreamkeeper.kube.objects import Body
from dreamkeeper.kube.vocabulary_render import CONFIG_MAP_KEY, RenderedVocabulary, render

log = logging.getLogger(__name__)

# The API server refuses a ConfigMap whose data (keys and values) exceeds 1 MiB; the words a spec may hold can
# render past that (4096 + 4096 words of up to 128 characters, several bytes each in UTF-8).
CONFIG_MAP_LIMIT_BYTES = 1024 * 1024


class VocabularyConflictError(RuntimeError):
    """The MemoryVocabulary changed between read and status write; render again from a fresh copy."""


def config_map_for(body: Body, rendered: RenderedVocabulary) -> Body:
    meta = body["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": vocabulary_config_map_name(meta["name"]),
            "namespace": meta["namespace"],
            "labels": {
                LABEL_NAME: "dreamkeeper",
                LABEL_COMPONENT: "memory-vocabulary",
                LABEL_MANAGED_BY: MANAGED_BY,
                LABEL_VOCABULARY: label_value(meta["name"]),
            },
            "annotations": {ANNOTATION_VOCABULARY_SHA256: rendered.sha256},
            "ownerReferences": [
                {
                    "apiVersion": API_VERSION,
                    "kind": VOCABULARY_KIND,
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "data": {CONFIG_MAP_KEY: rendered.content.decode("utf-8")},
    }


class VocabularyReconciler:
    def __init__(self, api: ClusterApi, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.api = api
        self.clock = clock

    def reconcile(self, body: Body) -> bool:
        """Render and publish; returns True when the rendered content (its sha256) changed."""
        meta = body["metadata"]
        namespace, name, generation = meta["namespace"], meta["name"], meta.get("generation")
        raw_status = body.get("status") or {}
        status = MemoryVocabularyStatus.model_validate(raw_status)
        now = self.clock()
        try:
            spec = MemoryVocabularySpec.model_validate(body.get("spec") or {})
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first.get("loc", ()))
            conditions = set_condition(
                status.conditions,
                READY,
                "False",
                "InvalidSpec",
                f"spec.{where}: {first.get('msg')}",
                generation=generation,
                now=now,
            )
            new = status.model_copy(update={"conditions": conditions, "observed_generation": generation})
            self._write(namespace, name, meta, raw_status, status, new)
            return False
        rendered = render(spec)
        desired = config_map_for(body, rendered)
        cm_name = desired["metadata"]["name"]
        size = len(CONFIG_MAP_KEY.encode()) + len(rendered.content)
        if size > CONFIG_MAP_LIMIT_BYTES:
            message = (
                f"the rendered vocabulary is {size} bytes; a ConfigMap holds at most {CONFIG_MAP_LIMIT_BYTES} "
                f"({rendered.common_words} common, {rendered.specific_words} specific words): remove words. The "
                "ConfigMap, if any, keeps the previous render; schedules referencing this vocabulary do not start"
            )
            return self._refuse(body, status, raw_status, "TooLarge", message)
        existing = self.api.get_config_map(namespace, cm_name)
        if existing is None:
            try:
                self.api.create_config_map(namespace, desired)
            except ApiError as exc:
                if exc.status == 409 or exc.status >= 500:
                    raise
                return self._refuse(body, status, raw_status, "ConfigMapRejected", f"ConfigMap {cm_name}: {exc}")
            log.info("%s/%s: rendered into ConfigMap %s (sha256 %s)", namespace, name, cm_name, rendered.sha256[:12])
        elif not any(ref.get("uid") == meta["uid"] for ref in existing["metadata"].get("ownerReferences") or []):
            conditions = set_condition(
                status.conditions,
                READY,
                "False",
                "ConfigMapConflict",
                f"ConfigMap {cm_name} exists and is not owned by this MemoryVocabulary; not touched",
                generation=generation,
                now=now,
            )
            new = status.model_copy(update={"conditions": conditions, "observed_generation": generation})
            self._write(namespace, name, meta, raw_status, status, new)
            return False
        elif (existing.get("data") or {}).get(CONFIG_MAP_KEY) != desired["data"][CONFIG_MAP_KEY]:
            self.api.patch_config_map(
                namespace,
                cm_name,
                {"metadata": {"annotations": desired["metadata"]["annotations"]}, "data": desired["data"]},
            )
            log.info("%s/%s: ConfigMap %s updated (sha256 %s)", namespace, name, cm_name, rendered.sha256[:12])
        conditions = set_condition(
            status.conditions,
            READY,
            "True",
            "Rendered",
            f"rendered into ConfigMap {cm_name}; seeded into volumes that have no vocabulary file",
            generation=generation,
            now=now,
        )
        new = status.model_copy(
            update={
                "conditions": conditions,
                "observed_generation": generation,
                "sha256": rendered.sha256,
                "config_map_name": cm_name,
                "common_words": rendered.common_words,
                "specific_words": rendered.specific_words,
                "exempt_categories": rendered.exempt_categories,
            }
        )
        self._write(namespace, name, meta, raw_status, status, new)
        return status.sha256 != rendered.sha256

    def _refuse(self, body: Body, status: MemoryVocabularyStatus, raw_status: Body, reason: str, message: str) -> bool:
        """Ready=False with the reason, and no render: the sha256 is cleared so no schedule seeds a stale one."""
        meta = body["metadata"]
        log.warning("%s/%s: %s: %s", meta["namespace"], meta["name"], reason, message)
        conditions = set_condition(
            status.conditions, READY, "False", reason, message, generation=meta.get("generation"), now=self.clock()
        )
        new = status.model_copy(
            update={"conditions": conditions, "observed_generation": meta.get("generation"), "sha256": None}
        )
        self._write(meta["namespace"], meta["name"], meta, raw_status, status, new)
        return status.sha256 is not None  # the render the schedules saw is gone: they re-check

    def _write(
        self,
        namespace: str,
        name: str,
        meta: Body,
        raw_status: Body,
        old: MemoryVocabularyStatus,
        new: MemoryVocabularyStatus,
    ) -> None:
        if new == old:
            return
        try:  # a 409 propagates: the caller retries with a fresh copy (kopf: TemporaryError)
            self.api.patch_vocabulary_status(
                namespace, name, status_patch(new.wire(), raw_status, meta.get("resourceVersion"))
            )
        except ConflictError as exc:
            raise VocabularyConflictError(f"{namespace}/{name} changed while it was rendered") from exc
