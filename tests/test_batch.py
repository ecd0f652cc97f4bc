"""Batches on the local executor: task files checked up front, result lines, resume, progress.

Children are the stand-in program ``_batch_child.py`` (a real process asking the
scripted replay server over loopback HTTP), except in the last test, which runs
the real ``personae run`` through the CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from _batch_support import (
    STANDIN,
    interrupt,
    kill_and_restart,
    outcome,
    rows,
    run_counts,
    scripted_server,
    write_tasks,
)
from _helpers import dev_project, read_config_scenario, run_personae
from personae.batch.engine import BatchOptions, run_batch
from personae.batch.progress import Progress, format_eta
from personae.batch.results import ResultLog
from personae.errors import UsageError
from personae.models.scripted import ScriptedServer
from personae.workflow.executors import LocalProcessExecutor


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ScriptedServer]:
    srv = scripted_server(tmp_path)
    yield srv
    srv.stop()


def batch(
    root: Path, tasks: Path, *, concurrency: int = 3, retries: int = 0
) -> tuple[int, int, int]:
    opts = BatchOptions(cwd=root, concurrency=concurrency, retries=retries, backoff=0.01,
                        timeout=60, command=STANDIN)  # fmt: skip
    progress = Progress("plain", open(os.devnull, "w"), open(os.devnull, "w"))  # noqa: SIM115
    out = run_batch(tasks, opts, executor=LocalProcessExecutor(tie=True), progress=progress)
    return out.ok, out.failed, out.skipped


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("{not json", "not a JSON object"),
        ("[1, 2]", "each line must be a JSON object"),
        ('{"persona": "dev"}', "task"),
        ('{"task": "a", "prompt": "b"}', "either 'task' or 'prompt'"),
        ('{"task": "a", "colour": "red"}', "colour"),
        ('{"task": "a", "id": "no spaces"}', "id"),
        ('{"task": "a", "id": "t000"}', "duplicate id 't000' (first on line 1)"),
        ('{"task": "a", "retries": 99}', "retries"),
    ],
)
def test_bad_line_refused_with_file_and_line(
    tmp_path: Path, line: str, needle: str, cli: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"id": "t000", "task": "fine"}\n\n' + line + "\n")
    # in process: the file is refused before any task starts, so no child is at stake
    done = cli("batch", str(tasks), cwd=tmp_path)
    assert done.returncode == 2, done.stderr  # a mistake in the task file: usage
    assert f"personae: error: {tasks}:3:" in done.stderr and needle in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "tasks.results.jsonl").exists()  # nothing ran, nothing written


def test_special_and_empty_task_files_refused(
    tmp_path: Path, cli: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    done = cli("batch", str(fifo), cwd=tmp_path)
    assert done.returncode == 2 and "fifo.jsonl" in done.stderr
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    done = cli("batch", str(empty), cwd=tmp_path)
    assert done.returncode == 2 and "no tasks" in done.stderr


def test_results_resume_and_retries(tmp_path: Path, server: ScriptedServer) -> None:
    tasks = tmp_path / "tasks.jsonl"
    write_tasks(tasks, 12, server.base_url)
    with tasks.open("a") as fh:
        fh.write(
            json.dumps({"id": "flaky", "task": "flaky kind=odd fail=1", "model": server.base_url})
            + "\n"
        )
        fh.write(
            json.dumps({"id": "broken", "task": "broken kind=odd fail=9", "model": server.base_url})
            + "\n"
        )
        fh.write(json.dumps({"prompt": "no id kind=even", "model": server.base_url}) + "\n")
    assert batch(tmp_path, tasks, retries=1) == (14, 1, 0)
    results = tmp_path / "tasks.results.jsonl"
    got = outcome(results)
    assert got["t001"] == ("success", "ODD | p1") and got["t002"] == ("success", "EVEN | p2")
    assert got["flaky"] == ("success", "ODD | None")
    assert got["broken"][0] == "failure"
    broken = next(r for r in rows(results) if r["id"] == "broken")
    assert broken["attempts"] == 2 and "exited with code 1" in broken["error"]
    assert "scripted failure" in broken["error"]
    assert len(got) == 15 and sum(i.startswith("t-") for i in got) == 1  # a content id
    before = run_counts(tmp_path)
    assert batch(tmp_path, tasks) == (0, 0, 15)  # every task has a line: nothing runs
    assert run_counts(tmp_path) == before
    assert len(rows(results)) == 15


def test_torn_last_line_is_cut_and_its_task_rerun(tmp_path: Path, server: ScriptedServer) -> None:
    tasks = tmp_path / "tasks.jsonl"
    write_tasks(tasks, 3, server.base_url)
    results = tmp_path / "tasks.results.jsonl"
    whole = {"id": "t000", "status": "success", "output": "from before"}
    results.write_text(json.dumps(whole) + "\n" + '{"id": "t001", "status": "succ')
    assert batch(tmp_path, tasks) == (2, 0, 1)
    assert outcome(results) == {"t000": ("success", "from before"), "t001": ("success", "ODD | p1"),
                                "t002": ("success", "EVEN | p2")}  # fmt: skip
    assert set(run_counts(tmp_path)) == {"task 1 kind=odd", "task 2 kind=even"}


def test_one_batch_at_a_time_per_result_file(tmp_path: Path, server: ScriptedServer) -> None:
    tasks = tmp_path / "tasks.jsonl"
    write_tasks(tasks, 1, server.base_url)
    with (
        ResultLog(tmp_path / "tasks.results.jsonl"),
        pytest.raises(UsageError, match="another batch"),
    ):
        batch(tmp_path, tasks)


def test_progress_line_counts_and_eta() -> None:
    sink = open(os.devnull, "w")  # noqa: SIM115
    p = Progress("tty", sink, sink)
    p.begin(10, 2)
    for key in ("a", "b", "c"):
        p.started(key)
    p.finished({"id": "a", "status": "success", "attempts": 1, "duration": 1.0})
    p.finished({"id": "b", "status": "failure", "attempts": 1, "duration": 1.0})
    line = p.line(120)
    assert "4/10 done, 1 failed, 1 running, ETA " in line and line.startswith("[")
    assert "--" not in line  # two tasks ended: the pace is known
    assert len(p.line(30)) < 30
    assert format_eta(3725) == "1:02:05" and format_eta(65) == "1:05" and format_eta(None) == "--"


def test_driver_killed_and_restarted_finishes_without_redoing(
    tmp_path: Path, server: ScriptedServer
) -> None:
    kill_and_restart(tmp_path, server, "local")


def test_ctrl_c_kills_every_child(tmp_path: Path, server: ScriptedServer) -> None:
    interrupt(tmp_path, server, "local")


def test_cli_batch_runs_real_team_runs(tmp_path: Path, isolated_home: Path) -> None:
    """Two real `personae run` children on the scripted replay server, through `personae batch`."""
    root = dev_project(tmp_path, {"one": read_config_scenario("ANSWER port 8081", description="b")})
    spec = f"scripted:{tmp_path / 'one.yaml'}"
    tasks = tmp_path / "tasks.jsonl"
    lines = [
        {
            "id": f"r{i}",
            "task": f"What port? {i}",
            "persona": "dev",
            "model": spec,
            "session": f"s{i}",
        }
        for i in range(2)
    ]
    tasks.write_text("".join(json.dumps(line) + "\n" for line in lines))
    env = {**os.environ, "COLUMNS": "80"}
    env.pop("PWD", None)
    done = run_personae("batch", str(tasks), "--concurrency", "2", cwd=root, env=env, timeout=180)
    assert done.returncode == 0, done.stderr
    assert "[r0] success after 1 attempt(s)" in done.stderr and "2 ok, 0 failed" in done.stderr
    got = rows(tmp_path / "tasks.results.jsonl")
    assert {r["id"]: r["output"] for r in got} == {
        "r0": "ANSWER port 8081",
        "r1": "ANSWER port 8081",
    }
    listed = json.loads(run_personae("runs", "list", "--json", cwd=root, env=env).stdout)
    # The batch is a run of its own; the tasks' runs link to it (one usage tree).
    (batch,) = [r for r in listed if r["task"] == "batch tasks.jsonl"]
    assert f"batch run {batch['id']}" in done.stderr and batch["status"] == "done"
    tasks_runs = [r for r in listed if r["id"] != batch["id"]]
    assert {r["id"] for r in tasks_runs} == {r["run_id"] for r in got}
    assert {r["session_id"] for r in tasks_runs} == {"s0", "s1"}
    assert {r["parent_run_id"] for r in tasks_runs} == {batch["id"]}


def test_personae_imports_no_ray() -> None:
    code = (
        "import sys, personae, personae.cli.app, personae.batch.engine, "
        "personae.workflow.executors, personae.workflow.ray_executor; "
        "print('ray' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
