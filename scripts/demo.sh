#!/usr/bin/env bash
# Set up a fresh virtual environment (.venv) and run the offline demo (scripted replay server, no provider needed).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e .
.venv/bin/personae demo "$@"
