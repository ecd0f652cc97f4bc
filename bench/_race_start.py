"""CLI processes released at one start line, so that they reach the store together.

Shared by ``bench/bench_first_open.py`` and ``tests/test_store_first_open.py``: each
process does its imports, says it is ready (a file), then waits for one start file, so
the commands race instead of being spread out by start-up time.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

__all__ = ["START_LINE", "spawn_at_start_line"]

START_LINE = """
import os, sys, time
import personae.cli.app, personae.handover.create, personae.handover._history
ready, go = sys.argv[1], sys.argv[2]
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.002)
sys.argv = ["personae", *sys.argv[3:]]
from personae.cli.entry import main
main()
"""
"""Imports first, then wait at the start line: the commands reach the store together."""


def spawn_at_start_line(
    commands: Sequence[Sequence[str]],
    *,
    cwd: Path,
    env: dict[str, str],
    marks: Path,
    ready_timeout: float = 300,
) -> tuple[list[subprocess.Popen[str]], Path]:
    """Start ``personae COMMAND`` for each of ``commands`` and wait until all are ready
    (or one has exited, or ``ready_timeout`` seconds passed).

    Returns the processes and the start file: touching it releases them all.
    """
    marks.mkdir()
    go = marks / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", START_LINE, str(marks / f"ready{i}"), str(go), *command],
            cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for i, command in enumerate(commands)
    ]  # fmt: skip
    deadline = time.monotonic() + ready_timeout
    while len(list(marks.glob("ready*"))) < len(procs) and time.monotonic() < deadline:
        if any(proc.poll() is not None for proc in procs):
            break
        time.sleep(0.01)
    return procs, go
