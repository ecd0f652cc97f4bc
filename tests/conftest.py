"""Test-wide guards: no real model requests; subprocesses import this checkout; one width.

The output width is fixed here, before Typer or rich are imported, for every CLI
invocation in this process (``main()``, CliRunner) and every child process (they inherit
the environment): the suite gives the same result on a terminal of any width and with
none. Tests still assert on content (see :func:`flat`), not on where lines break.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

# rich (and so Typer's help and error panels) reads COLUMNS; Typer reads TERMINAL_WIDTH once,
# at import. TERM=dumb and NO_COLOR keep escape codes out of captured output, and
# _TYPER_FORCE_DISABLE_TERMINAL makes Typer's console behave as with no terminal, whatever
# the runner's stdin/stdout are.
os.environ.update(
    COLUMNS="200",
    LINES="50",
    TERMINAL_WIDTH="200",
    TERM="dumb",
    NO_COLOR="1",
    _TYPER_FORCE_DISABLE_TERMINAL="1",
)
os.environ.pop("FORCE_COLOR", None)
os.environ.pop("PY_COLORS", None)
# Token counts are remembered on disk under the user's data folder: off in tests (they
# must not write the user's data), on in the tests of that cache, with a private home.
os.environ["PERSONAE_COUNT_CACHE"] = "off"

import pytest
from pydantic_ai import models

from _helpers import ProjectFactory, build_project, personae_cli, write_scenarios

SRC = Path(__file__).resolve().parents[1] / "src"

pytest_plugins = ["_pg"]  # a real PostgreSQL server for the store tests (tests/_pg.py)

# Any attempt to reach a real model provider fails the test.
models.ALLOW_MODEL_REQUESTS = False

# Child `python -m personae` processes must import the code under test.
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(SRC), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
)


def flat(text: str) -> str:
    """``text`` with box-drawing characters dropped and all whitespace runs made one space.

    For assertions on what a message says, not where a panel of any width breaks it.
    """
    kept = "".join(" " if 0x2500 <= ord(ch) <= 0x257F else ch for ch in text)
    return " ".join(kept.split())


@pytest.fixture
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private PERSONAE_HOME so tests never touch the user's data."""
    home = tmp_path / "personae-home"
    monkeypatch.setenv("PERSONAE_HOME", str(home))
    monkeypatch.delenv("PERSONAE_MODEL", raising=False)
    return home


@pytest.fixture
def cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    """The CLI in this process: ``cli(*args, cwd=, env=, drop=, check=, process=False)``
    (:func:`_helpers.personae_cli`) with the width and colour settings above."""
    return personae_cli


@pytest.fixture
def project_factory(tmp_path: Path) -> ProjectFactory:
    """``project_factory(personas, files, name="proj", folder=".personae/personas",
    scenarios={})``: ``tmp_path/NAME`` with each persona at ``FOLDER/NAME.md`` and each file
    at its relative path; each scenario is written to ``tmp_path/NAME.yaml`` (for a
    ``scripted:`` model spec beside the project). Returns the project root."""

    def make(
        personas: Mapping[str, str] = {},
        files: Mapping[str, str] = {},
        *,
        name: str = "proj",
        folder: str = ".personae/personas",
        scenarios: Mapping[str, Any] = {},
    ) -> Path:
        write_scenarios(tmp_path, scenarios)
        return build_project(tmp_path / name, personas, files, folder=folder)

    return make


