"""The runtime package stays apart from build-time and demo code: what the operator imports, read from the source.

codegen/ (the generators, with the dev-only grafana-foundation-sdk) is outside the package, so a runtime import of
it would break the image; the demo sample is a leaf only the root CLI registers.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "operator" / "dreamkeeper"
BUILD_TIME = ("codegen", "grafana_foundation_sdk", "tests", "bench")


def _imports() -> dict[str, set[str]]:
    """Module path (relative to the package) -> every module it imports, at any depth (lazy imports too)."""
    found: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module)
            elif (
                isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("dreamkeeper.")
            ):
                names.add(node.value)  # module names handed to __import__ / importlib (cli.py's registry)
        found[path.relative_to(PACKAGE).as_posix()] = names
    return found


def _is_under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_the_package_imports_no_build_time_code() -> None:
    offenders = {
        module: sorted(n for n in names if any(_is_under(n, top) for top in BUILD_TIME))
        for module, names in _imports().items()
    }
    assert {m: n for m, n in offenders.items() if n} == {}


def test_only_the_root_cli_imports_the_demo() -> None:
    importers = {
        module
        for module, names in _imports().items()
        if not module.startswith("demo/") and any(_is_under(n, "dreamkeeper.demo") for n in names)
    }
    assert importers == {"cli.py"}


def test_the_probe_sees_imports() -> None:
    """The walk above would pass vacuously if it read nothing: it does see the imports it guards."""
    imports = _imports()
    assert "dreamkeeper.memory.store" in imports["memory/stats.py"]
    assert "dreamkeeper.demo.cli" in imports["cli.py"]
