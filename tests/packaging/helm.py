"""The real helm binary (from `make tools`), rendering the chart into parsed documents for assertions."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from tests.cluster import tools

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "dreamkeeper"
VALUES_DIR = Path(__file__).resolve().parent / "values"
MONITORING_API = "monitoring.coreos.com/v1"

Doc = dict[str, Any]


class HelmError(AssertionError):
    pass


def helm(*args: str, kubeconfig: Path | None = None, check: bool = True, timeout: float = 300) -> str:
    """Run helm (the pinned binary; a missing one raises ToolMissingError, so tests fail rather than skip)."""
    argv = [str(tools.helm_binary()), *args]
    if kubeconfig is not None:
        argv.append(f"--kubeconfig={kubeconfig}")
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if check and result.returncode != 0:
        raise HelmError(f"helm {' '.join(args)} exited {result.returncode}:\n{result.stderr}\n{result.stdout[-2000:]}")
    return result.stdout + result.stderr if not check else result.stdout


def template_text(
    values: Sequence[str] = (),
    *,
    sets: Sequence[str] = (),
    api_versions: Sequence[str] = (),
    namespace: str = "dreamkeeper-system",
    release: str = "dreamkeeper",
    include_crds: bool = False,
) -> str:
    args = ["template", release, str(CHART), "--namespace", namespace]
    for name in values:
        args += ["-f", str(VALUES_DIR / name)]
    for item in sets:
        args += ["--set", item]
    for api in api_versions:
        args += ["--api-versions", api]
    if include_crds:
        args.append("--include-crds")
    return helm(*args)


def template(*values: str, **kwargs: Any) -> list[Doc]:
    return [d for d in yaml.safe_load_all(template_text(values, **kwargs)) if d]


def by_kind(docs: list[Doc], kind: str) -> list[Doc]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[Doc], kind: str) -> Doc:
    found = by_kind(docs, kind)
    assert len(found) == 1, f"expected one {kind}, got {[d['metadata']['name'] for d in found]}"
    return found[0]
