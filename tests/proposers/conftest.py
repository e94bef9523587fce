"""Fixtures for the proposer tests: a fake OpenAI-compatible server on 127.0.0.1 and a clean OpenAI environment."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.proposers.fake_openai import FakeOpenAIServer


@pytest.fixture
def openai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A dummy key, and none of the developer's own OpenAI settings leaking into a test."""
    for name in ("OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID", "OPENAI_CUSTOM_HEADERS", "OPENAI_ADMIN_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")


@pytest.fixture
def fake_openai(openai_env: None) -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server
