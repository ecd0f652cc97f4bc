"""Shared parts of the batch tests: the scripted replay server, task files, run counts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from _batch_child import CHILD
from personae.batch.job import RunCommand
from personae.models.scripted import ScriptedServer

DRIVER = Path(__file__).resolve().parent / "_batch_driver.py"

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
    """A started scripted replay server answering :data:`SCENARIO` (stop it when done)."""
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


def kill_and_restart(root: Path, server: ScriptedServer, kind: str, *extra: str) -> None:
    """SIGKILL a batch driver once some tasks are done; a second driver finishes the rest."""
    tasks = root / "tasks.jsonl"
    ids = write_tasks(tasks, 24, server.base_url, extra="sleep=0.3")
    results = root / "out.jsonl"
    cmd = [sys.executable, str(DRIVER), str(tasks), str(results), kind, *extra]
    driver = subprocess.Popen(
        cmd, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not results.exists() or len(rows(results)) < 6):
        time.sleep(0.05)
    driver.kill()
    driver.wait()
    first = {r["id"] for r in rows(results)}
    assert 6 <= len(first) < 24, driver.stderr.read() if driver.stderr else ""
    # The killed driver's children die with it: none is left running.
    deadline = time.monotonic() + 20
    while processes_mentioning(str(root)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_mentioning(str(root)) == []
    again = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=300, check=False)
    assert again.returncode == 0, again.stderr
    events = [json.loads(line) for line in again.stdout.splitlines()]
    assert events[0] == {"event": "begin", "total": 24, "skipped": len(first)}
    final = rows(results)
    assert sorted(r["id"] for r in final) == ids  # one line per task, none twice
    assert all(r["status"] == "success" for r in final)
    counts = run_counts(root)
    for i in range(24):
        text = f"task {i} kind={'odd' if i % 2 else 'even'} sleep=0.3"
        # Done before the kill: run once. In flight at the kill (at most 2): run again.
        assert counts[text] == 1 if f"t{i:03}" in first else 1 <= counts[text] <= 2
    assert sum(counts.values()) <= 24 + 2


def interrupt(root: Path, server: ScriptedServer, kind: str, *extra: str) -> None:
    """SIGINT a batch driver while two children run: it exits 130 and leaves no process."""
    tasks = root / "tasks.jsonl"
    mark = f"sleep=60 mark={uuid.uuid4().hex}"  # in every child's command line
    write_tasks(tasks, 6, server.base_url, extra=mark)
    results = root / "out.jsonl"
    cmd = [sys.executable, str(DRIVER), str(tasks), str(results), kind, *extra]
    driver = subprocess.Popen(
        cmd, cwd=root, stdout=subprocess.PIPE, text=True,
        # A test run started in the background inherits SIGINT ignored; Ctrl-C needs the default.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509
    )  # fmt: skip
    assert driver.stdout is not None
    starts = 0
    for line in driver.stdout:  # JSON events; a child started = one "start"
        starts += json.loads(line)["event"] == "start"
        if starts == 2:
            break
    assert len(processes_mentioning(mark)) == 2
    sent = time.monotonic()
    driver.send_signal(signal.SIGINT)
    assert driver.wait(timeout=60) == 130
    assert time.monotonic() - sent < 30  # cancelled, not waited out (each task sleeps 60 s)
    deadline = time.monotonic() + 20
    while processes_mentioning(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_mentioning(mark) == []
    assert not results.exists() or rows(results) == []  # nothing finished, nothing recorded
    assert sum(run_counts(root).values()) <= 2  # no task started after the interrupt
