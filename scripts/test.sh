#!/usr/bin/env bash
# Set up a fresh virtual environment (.venv) and run every check: ruff, mypy --strict, pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[dev]'
echo "== ruff"
.venv/bin/python -m ruff check src tests bench
echo "== mypy --strict"
.venv/bin/python -m mypy
echo "== pytest"
.venv/bin/python -m pytest "$@"
