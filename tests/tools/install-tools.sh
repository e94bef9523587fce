#!/usr/bin/env bash
# Installs (or builds) every external binary the test suite needs, cached outside the repo.
# Each piece is a script of its own so it can be run and cached independently.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
for step in "$here"/install.d/*.sh; do
  [ -e "$step" ] || continue
  echo "== tools: $(basename "$step")"
  bash "$step"
done
