"""The import contracts in pyproject.toml ([tool.importlinter]) hold, and they fail when an import goes against them.

`make lint` runs `lint-imports` on the tree; these tests also prove the contracts have teeth: each case copies the
package, adds one module that breaks a rule, and runs the real `lint-imports` on the copy.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint(cwd: Path, package_parent: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(package_parent)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_tree_keeps_every_contract() -> None:
    result = _lint(ROOT, ROOT / "operator")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "source", "contract"),
    [
        # a lower layer reaching up
        ("memory/_probe.py", "import dreamkeeper.kube.models\n", "memory <- coverage <- consolidation"),
        ("coverage/_probe.py", "from dreamkeeper.consolidation import CycleSettings\n", "memory <- coverage"),
        ("formats/_probe.py", "from dreamkeeper.consolidation import CycleSettings\n", "memory <- coverage"),
        # siblings of one layer are independent
        ("kube/_probe.py", "import dreamkeeper.dream_command\n", "memory <- coverage"),
        ("coverage/_probe.py", "import dreamkeeper.formats\n", "memory <- coverage"),
        # a package's submodules are its own
        ("kube/_probe.py", "from dreamkeeper.memory.atomic import replace_file\n", "through its face"),
        ("proposers/_probe.py", "from dreamkeeper.memory.entry import Entry\n", "through its face"),
        ("kube/_probe.py", "from dreamkeeper.consolidation.clustering.scan import edge_graph\n", "through its face"),
        ("consolidation/_probe.py", "from dreamkeeper.formats.render import render\n", "through its face"),
        # the demo is a leaf; the runtime never imports build-time code
        ("demo/_probe.py", "from dreamkeeper.consolidation import run_cycle\n", "demo sample sits on memory"),
        ("memory/_probe.py", "import codegen\n", "never imports build-time code"),
    ],
)
def test_an_import_against_the_layering_breaks_a_contract(
    tmp_path: Path, module: str, source: str, contract: str
) -> None:
    shutil.copytree(ROOT / "operator" / "dreamkeeper", tmp_path / "pkg" / "dreamkeeper")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "pkg" / "dreamkeeper" / module).write_text(source, encoding="utf-8")
    result = _lint(tmp_path, tmp_path / "pkg")
    assert result.returncode != 0, result.stdout[-3000:]
    broken = result.stdout.split("Broken contracts", 1)[-1]
    assert contract in broken and "_probe" in broken, result.stdout[-3000:]
