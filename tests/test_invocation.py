"""``personae.invocation``: the command line children run personae with."""

from __future__ import annotations

import subprocess
import sys

import pytest

from personae.invocation import as_typed, personae_argv


@pytest.mark.process
def test_personae_argv_runs_this_installation() -> None:
    argv = personae_argv("--help")
    assert argv[0] == sys.executable
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "personae" in done.stdout and "Usage" in done.stdout


def test_as_typed_shows_personae_command_lines_as_a_user_types_them() -> None:
    assert as_typed(personae_argv("run", "--persona", "dev")) == [
        "personae",
        "run",
        "--persona",
        "dev",
    ]
    assert as_typed(personae_argv()) == ["personae"]


def test_as_typed_leaves_other_command_lines_alone() -> None:
    other = ["/usr/bin/python3", "-m", "pytest", "-q"]
    assert as_typed(other) == other
    assert as_typed(("tool",)) == ["tool"]
