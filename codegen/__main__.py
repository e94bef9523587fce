"""``python -m codegen [--check] [--root DIR]``: every generator in turn (what `make generate` runs)."""

from __future__ import annotations

import sys

from codegen import generate
from codegen.observability import generate as observability


def main(argv: list[str] | None = None) -> int:
    # Both run even when the first reports stale files, so --check names every one.
    codes = [generate.main(argv), observability.main(argv)]
    return max(codes)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
