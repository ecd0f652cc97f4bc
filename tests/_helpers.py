"""Shared parts of the tests: the CLI as a child process, and a one-persona project whose
team run reads ``config.yaml`` on the scripted model server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

VALIDATOR_OK: dict[str, Any] = {
    "approved": True,
    "requirements_met": True,
    "issues": [],
    "completion_signal": {"confidence": "high", "progress_made": True},
}
"""A validator verdict that approves the worker's report."""

DEV_PERSONA = """---
name: dev
description: Works on the sample project.
tools: [read_file, grep]
---
You are dev.
"""


def run_personae(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 60,
    stdin: int | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m personae ARGS`` as a child process and return it, whatever its exit.

    ``env`` replaces the environment (``None``: this process's own); ``stdin``, e.g.
    ``subprocess.DEVNULL`` (``None``: inherited).
    """
    return subprocess.run(
        [sys.executable, "-m", "personae", *args],
        check=False,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
        stdin=stdin,
    )


def read_config_scenario(
    answer: str, *, description: str, report: str = "config.yaml: port 8081"
) -> dict[str, Any]:
    """One subtask: the worker reads ``config.yaml`` and reports, the validator approves,
    the manager answers ``answer``."""
    return {
        "description": description,
        "steps": [
            {"when": {"role": "manager"}, "output": {"subtasks": [{"description": "Read config"}]}},
            {"when": {"role": "worker"},
             "tool_calls": [{"name": "read_file", "args": {"path": "config.yaml"}}]},
            {"when": {"role": "worker"}, "text": report},
            {"when": {"role": "validator"}, "output": VALIDATOR_OK},
            {"when": {"role": "manager"}, "text": answer},
        ],
    }  # fmt: skip


def dev_project(
    tmp_path: Path, scenarios: dict[str, dict[str, Any]], *, persona: str = DEV_PERSONA
) -> Path:
    """``tmp_path/proj`` with the ``dev`` persona and a ``config.yaml`` (port 8081); each
    scenario is written to ``tmp_path/NAME.yaml``."""
    root = tmp_path / "proj"
    (root / ".personae" / "personas").mkdir(parents=True)
    (root / ".personae" / "personas" / "dev.md").write_text(persona)
    (root / "config.yaml").write_text("port: 8081\n")
    for name, plan in scenarios.items():
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(plan))
    return root
