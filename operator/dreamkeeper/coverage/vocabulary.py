"""The deployment's coverage vocabulary: `merge-coverage-vocabulary.json` in the agent directory.

RockBot's format (reference §3.7): three optional string arrays, `extraCommonWords`, `alwaysSpecificWords`,
`numericExemptCategories`; JSON with comments and trailing commas; property names case-insensitive; blank
entries ignored. Bad configuration never disables the check: an unreadable or malformed file means the built-in
baseline plus a WARNING naming the file and the error, and a `fallback` status the cycle report exposes.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from dreamkeeper.coverage.stoplist import BASELINE_COMMON_WORDS, BUILTIN_NUMERIC_EXEMPT_CATEGORIES
from dreamkeeper.coverage.text import fold
from dreamkeeper.memory import MiB, read_regular

log = logging.getLogger(__name__)

VOCABULARY_FILE: Final = "merge-coverage-vocabulary.json"  # in the agent directory, beside memory/
VOCABULARY_FILE_LIMIT: Final = 4 * MiB  # a ConfigMap holds at most 1 MiB


def _category_key(category: str) -> str:
    return fold(category.strip().strip("/"))


class Vocabulary(BaseModel):
    """Word lists that tune which words count as specifics. Matching is case-insensitive throughout."""

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    extra_common_words: tuple[str, ...] = Field(default=(), alias="extraCommonWords")
    """Ordinary words for this deployment, in any position (also makes a lowercase word ordinary language)."""
    always_specific_words: tuple[str, ...] = Field(default=(), alias="alwaysSpecificWords")
    """Names to protect even when a stoplist or lowercase evidence would call them ordinary (wins over all)."""
    numeric_exempt_categories: tuple[str, ...] = Field(default=(), alias="numericExemptCategories")
    """Categories whose plain numbers are telemetry; added to the built-in `anti-patterns/routing`."""

    _extra: frozenset[str] = PrivateAttr(default=frozenset())
    _always: frozenset[str] = PrivateAttr(default=frozenset())
    _exempt: tuple[str, ...] = PrivateAttr(default=BUILTIN_NUMERIC_EXEMPT_CATEGORIES)

    @field_validator("extra_common_words", "always_specific_words", "numeric_exempt_categories", mode="before")
    @classmethod
    def _clean(cls, value: Any) -> Any:
        if value is None:
            return ()
        if isinstance(value, list | tuple):
            return tuple(item.strip() if isinstance(item, str) else item for item in value if item != "")
        return value

    @field_validator("extra_common_words", "always_specific_words", "numeric_exempt_categories")
    @classmethod
    def _drop_blank(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(item for item in value if item)

    def model_post_init(self, context: Any, /) -> None:
        self._extra = frozenset(fold(word) for word in self.extra_common_words)
        self._always = frozenset(fold(word) for word in self.always_specific_words)
        exempt = [_category_key(c) for c in (*BUILTIN_NUMERIC_EXEMPT_CATEGORIES, *self.numeric_exempt_categories)]
        self._exempt = tuple(dict.fromkeys(c for c in exempt if c))

    # --- the questions extraction asks ------------------------------------------------------------------

    def _derived(self, name: str) -> Any:
        # Extraction asks these questions about every word of every text: pydantic serves a private attribute
        # through ``__getattr__`` (several microseconds a read), so the private values are read from their dict.
        private = self.__pydantic_private__
        return private[name] if private is not None else getattr(self, name)

    def is_always_specific(self, word: str) -> bool:
        return fold(word) in self._derived("_always")

    def is_extra_common(self, word: str) -> bool:
        return fold(word) in self._derived("_extra")

    @staticmethod
    def is_baseline_common(word: str) -> bool:
        return fold(word) in BASELINE_COMMON_WORDS

    def is_common(self, word: str) -> bool:
        """Common in any position: the baseline or the deployment's extra words (used for acronyms)."""
        key = fold(word)
        return key in BASELINE_COMMON_WORDS or key in self._derived("_extra")

    def is_numeric_exempt(self, category: str | None) -> bool:
        """Segment-aware prefix match: `a/b` exempts `a/b` and `a/b/c`, not `a/bc`, not `a`, not None."""
        if category is None:
            return False
        key = _category_key(category)
        return any(key == prefix or key.startswith(prefix + "/") for prefix in self._derived("_exempt"))

    # --- what the INFO line and the report show ---------------------------------------------------------

    @property
    def common_word_count(self) -> int:
        return len(BASELINE_COMMON_WORDS | self._extra)

    @property
    def reclaimed_words(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.always_specific_words))

    @property
    def exempt_categories(self) -> tuple[str, ...]:
        return self._exempt


