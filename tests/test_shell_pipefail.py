"""The install and build scripts run under `set -o pipefail`; a pipeline whose reader exits early fails them.

Session 6's submission (stop 30) died in CI in `make tools` with exit 141: `etcd --version | head -1` under
pipefail. `head` exits after the first line; if etcd writes its second line after that, etcd gets SIGPIPE, the
pipeline's status is 141 and `set -e` ends the script. Whether it happens depends on scheduling, so it passed here
for weeks. The rule the scripts follow:
under pipefail, never pipe into a reader that stops early (`head`, `grep -q`, `grep -m`); take the first line with
`sed -n 1p` (which reads everything) or capture the output first.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EARLY_READER = re.compile(r"\|\s*(head\b|grep\s+(-\w*[qm]\w*\b|--quiet|--max-count))")


def _scripts() -> list[Path]:
    # A walk, not `git ls-files`: CI may test an exported tree. Third-party trees (venvs, caches) are not ours.
    skip = {".git", ".venv", "node_modules", "demo-run", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
    found = [p for p in ROOT.rglob("*.sh") if not skip.intersection(p.relative_to(ROOT).parts)]
    return sorted(found + [p for p in (ROOT / ".ci").glob("*") if p.is_file()])


def test_an_early_reader_under_pipefail_fails_the_pipeline() -> None:
    # The failure the rule prevents, shown for real: the writer outlives its reader.
    early = subprocess.run(["bash", "-c", "set -o pipefail; yes | head -1 >/dev/null"], check=False)
    assert early.returncode == 141
    whole = subprocess.run(["bash", "-c", "set -o pipefail; seq 1 100000 | sed -n 1p >/dev/null"], check=False)
    assert whole.returncode == 0


def test_no_pipefail_script_pipes_into_an_early_reader() -> None:
    scripts = _scripts()
    assert any(p.name == "build-control-plane.sh" for p in scripts)
    offenders = []
    for script in scripts:
        # Every script, not only those that set pipefail: a library (k8s-lib.sh) runs under its caller's options.
        text = script.read_text(encoding="utf-8")
        for number, line in enumerate(text.splitlines(), 1):
            code = line.split(" #", 1)[0] if not line.lstrip().startswith("#") else ""
            if EARLY_READER.search(code):
                offenders.append(f"{script.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == [], "pipe into an early reader under pipefail:\n" + "\n".join(offenders)
