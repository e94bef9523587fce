"""The proposer's configuration: one model every source maps into — the ``dream`` command's flags and the
``proposer`` section of its settings (``dream_command.py``), a DreamSchedule's ``spec.proposer``
(``kube/models.py``, passed to the cycle Job as that same section) — and that ``make_proposer`` takes.

The API key is not configuration: it comes from ``OPENAI_API_KEY`` only, so it never appears on a command line,
in a settings file or in a report."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, model_validator

from dreamkeeper.memory import MiB, loads_json, read_regular
from dreamkeeper.proposers.prompts import OutputMode

API_KEY_ENV = "OPENAI_API_KEY"
PRICE_FILE = "llm-pricing.json"  # looked for in the agent directory, beside dream.md
PROPOSER_SECTION = "proposer"  # the key of the proposer's settings inside the cycle settings JSON


class MissingAPIKeyError(ValueError):
    pass


def require_api_key() -> None:
    if not os.environ.get(API_KEY_ENV):
        raise MissingAPIKeyError(
            f"{API_KEY_ENV} is not set: the openai proposer reads its key from the environment only "
            "(local servers that need no key accept any non-empty value); nothing was changed"
        )


class ModelPrice(BaseModel):
    """Price per one million tokens, in whatever currency the table is kept in."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True, allow_inf_nan=False)

    input: float = Field(ge=0, validation_alias=AliasChoices("input", "inputPerMillion", "input_per_million"))
    output: float = Field(ge=0, validation_alias=AliasChoices("output", "outputPerMillion", "output_per_million"))

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input + output_tokens * self.output) / 1_000_000


def parse_price_table(data: Any, origin: str = "price table") -> dict[str, ModelPrice]:
    """``{"model": {"input": 2.5, "output": 10}}``, optionally under a top-level ``"models"`` key."""
    if isinstance(data, Mapping) and isinstance(data.get("models"), Mapping):
        data = data["models"]
    if not isinstance(data, Mapping):
        raise ValueError(f"{origin}: expected an object mapping model names to prices, got {type(data).__name__}")
    table: dict[str, ModelPrice] = {}
    for model, price in data.items():
        try:
            table[str(model)] = price if isinstance(price, ModelPrice) else ModelPrice.model_validate(price)
        except ValidationError as exc:
            raise ValueError(f"{origin}: bad price for model {model!r}: {exc.errors()[0]['msg']}") from None
    return table


PRICE_FILE_LIMIT = 4 * MiB


def load_price_file(path: Path) -> dict[str, ModelPrice]:
    try:
        data = loads_json(read_regular(path, PRICE_FILE_LIMIT).decode("utf-8-sig"))
    except OSError as exc:
        raise ValueError(f"cannot read price file {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ValueError(f"price file {path} is not valid JSON: {exc}") from None
    return parse_price_table(data, f"price file {path}")


ProposerKind = Literal["offline", "openai"]
PROPOSER_KINDS: tuple[ProposerKind, ...] = ("offline", "openai")


class ProposerConfig(BaseModel):
    """Who proposes, and for ``openai`` how it is asked. Fields other than ``type`` only matter to ``openai``.

    Strict and bounded like the cycle's settings (``consolidation/settings.py``): no boolean or string for a
    number, nothing infinite."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    type: ProposerKind = "offline"
    model: str | None = Field(default=None, min_length=1, max_length=256)
    # None: OPENAI_BASE_URL, else the OpenAI API (the openai package's rule)
    base_url: str | None = Field(default=None, max_length=2048)
    timeout: float = Field(default=120.0, gt=0, le=3600, description="seconds per request")
    # Retries are the openai client's (backoff with jitter, Retry-After, x-should-retry): see openai_client.
    max_retries: int = Field(default=4, ge=0, le=20, description="retries of one request on 408/409/429/5xx")
    # A server asking for a longer wait than this is not retried: the cycle keeps what it has instead of stalling.
    # The client itself never waits longer than two minutes.
    retry_after_max: float = Field(default=120.0, ge=0, le=120)
    token_budget: int | None = Field(default=None, ge=1, le=10**12, description="input + output tokens per cycle")
    concurrency: int = Field(default=1, ge=1, le=32, description="requests in flight at once")
    # A request whose prompt would be larger is asked in parts (clusters kept whole); None: no limit. For a small
    # local model the time of a request grows with its prompt (1.5B on 2 cores: ~17 prompt tokens a second).
    request_token_budget: int | None = Field(default=None, ge=256, le=10**7, description="prompt tokens per request")
    output_mode: OutputMode = "json_schema"
    # Whether new or changed entries with no near-duplicate are shown (so the model may prune them). None: by the
    # request shape. RockBot's layout shows them, as RockBot's gating does (the seed: eligible = new or changed since
    # its last review, or in a near-duplicate cluster). The clusters shape stamps them reviewed without asking:
    # measured on the sample (bench/results/dream-table-*-prune-review.md), Qwen2.5-Coder 1.5B asked which of them
    # were obsolete named 97 of ~100 (people, preferences, past meetings), 47 passed the census, 15 of those took
    # the last live mention of a date or number; the 0.5B named 30 (13 passed, 2 such). True asks anyway (prune
    # review); False never shows them (the frugal mode).
    offer_singletons: bool | None = None
    # A small offer waits (unreviewed, so offered again) until it has this many entries or its oldest change is
    # defer_max_hours old: the system directive is paid once for several cycles' worth. 0 sends every cycle.
    defer_below_entries: int = Field(default=8, ge=0, le=100_000)
    defer_max_hours: float = Field(default=24.0, ge=0, le=8760)
    temperature: float | None = Field(default=None, ge=0, le=2, description="None: the server's default")
    # Every request carries max_tokens, sized from what it shows (openai_output); set, this is every request's
    # max_tokens instead (a reasoning model needs more, a tight budget less).
    max_output_tokens: int | None = Field(default=None, ge=1, le=10_000_000)
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    price_file: Path | None = Field(default=None, strict=False)  # a path given as a string in JSON settings

    @model_validator(mode="before")
    @classmethod
    def _explain_missing_model(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and data.get("type") == "openai" and not data.get("model"):
            raise ValueError("the openai proposer needs a model name (--model, or model in the proposer settings)")
        return data

    @model_validator(mode="after")
    def _load_prices(self) -> ProposerConfig:
        if self.price_file is not None:
            self.prices = {**load_price_file(self.price_file), **self.prices}
        return self

    def price(self, *models: str | None) -> ModelPrice | None:
        for name in models:
            if name and name in self.prices:
                return self.prices[name]
        return None
