"""The real-model tier itself: each PyPI model answers the real ``openai`` client through llama.cpp's server."""

from __future__ import annotations

from pathlib import Path

import pytest
from openai import OpenAI

from tests.realmodel.server import LlamaServer, LlamaServerMissingError


def test_the_openai_client_gets_a_chat_completion_from_each_model(llama_server: LlamaServer) -> None:
    client = OpenAI(base_url=llama_server.base_url, api_key="local-no-key", max_retries=0, timeout=120)
    response = client.chat.completions.create(
        model=llama_server.model,
        messages=[{"role": "user", "content": "Name one colour."}],
        max_tokens=12,
        temperature=0,
    )
    (choice,) = response.choices
    assert choice.message.content and choice.message.content.strip()
    assert choice.finish_reason in ("stop", "length")
    assert response.model == llama_server.model
    assert response.usage is not None and response.usage.prompt_tokens > 0
    assert 0 < response.usage.completion_tokens <= 12  # max_tokens reaches the server and is obeyed


def test_a_missing_install_is_an_error_that_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DREAMKEEPER_CACHE", str(tmp_path))
    with pytest.raises(LlamaServerMissingError, match=r"not installed at .*make tools"):
        LlamaServer("smollm2")
