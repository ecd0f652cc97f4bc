"""Test-wide guards: no real model requests; subprocesses import this checkout."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic_ai import models

SRC = Path(__file__).resolve().parents[1] / "src"

# Any attempt to reach a real model provider fails the test.
models.ALLOW_MODEL_REQUESTS = False

# Child `python -m personae` processes must import the code under test.
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(SRC), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
)


@pytest.fixture
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private PERSONAE_HOME so tests never touch the user's data."""
    home = tmp_path / "personae-home"
    monkeypatch.setenv("PERSONAE_HOME", str(home))
    monkeypatch.delenv("PERSONAE_MODEL", raising=False)
    return home
