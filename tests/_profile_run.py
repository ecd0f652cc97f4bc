"""Shared pieces of the tests that run a persona through the CLI with a context profile:
a scripted one-subtask scenario (the worker reads a sample file) and the CLI runner."""

from __future__ import annotations

import subprocess
from pathlib import Path

from _helpers import one_read_steps, personae_cli

SCENARIO = {
    "description": "one subtask, one tool call (scripted)",
    "steps": one_read_steps(
        ".personae/samples/sales.csv", subtask="Write it", report="Report drafted.", answer="DONE"
    ),
}


def personae(
    cwd: Path, *args: str, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return personae_cli(*args, cwd=cwd, env={"COLUMNS": "120", **(env or {})}, check=check)
