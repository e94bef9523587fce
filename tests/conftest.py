"""Shared pytest configuration. Fixture plugins live in their own modules and are listed here."""

pytest_plugins: list[str] = [
    "tests.cluster.fixtures",
    "tests.corpus_index_modes",
    "tests.realmodel.fixtures",
    "tests.embeddings.fixtures",
]
