"""Every vector of ``data/rockbot-vectors.json`` is ported by a parity test, and every vector names its commit."""

from __future__ import annotations

from tests.parity import (  # noqa: F401  (importing the modules is what claims their vectors)
    test_parity_archive,
    test_parity_coverage,
    test_parity_decay,
    test_parity_dedup,
    test_parity_fold,
    test_parity_gating,
)
from tests.parity.vectors import CLAIMED, DOCUMENT, VECTORS, vector_id


def test_every_vector_is_ported() -> None:
    assert len(VECTORS) == DOCUMENT["count"] == 160
    # The parametrized tests claim their vectors at import; single-vector ones (``one(...)``) are found by name.
    everything = {vector_id(v) for v in VECTORS}
    unclaimed = everything - CLAIMED - _claimed_by_name()
    assert not unclaimed, sorted(unclaimed)


def test_every_vector_cites_a_rockbot_commit() -> None:
    for vector in VECTORS:
        assert vector["commit"] and vector["file"].startswith("tests/RockBot.Host.Tests/"), vector_id(vector)


def _claimed_by_name() -> set[str]:
    """Vectors a test takes with ``one(...)``: found in the test modules' source, so running this file alone works."""
    import ast
    from pathlib import Path

    found: set[str] = set()
    for path in sorted(Path(__file__).parent.glob("test_parity_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "one" and len(node.args) == 2:
                suite, test = (a.value for a in node.args if isinstance(a, ast.Constant))
                found.add(f"{suite}:{test}")
    return found


def test_every_issue_24_vector_is_cited_by_a_test_with_its_commit() -> None:
    """data/rockbot-citizen-vectors.json (issue 24): each vector names RockBot's file and a full commit, and some
    parity test cites it (``cite(suite, test)``)."""
    import ast
    from pathlib import Path

    from tests.parity.citizen import DOCUMENT as CITIZEN
    from tests.parity.citizen import VECTORS as CITED_VECTORS
    from tests.parity.citizen import key

    assert len(CITED_VECTORS) == CITIZEN["count"]
    cited: set[str] = set()
    for path in sorted(Path(__file__).parent.glob("test_parity_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "cite" and len(node.args) == 2:
                constants = [a.value for a in node.args if isinstance(a, ast.Constant)]
                if len(constants) == 2:
                    cited.add(f"{constants[0]}:{constants[1]}")
    for vector in CITED_VECTORS:
        assert len(vector["commit"]) == 40 and vector["file"].startswith(("src/", "tests/RockBot.Host.Tests/"))
    # Parametrized tests cite by a variable: their names are in the test's parameter list.
    names = {
        str(c.value)
        for path in sorted(Path(__file__).parent.glob("test_parity_*.py"))
        for c in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(c, ast.Constant) and isinstance(c.value, str)
    }
    missing = [key(v) for v in CITED_VECTORS if key(v) not in cited and v["test"] not in names]
    assert not missing, missing