@pytest.fixture
def offline_home(isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """:func:`isolated_home`, and no ``OPENAI_BASE_URL`` from the caller's environment: runs
    use only the model spec a test gives them."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    return isolated_home


# Integration lanes. A test joins a lane by what it needs: a fixture of that lane's service
# (below), a module listed here, or its own `pytest.mark.<lane>`. `bash scripts/test.sh fast`
# runs every test in no lane; `bash scripts/test.sh LANE` runs one lane alone.
LANES = ("postgres", "ray", "browser", "hosts", "sandbox", "real_model", "process")
LANE_FIXTURES = {"pg_server": "postgres", "pg_database": "postgres"}
LANE_MODULES = {
    "test_ray": "ray",
    "test_ui_browser": "browser",
    "test_persona_claude_binary": "hosts",
    "test_tools_sandbox": "sandbox",
    "test_team_subagent_sandbox": "sandbox",
    # whole modules about what crosses a process boundary
    "test_batch": "process",
    "test_chain_example": "process",
    "test_chain_run": "process",
    "test_conversations_processes": "process",
    "test_handover_executor": "process",
    "test_hosts_wrapper": "process",  # hook wrappers whose entry point hangs: real waits
    "test_procs_orphans": "process",
    "test_tools_lifetime": "process",
}
LANE_FOLDERS = {"hosts_e2e": "hosts"}


def _lanes_of(item: pytest.Item) -> set[str]:
    """The integration lanes ``item`` belongs to (empty: the fast, in-process lane)."""
    lanes = {mark.name for mark in item.iter_markers() if mark.name in LANES}
    fixtures = getattr(item, "fixturenames", ())
    lanes.update(lane for name, lane in LANE_FIXTURES.items() if name in fixtures)
    callspec = getattr(item, "callspec", None)
    if callspec is not None and callspec.params.get("backend") == "postgres":
        lanes.add("postgres")
    path = Path(str(item.path))
    if path.stem in LANE_MODULES:
        lanes.add(LANE_MODULES[path.stem])
    lanes.update(lane for folder, lane in LANE_FOLDERS.items() if folder in path.parts)
    return lanes


# The order a run starts its tests in: the lanes with the longest tests first, the fast lane
# last. pytest-xdist's worksteal gives each worker a contiguous half and a worker that runs dry
# steals from the end of the other's queue: with the long tests in front they start early on
# one worker (one Ray cluster, one model server), and short tests fill the tail.
LANE_ORDER = ("real_model", "ray", "hosts", "browser", "sandbox", "postgres", "process")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with its lanes (see :data:`LANES`), so ``-m`` selects a lane, and order
    the tests by :data:`LANE_ORDER` (stable: within a rank, the collection order)."""
    rank: dict[str, int] = {}
    for item in items:
        lanes = _lanes_of(item)
        for lane in sorted(lanes):
            item.add_marker(getattr(pytest.mark, lane))
        rank[item.nodeid] = min((LANE_ORDER.index(lane) for lane in lanes), default=len(LANE_ORDER))
    items.sort(key=lambda item: rank[item.nodeid])


# Child interpreters. The fast lane runs in process: a test there that starts a Python child
# (``python -m personae``, the ``personae`` script, multiprocessing's fork) belongs in the
# ``process`` lane, where the process boundary is the point. An audit hook sees every spawn.
_spawned: list[str] = []


def _is_interpreter(program: object) -> bool:
    name = os.path.basename(os.fsdecode(program)) if isinstance(program, (str, bytes)) else ""
    return name.startswith("python") or name == "personae"


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "subprocess.Popen":
        executable, argv = args[0], args[1]
        words = list(argv) if isinstance(argv, (list, tuple)) else [argv]
        if any(str(w).endswith("_reaper.py") for w in words):
            return  # the run-processes watchdog: started once per process, not a CLI child
        if _is_interpreter(executable) or (words and _is_interpreter(words[0])):
            _spawned.append(" ".join(map(str, words)))
    elif event == "os.fork":
        _spawned.append("os.fork()")


sys.addaudithook(_audit)


@pytest.fixture(autouse=True)
def _child_interpreters(request: pytest.FixtureRequest) -> Iterator[None]:
    """In the fast lane (``PERSONAE_LANE=fast``), fail a test outside the ``process`` lane that
    starts a Python child; with ``PERSONAE_LANE_CENSUS=FILE``, list such tests in FILE."""
    _spawned.clear()
    yield
    if not _spawned or request.node.get_closest_marker("process") is not None:
        return
    census = os.environ.get("PERSONAE_LANE_CENSUS")
    if census:
        with open(census, "a", encoding="utf-8") as out:
            out.write(f"{request.node.nodeid}\t{len(_spawned)}\t{_spawned[0][:120]}\n")
    if os.environ.get("PERSONAE_LANE") == "fast":
        pytest.fail(
            f"started {len(_spawned)} Python child process(es) in the fast lane "
            f"(first: {_spawned[0][:160]}); run the CLI in process (the `cli` fixture) or "
            "mark the test `process` where the process boundary is the point",
            pytrace=False,
        )
