"""Test-wide guards: no real model requests; subprocesses import this checkout; one width.

The output width is fixed here, before Typer or rich are imported, for every CLI
invocation in this process (``main()``, CliRunner) and every child process (they inherit
the environment): the suite gives the same result on a terminal of any width and with
none. Tests still assert on content (see :func:`flat`), not on where lines break.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping
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
    """The CLI as a child process: ``cli(*args, cwd=, env=, drop=, timeout=, check=)``
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