DEFAULT_VOCABULARY: Final = Vocabulary()


class VocabularyLoad(BaseModel):
    """What `load_vocabulary` found. `fallback` means the file was bad and the baseline is in force."""

    model_config = ConfigDict(frozen=True)

    vocabulary: Vocabulary
    status: Literal["absent", "loaded", "fallback"]
    path: Path
    error: str | None = None

    @property
    def fell_back(self) -> bool:
        return self.status == "fallback"


_FIELDS: Final = {fold(info.alias or name): name for name, info in Vocabulary.model_fields.items()}


def load_vocabulary(path: Path) -> VocabularyLoad:
    """Read the vocabulary file; never raises on bad content (the check must keep running on the baseline)."""
    try:
        # A FIFO or a device (/dev/zero) is refused without being opened: the check must never hang or blow up.
        raw = read_regular(path, VOCABULARY_FILE_LIMIT)
    except FileNotFoundError:
        return VocabularyLoad(vocabulary=DEFAULT_VOCABULARY, status="absent", path=path)
    except OSError as exc:
        return _fallback(path, f"could not read {path} ({exc.strerror or exc})")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return _fallback(path, f"{path} is malformed (not UTF-8: {exc.reason} at byte {exc.start})")
    stripped = strip_json_comments(text)
    if not stripped.strip():
        return VocabularyLoad(vocabulary=DEFAULT_VOCABULARY, status="absent", path=path)
    try:
        document = json.loads(stripped)
    except json.JSONDecodeError as exc:
        return _fallback(path, f"{path} is malformed ({exc.msg} at line {exc.lineno} column {exc.colno})")
    except RecursionError:
        return _fallback(path, f"{path} is malformed (nested too deeply)")
    try:
        vocabulary = _parse(document, path)
    except ValueError as exc:
        return _fallback(path, f"{path} is malformed ({exc})")
    reclaimed = vocabulary.reclaimed_words
    exempt = len(vocabulary.exempt_categories)
    log.info(
        "merge-coverage vocabulary from %s — %d common words, %d reclaimed as specifics%s, %d numeric-exempt categor%s",
        path,
        vocabulary.common_word_count,
        len(reclaimed),
        f" ({', '.join(reclaimed)})" if reclaimed else "",
        exempt,
        "y" if exempt == 1 else "ies",
    )
    return VocabularyLoad(vocabulary=vocabulary, status="loaded", path=path)


def _parse(document: Any, path: Path) -> Vocabulary:
    if not isinstance(document, dict):
        raise ValueError(f"the top level must be an object, not {type(document).__name__}")
    values: dict[str, list[str]] = {}
    unknown: list[str] = []
    for name, value in document.items():
        field = _FIELDS.get(fold(name))
        if field is None:
            unknown.append(name)
            continue
        if value is None:
            continue
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise ValueError(f"{name!r} must be an array of strings")
        # Property names are case-insensitive, so "alwaysSpecificWords" and "AlwaysSpecificWords" add up.
        values.setdefault(field, []).extend(value)
    if unknown:
        log.warning(
            "%s: ignoring unknown propert%s %s (known: extraCommonWords, alwaysSpecificWords, numericExemptCategories)",
            path,
            "y" if len(unknown) == 1 else "ies",
            ", ".join(repr(name) for name in unknown),
        )
    return Vocabulary.model_validate(values)


def _fallback(path: Path, error: str) -> VocabularyLoad:
    log.warning("%s; using the built-in vocabulary", error)
    return VocabularyLoad(vocabulary=DEFAULT_VOCABULARY, status="fallback", path=path, error=error)


def strip_json_comments(text: str) -> str:
    """Blank out // and /* */ comments and trailing commas, keeping every offset so errors point right."""
    out = list(text)
    i, n = 0, len(text)
    last_significant: int | None = None  # index of the last non-blank, non-comment character
    while i < n:
        ch = text[i]
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            last_significant = min(j, n - 1)
            i = j + 1
        elif text.startswith("//", i):
            while i < n and text[i] not in "\r\n":
                out[i] = " "
                i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            for k in range(i, end):
                if text[k] not in "\r\n":
                    out[k] = " "
            i = end
        else:
            if ch in "}]" and last_significant is not None and out[last_significant] == ",":
                out[last_significant] = " "
            if not ch.isspace():
                last_significant = i
            i += 1
    return "".join(out)
