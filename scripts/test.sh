#!/usr/bin/env bash
# Run the project's checks. `.ci/run` and the README's test command call it without arguments.
#
#   bash scripts/test.sh               set up (.venv, scripts/setup.d/*.sh), ruff, mypy --strict,
#                                      then every test: the `serial` tests alone, then all
#                                      the others, every lane, two workers (pytest-xdist)
#   bash scripts/test.sh fast          ruff and the fast lane: every test in no integration lane,
#                                      in process, two workers (sets up only if .venv is missing)
#   bash scripts/test.sh LANE          one integration lane alone: postgres, ray, browser, hosts,
#                                      sandbox, real_model or process (sets up first)
#   bash scripts/test.sh ... -- ARGS   extra pytest arguments (a file, -k, -x ...); without a lane
#                                      name, arguments go to pytest as they are
#
# Lanes are pytest markers (pyproject.toml), given by tests/conftest.py from what a test needs.
set -euo pipefail
cd "$(dirname "$0")/.."

LANES="postgres ray browser hosts sandbox real_model process"
lane="all"
if [ $# -gt 0 ] && { [ "$1" = "fast" ] || [ "$1" = "all" ] || [[ " $LANES " == *" $1 "* ]]; }; then
  lane="$1"
  shift
fi
[ "${1:-}" = "--" ] && shift

setup() {
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
}

# pytest exits 5 when a selection holds no test: for the `serial` pass that is not a failure.
pytest_allow_empty() {
  local code=0
  .venv/bin/python -m pytest "$@" || code=$?
  [ "$code" -eq 5 ] && return 0
  return "$code"
}

export PERSONAE_CI_CACHE="${PERSONAE_CI_CACHE:-$HOME/.cache/personae-ci}"
export PERSONAE_HOSTS_DIR="${PERSONAE_HOSTS_DIR:-$PERSONAE_CI_CACHE/hosts}"
integration="$(echo "$LANES" | sed 's/ / or /g')"

case "$lane" in
  fast)
    [ -x .venv/bin/python ] || setup
    echo "== ruff"
    .venv/bin/python -m ruff check src tests bench
    echo "== pytest: fast lane"
    PERSONAE_LANE=fast .venv/bin/python -m pytest -n 2 --dist worksteal -m "not ($integration)" "$@"
    ;;
  all)
    setup
    echo "== ruff"
    .venv/bin/python -m ruff check src tests bench
    echo "== mypy --strict"
    .venv/bin/python -m mypy
    # The serial tests first, so the closing line is the whole run's.
    echo "== pytest: serial tests"
    pytest_allow_empty -m serial "$@"
    echo "== pytest: every other test, every lane, two workers"
    .venv/bin/python -m pytest -n 2 --dist worksteal -m "not serial" "$@"
    ;;
  *)
    setup
    echo "== pytest: $lane lane"
    pytest_allow_empty -m "$lane and serial" "$@"
    .venv/bin/python -m pytest -n 2 --dist worksteal -m "$lane and not serial" "$@"
    ;;
esac
