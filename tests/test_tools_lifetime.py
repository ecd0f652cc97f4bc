"""Nothing a run starts outlives it: real `personae` processes, real kills, /proc checks.

A persona whose scripted worker calls ``run_shell`` starts marked ``sleep``
processes (a foreground one and a background one in the command's group); the
run is then killed (SIGKILL, SIGTERM, SIGINT), or its handover child times out
and is retried, and the test counts the marked processes still alive in /proc.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from _helpers import VALIDATOR_OK as OK
from _helpers import run_personae
from _lifetime import clean_env, marked, new_token, reaped, settle, start_personae, wait_until

PERSONA = """---
name: sh
description: Runs one shell command.
tools: [run_shell]
---
You are sh.
"""


def _scenario(command: str) -> dict[str, Any]:
    return {
        "description": "scripted: the worker runs one long shell command",
        "steps": [
            {"when": {"role": "manager"}, "output": {"subtasks": [{"description": "Run it"}]}},
            {"when": {"role": "worker"},
             "tool_calls": [{"name": "run_shell", "args": {"command": command}}]},
            {"when": {"role": "worker"}, "text": "ran it"},
            {"when": {"role": "validator"}, "output": OK},
            {"when": {"role": "manager"}, "text": "DONE"},
        ],
    }  # fmt: skip


def _project(tmp_path: Path, command: str) -> Path:
    root = tmp_path / "proj"
    (root / ".personae" / "personas").mkdir(parents=True)
    (root / ".personae" / "personas" / "sh.md").write_text(PERSONA)
    (root / "scenario.yaml").write_text(yaml.safe_dump(_scenario(command)))
    return root


def _create_handover(root: Path) -> subprocess.CompletedProcess[str]:
    """``personae handover create --to sh --task go`` (its stdout is the file's path)."""
    create = ("handover", "create", "--to", "sh", "--task", "go")
    created = run_personae(*create, cwd=root, env=clean_env(), timeout=120)
    assert created.returncode == 0, created.stderr
    return created


KILLS = [signal.SIGKILL, signal.SIGTERM, signal.SIGINT]


def _command(token: str) -> str:
    # A background process and a foreground one, both in the command's group.
    return f"sleep 900.{token} & sleep 901.{token} & echo started > started.flag; wait"


@pytest.mark.parametrize("sig", KILLS, ids=lambda s: s.name)
def test_killing_the_run_kills_its_commands(tmp_path: Path, sig: signal.Signals) -> None:
    token = new_token()
    root = _project(tmp_path, _command(token))
    run = start_personae(root, "run", "go", "--persona", "sh", "--model", "scripted:scenario.yaml")
    with reaped(run):
        wait_until((root / "started.flag").exists, what="the command's start")
        wait_until(lambda: len(marked(token)) >= 2, limit=10, what="the marked processes")
        run.send_signal(sig)
        run.communicate(timeout=60)
    assert settle(token) == [], f"survivors after {sig.name}"


def test_handover_timeout_kills_the_attempt_before_its_retry(tmp_path: Path) -> None:
    """`handover run --timeout`: attempt 1's tree is dead when attempt 2's command starts."""
    token = new_token()
    # Each attempt's processes carry its number: sleep 90.<token> (attempt 1), 91.<token> ...
    command = (
        "n=$(cat n 2>/dev/null || echo 0); echo $((n+1)) > n; "
        f"sleep 9$n.{token} & sleep 8$n.{token} & wait"
    )
    root = _project(tmp_path, command)
    created = _create_handover(root)
    path = created.stdout.strip()
    run = start_personae(root, "handover", "run", path, "--timeout", "12", "--retries", "1",
                 "--backoff", "0", "--model", "scripted:scenario.yaml")  # fmt: skip
    second: list[int] = []

    def second_or_end() -> bool:
        second.extend(marked(f"1.{token}"))
        return bool(second) or run.poll() is not None

    with reaped(run):
        wait_until(lambda: len(marked(f"0.{token}")) >= 2, what="attempt 1's command")
        # attempt 2's command, or the run's end (then the failure below says how it ended)
        wait_until(second_or_end, limit=120, what="attempt 2's command or the run's end")
        overlap = marked(f"0.{token}")
        _out, err = run.communicate(timeout=60)
    left = settle(token)
    ended = json.loads(Path(path).read_text()).get("results")
    assert second, f"attempt 2's command never ran; exit {run.returncode}, {ended}: {err[-2000:]}"
    assert overlap == [], "attempt 1 still alive while attempt 2 ran"
    assert run.returncode == 4, err  # the last attempt timed out too
    assert left == [], "survivors after the handover's timeouts"
    assert json.loads(Path(path).read_text())["results"]["status"] == "failure"


@pytest.mark.parametrize("sig", KILLS, ids=lambda s: s.name)
def test_killing_handover_run_kills_child_and_its_commands(
    tmp_path: Path, sig: signal.Signals
) -> None:
    token = new_token()
    root = _project(tmp_path, _command(token))
    created = _create_handover(root)
    run = start_personae(root, "handover", "run", created.stdout.strip(), "--timeout", "120",
                 "--model", "scripted:scenario.yaml")  # fmt: skip
    with reaped(run):
        wait_until(lambda: len(marked(token)) >= 2, what="the child's command")
        run.send_signal(sig)
        run.communicate(timeout=60)
    # The child `personae run --context-from PATH` carries the handover path in its argv.
    children, commands = settle(created.stdout.strip()), settle(token)
    assert (children, commands) == ([], []), f"survivors after {sig.name} of `handover run`"


def test_resumed_chain_step_side_effect_happens_once(tmp_path: Path) -> None:
    """kill -9 of a chain and its step's child: the step's command dies too; redone once."""
    token = new_token()
    command = f"echo started > started.flag; sleep 4.{token}; echo once >> side.txt"
    root = _project(tmp_path, command)
    step = {"id": "a", "persona": "sh", "task": "go", "model": "scripted:scenario.yaml"}
    (root / "workflow.yaml").write_text(
        yaml.safe_dump({"name": "side", "defaults": {"retries": 0}, "steps": [step]})
    )
    checkpoint = root / ".personae" / "chains" / "side" / "checkpoint.json"
    chain = start_personae(root, "chain", "run", "workflow.yaml")
    with reaped(chain):
        wait_until((root / "started.flag").exists, what="the step's command")
        child = json.loads(checkpoint.read_text())["steps"]["a"]["pid"]
        chain.send_signal(signal.SIGKILL)
        chain.communicate(timeout=60)
        os.killpg(child, signal.SIGKILL)
        killed_at = time.monotonic()
        (root / "started.flag").unlink()
        resumed = subprocess.run(
            [sys.executable, "-m", "personae", "chain", "run", "workflow.yaml", "--resume"],
            cwd=root, env=clean_env(), capture_output=True, text=True, timeout=180, check=False,
        )  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    # Give a surviving command of the killed attempt the time to do its write.
    time.sleep(max(0.0, 5.0 - (time.monotonic() - killed_at)))
    assert settle(token) == []
    assert (root / "side.txt").read_text().splitlines() == ["once"]


@pytest.mark.parametrize("fork_free", [False, True])
def test_run_tied_timeout_kills_the_whole_group(tmp_path: Path, fork_free: bool) -> None:
    """`!command` injection (tied) and `git log` (fork-free) use run_tied: a timeout
    kills background jobs too."""
    from personae.procs import RUN_PROCESSES, run_tied

    token = new_token()
    with pytest.raises(subprocess.TimeoutExpired):
        run_tied(
            ["sh", "-c", f"sleep 900.{token} & sleep 901.{token}"],
            cwd=tmp_path, timeout=1, fork_free=fork_free,
        )  # fmt: skip
    assert settle(token, limit=2) == []
    assert RUN_PROCESSES.groups == frozenset()
    done = run_tied(
        ["sh", "-c", "echo out; echo err >&2; exit 3"], cwd=tmp_path, timeout=30,
        fork_free=fork_free,
    )  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")


@pytest.mark.parametrize("fork_free", [False, True])
def test_run_tied_gives_the_output_as_subprocess_text_mode_does(
    tmp_path: Path, fork_free: bool
) -> None:
    """Output read to its end (far over a pipe's buffer, on both streams at once), decoded
    as ``subprocess`` decodes text: undecodable bytes replaced, universal newlines."""
    from personae.procs import run_tied

    script = (
        "import sys; o, e = sys.stdout.buffer, sys.stderr.buffer\n"
        "for i in range(3000):\n"
        "    o.write(b'line %d \\xff\\r\\n' % i + b'x' * 100 + b'\\r')\n"
        "    e.write(b'e' * 99 + b'\\n')\n"
    )
    argv = [sys.executable, "-c", script]
    done = run_tied(argv, cwd=tmp_path, timeout=60, fork_free=fork_free)
    ref = subprocess.run(
        argv, cwd=tmp_path, capture_output=True, text=True, errors="replace", check=False
    )
    assert len(done.stdout) > 300_000 and len(done.stderr) == 300_000
    assert (done.returncode, done.stdout, done.stderr) == (0, ref.stdout, ref.stderr)
    assert "\r" not in done.stdout and "\ufffd" in done.stdout


def test_run_tied_times_out_when_a_background_job_keeps_the_output_open(tmp_path: Path) -> None:
    """The command exits at once but a job it left holds its output open: the timeout
    still ends the wait and kills that job with the group."""
    from personae.procs import run_tied

    token = new_token()
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_tied(["sh", "-c", f"sleep 902.{token} & echo bye"], cwd=tmp_path, timeout=1,
                 fork_free=True)  # fmt: skip
    assert time.monotonic() - started < 30
    assert settle(token, limit=2) == []


def test_run_tied_takes_a_timeout_past_what_one_poll_can_wait(tmp_path: Path) -> None:
    """A project may set a `!command` timeout of any size (``timeout: 1e12``): the wait
    polls in bounded steps instead of overflowing ``poll``'s milliseconds."""
    from personae.procs import run_tied

    done = run_tied(["sh", "-c", "sleep 0.1; echo late"], cwd=tmp_path, timeout=1e12)
    assert (done.returncode, done.stdout) == (0, "late\n")


@pytest.mark.parametrize("fork_free", [False, True])
def test_run_tied_starts_the_command_in_its_own_session(tmp_path: Path, fork_free: bool) -> None:
    """Both kinds lead a new session (so a group of their own, killed as one, and no
    terminal whose Ctrl-C or prompts reach them)."""
    from personae.procs import run_tied

    probe = "import os; print(os.getpid(), os.getpgid(0), os.getsid(0))"
    done = run_tied([sys.executable, "-c", probe], cwd=tmp_path, timeout=30, fork_free=fork_free)
    pid, pgid, sid = map(int, done.stdout.split())
    assert pid == pgid == sid != os.getsid(0)


TIED = """
import subprocess, sys
from pathlib import Path
from personae.procs import RUN_PROCESSES, run_tied
token, how = sys.argv[1], sys.argv[2]
bg = subprocess.Popen(["sleep", f"900.{token}"], start_new_session=True)
RUN_PROCESSES.add(bg.pid)
if how == "exit":
    sys.exit(0)
print("ready", flush=True)
run_tied(["sh", "-c", f"sleep 901.{token} & sleep 902.{token}"], cwd=Path.cwd(), timeout=600)
"""


@pytest.mark.parametrize("how", ["exit", "kill -9"])
def test_registered_groups_die_at_exit_and_at_kill_9(tmp_path: Path, how: str) -> None:
    token = new_token()
    proc = subprocess.Popen(
        [sys.executable, "-c", TIED, token, how], cwd=tmp_path, stdout=subprocess.PIPE, text=True
    )
    try:
        if how == "kill -9":
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
            wait_until(lambda: len(marked(token)) >= 3, limit=30, what="the tied commands")
            proc.kill()
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert settle(token) == []
