#!/usr/bin/env bash
# Set up a fresh virtual environment (.venv), install what the tests need (scripts/setup.d/*.sh:
# optional extras, host binaries from npm, system services from apt), then run every check:
# ruff, mypy --strict, pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[dev]'
# Each setup script installs one thing the tests use; it is idempotent and reuses its cache
# folder (PERSONAE_CI_CACHE, default ~/.cache/personae-ci) between runs.
export PERSONAE_CI_CACHE="${PERSONAE_CI_CACHE:-$HOME/.cache/personae-ci}"
mkdir -p "$PERSONAE_CI_CACHE"
for setup in scripts/setup.d/*.sh; do
  [ -e "$setup" ] || continue
  echo "== setup: $(basename "$setup")"
  # shellcheck source=/dev/null
  source "$setup"
done
echo "== ruff"
.venv/bin/python -m ruff check src tests bench
echo "== mypy --strict"
.venv/bin/python -m mypy
echo "== pytest"
.venv/bin/python -m pytest "$@"
