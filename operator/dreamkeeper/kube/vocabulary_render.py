"""Rendering a MemoryVocabulary into the bytes of ``merge-coverage-vocabulary.json``.

The rendering is canonical (fixed key order, de-duplicated lists in the order given, two-space JSON, trailing
newline), so its sha256 identifies the CR's content and can be compared with the file the init container found.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from dreamkeeper.coverage import VOCABULARY_FILE
from dreamkeeper.kube.models import MemoryVocabularySpec
from dreamkeeper.kube.seed import sha256_hex

CONFIG_MAP_KEY = VOCABULARY_FILE


@dataclass(frozen=True)
class RenderedVocabulary:
    content: bytes
    sha256: str
    common_words: int
    specific_words: int
    exempt_categories: int


def _unique(items: list[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        key = item.strip()
        if key and key not in seen:
            seen.add(key)
            out.append(key)
    return out


def render(spec: MemoryVocabularySpec) -> RenderedVocabulary:
    common = _unique(spec.extra_common_words)
    specific = _unique(spec.always_specific_words)
    exempt = _unique([c.strip().strip("/") for c in spec.numeric_exempt_categories])
    document = {"extraCommonWords": common, "alwaysSpecificWords": specific, "numericExemptCategories": exempt}
    content = (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    return RenderedVocabulary(content, sha256_hex(content), len(common), len(specific), len(exempt))
