"""Shared parts of the batch tests: the scripted model server, task files, run counts."""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from _batch_child import CHILD
from personae.batch.job import RunCommand
from personae.models.scripted import ScriptedServer

STANDIN = RunCommand(prefix=(sys.executable, str(CHILD)))
"""Runs the stand-in child (``_batch_child.py``) instead of ``personae run``."""

SCENARIO: dict[str, Any] = {
    "description": "batch answers by task kind (scripted)",
    "rules": [
        {"when": {"contains": "kind=odd"}, "text": "ODD"},
        {"when": {"contains": "kind=even"}, "text": "EVEN"},
    ],
}


def scripted_server(tmp_path: Path) -> ScriptedServer:
    """A started scripted model server answering :data:`SCENARIO` (stop it when done)."""
    path = tmp_path / "batch.scenario.yaml"
    path.write_text(yaml.safe_dump(SCENARIO))
    return ScriptedServer(path).start()


def write_tasks(path: Path, count: int, url: str, *, extra: str = "") -> list[str]:
    """``count`` tasks (persona alternating, id ``t000``...) asking ``url``; returns the ids."""
    ids = []
    with path.open("w") as fh:
        for i in range(count):
            kind = "odd" if i % 2 else "even"
            task = {"id": f"t{i:03}", "task": f"task {i} kind={kind} {extra}".strip(),
                    "persona": f"p{i % 3}", "model": url}  # fmt: skip
            fh.write(json.dumps(task) + "\n")
            ids.append(task["id"])
    return ids


def rows(path: Path) -> list[dict[str, Any]]:
    """The result lines of ``path``."""
    return [json.loads(line) for line in path.read_text().splitlines()]


def outcome(path: Path) -> dict[str, tuple[str, str | None]]:
    """``{id: (status, output)}``: what must be identical across executors."""
    return {r["id"]: (r["status"], r["output"]) for r in rows(path)}


def run_counts(root: Path) -> Counter[str]:
    """How many child runs each task text had (from the stand-in's ``runs.log``)."""
    log = root / "runs.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return Counter(json.loads(line)["task"] for line in lines)


def processes_mentioning(needle: str) -> list[int]:
    """Pids of live processes whose command line contains ``needle`` (not zombies)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if needle.encode() in cmdline and state != "Z":
            found.append(int(entry.name))
    return found
