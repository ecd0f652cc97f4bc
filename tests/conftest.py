"""Test-wide guards: no real model requests; subprocesses import this checkout; one width.

The output width is fixed here, before Typer or rich are imported, for every CLI
invocation in this process (``main()``, CliRunner) and every child process (they inherit
the environment): the suite gives the same result on a terminal of any width and with
none. Tests still assert on content (see :func:`flat`), not on where lines break.
"""

from __future__ import annotations

import os
from pathlib import Path

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
