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

# Every extra the tests use, installed in one resolution (each setup.d step then finds its extra
# satisfied and installs nothing).
TEST_EXTRAS="dev,pydantic-ai,openai-agents,langchain,ui,ui-test,otel,postgres,ray,science"

# pip installs from a wheelhouse in the cache ($PERSONAE_CI_CACHE/pip-wheels) without asking the
# index, when the wheelhouse has every package; otherwise (a first run, a new or raised
# requirement) it builds or downloads the missing wheels into the wheelhouse from the index, then
# installs from there. Arguments are `pip install`'s.
pip_install() {
  local wheels="$PERSONAE_CI_CACHE/pip-wheels"
  mkdir -p "$wheels"
  .venv/bin/python -m pip install -q --no-index --find-links "$wheels" "$@" >/dev/null 2>&1 && return 0
  local args=() arg
  for arg in "$@"; do
    case "$arg" in -U | --upgrade | -e | --editable) ;; *) args+=("$arg") ;; esac
  done
  # the build backend too (`pip install -e .` builds personae in an isolated environment; hatchling
  # asks for `editables` there)
  .venv/bin/python -m pip wheel -q -w "$wheels" "${args[@]}" editables \
    $(.venv/bin/python -c 'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"])')
  rm -f "$wheels"/personae-*.whl
  .venv/bin/python -m pip install -q --no-index --find-links "$wheels" "$@" && return 0
  echo "pip: the wheelhouse $wheels still misses a package; installing from the index" >&2
  .venv/bin/python -m pip install -q "$@"
}

# pip_extras EXTRA...: install personae's extras unless every requirement they name is installed
# at a version that satisfies it (then pip is not started at all).
pip_extras() {
  .venv/bin/python - "$@" <<'PY' && return 0
import sys
from importlib import metadata

try:
    from packaging.requirements import Requirement
except ImportError:  # pip carries its own copy
    from pip._vendor.packaging.requirements import Requirement

try:
    requires = metadata.distribution("personae").requires or []
except metadata.PackageNotFoundError:
    sys.exit(1)


def satisfied(requires: list[str], extras: set[str]) -> bool:
    for line in requires:
        req = Requirement(line)
        if req.marker is not None and not any(
            req.marker.evaluate({"extra": e}) for e in extras or {""}
        ):
            continue
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            return False
        if not req.specifier.contains(dist.version, prereleases=True):
            return False
        if req.extras and not satisfied(dist.requires or [], set(req.extras)):
            return False
    return True


sys.exit(0 if satisfied(requires, set(sys.argv[1:])) else 1)
PY
  pip_install -e ".[$(IFS=,; echo "$*")]"
}

setup() {
  [ -x .venv/bin/python ] || python3 -m venv .venv
  # Each setup script installs one thing the tests use; it is idempotent and reuses its cache
  # folder (PERSONAE_CI_CACHE, default ~/.cache/personae-ci) between runs.
  export PERSONAE_CI_CACHE="${PERSONAE_CI_CACHE:-$HOME/.cache/personae-ci}"
  mkdir -p "$PERSONAE_CI_CACHE"
  # the newest pip once into the wheelhouse, then from there
  ls "$PERSONAE_CI_CACHE"/pip-wheels/pip-*.whl >/dev/null 2>&1 \
    || .venv/bin/python -m pip download -q --no-deps -d "$PERSONAE_CI_CACHE/pip-wheels" pip
  pip_install --upgrade pip
  pip_install -e ".[$TEST_EXTRAS]"
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

# Where PYTHONDONTWRITEBYTECODE is set (as on the CI machine), Python caches no bytecode for
# src/ (pip compiles only what it installs, and the editable install installs no module), so
# every child `python -m personae` the tests start would compile what it imports again: about
# 0.4 s of CPU each, hundreds of times. compileall writes the cache whatever that setting says
# (about 1 s); Python checks each file against its source, so a stale entry is never used.
compile_src() {
  .venv/bin/python -m compileall -q src >/dev/null
}

export PERSONAE_CI_CACHE="${PERSONAE_CI_CACHE:-$HOME/.cache/personae-ci}"
# Bytecode is cached (__pycache__, ignored by git) even where the caller's environment turns that
# off: otherwise every pytest worker re-parses and assertion-rewrites all 180 test modules and
# recompiles the sources, about 10 s of CPU per worker on each run. A cached file is used only
# while its source's mtime and size match.
unset PYTHONDONTWRITEBYTECODE
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
    # mypy's cache lives beside the other caches, so a fresh clone checks only what changed
    # (mypy compares each file's hash with its cache entry: a stale entry is never used)
    .venv/bin/python -m mypy --cache-dir "$PERSONAE_CI_CACHE/mypy"
    # The serial tests first, so the closing line is the whole run's. Without arguments, only
    # the files that mark a test `serial` are collected (collecting the whole tree costs more
    # than the serial tests themselves).
    compile_src
    echo "== pytest: serial tests"
    if [ $# -eq 0 ]; then
      mapfile -t serial_files < <(grep -rlE --include='test_*.py' 'mark\.serial\b' tests)
      [ "${#serial_files[@]}" -eq 0 ] || pytest_allow_empty -m serial "${serial_files[@]}"
    else
      pytest_allow_empty -m serial "$@"
    fi
    echo "== pytest: every other test, every lane, two workers (the 30 slowest listed at the end)"
    .venv/bin/python -m pytest -n 2 --dist worksteal -m "not serial" --durations=30 "$@"
    ;;
  *)
    setup
    compile_src
    echo "== pytest: $lane lane"
    pytest_allow_empty -m "$lane and serial" "$@"
    .venv/bin/python -m pytest -n 2 --dist worksteal -m "$lane and not serial" "$@"
    ;;
esac
