"""pytest plugin: real llama.cpp servers with PyPI models (registered in tests/conftest.py).

Fixtures (session-scoped: a model loads once per session):
- `smollm2_server`, `gemma3_server`, `qwen05b_server`, `qwen15b_server`: a started :class:`LlamaServer` for that model.
- `llama_server`: each of the two tiny ones in turn (tests using it run once per model).

If the server or a model is not installed, every test using them *errors* with the reason and the command that
installs it (`make tools`); nothing is skipped. Tests using them are marked `realmodel` automatically; deselect
them explicitly with `-m 'not realmodel'`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from tests.realmodel.server import MODELS, SMOKE_MODELS, LlamaServer

SERVER_FIXTURES = {"llama_server", *(f"{name}_server" for name in MODELS)}
KEEP_ENV = "DREAMKEEPER_KEEP_LLAMA_LOGS"  # =1: keep the servers' logs after the session


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.realmodel)


# Marks must be added before `-m` deselection (which also runs in pytest_collection_modifyitems).
pytest_collection_modifyitems = pytest.hookimpl(tryfirst=True)(pytest_collection_modifyitems)


def _serve(name: str, request: pytest.FixtureRequest) -> Iterator[LlamaServer]:
    server = LlamaServer(name)
    try:
        server.start()
    except BaseException:
        server.stop()
        raise
    try:
        yield server
    finally:
        server.stop()
        if request.session.testsfailed or os.environ.get(KEEP_ENV) == "1":
            print(f"\n[{name}_server] log kept in {server.log_path}")
        else:
            shutil.rmtree(server.state_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def smollm2_server(request: pytest.FixtureRequest) -> Iterator[LlamaServer]:
    yield from _serve("smollm2", request)


@pytest.fixture(scope="session")
def gemma3_server(request: pytest.FixtureRequest) -> Iterator[LlamaServer]:
    yield from _serve("gemma3", request)


@pytest.fixture(scope="session")
def qwen05b_server(request: pytest.FixtureRequest) -> Iterator[LlamaServer]:
    yield from _serve("qwen05b", request)


@pytest.fixture(scope="session")
def qwen15b_server(request: pytest.FixtureRequest) -> Iterator[LlamaServer]:
    yield from _serve("qwen15b", request)


@pytest.fixture(scope="session", params=SMOKE_MODELS)
def llama_server(request: pytest.FixtureRequest) -> LlamaServer:
    server = request.getfixturevalue(f"{request.param}_server")
    assert isinstance(server, LlamaServer)
    return server
