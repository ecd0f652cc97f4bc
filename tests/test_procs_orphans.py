"""Processes a run starts outside ``run_shell``'s process groups die with it too.

Real ``personae run`` processes, a real stdio MCP server, real kills, /proc
checks: an MCP server (and the helper it starts) and the orphans a command
leaves behind on purpose (``setsid``, a double fork; sandbox off) are gone
after a normal exit, SIGTERM, SIGINT and ``kill -9`` of the run.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from _helpers import VALIDATOR_OK as OK
from _lifetime import marked, new_token, reaped, settle, start_personae, wait_until

PROBE = Path(__file__).with_name("_mcp_probe_server.py")
HOW = ["exit", signal.SIGKILL, signal.SIGTERM, signal.SIGINT]


def _ids(how: Any) -> str:
    return how if isinstance(how, str) else how.name


def _scenario(calls: list[dict[str, Any]]) -> dict[str, Any]:
    steps: list[dict[str, Any]] = [
        {"when": {"role": "manager"}, "output": {"subtasks": [{"description": "Do it"}]}}
    ]
    steps += [{"when": {"role": "worker"}, "tool_calls": [call]} for call in calls]
    steps += [
        {"when": {"role": "worker"}, "text": "done"},
        {"when": {"role": "validator"}, "output": OK},
        {"when": {"role": "manager"}, "text": "DONE"},
    ]
    return {"description": "scripted: the worker calls its tools in turn", "steps": steps}


def _project(tmp_path: Path, tools: str, calls: list[dict[str, Any]]) -> Path:
    root = tmp_path / "proj"
    (root / ".personae" / "personas").mkdir(parents=True)
    persona = f"---\nname: sh\ndescription: Runs tools.\ntools: [{tools}]\n---\nYou are sh.\n"
    (root / ".personae" / "personas" / "sh.md").write_text(persona)
    (root / ".personae" / "config.yaml").write_text(yaml.safe_dump({"sandbox": {"mode": "off"}}))
    (root / "scenario.yaml").write_text(yaml.safe_dump(_scenario(calls)))
    return root


def _shell(command: str) -> dict[str, Any]:
    return {"name": "run_shell", "args": {"command": command}}


HOLD = "echo started > started.flag; sleep 60"


def _drive(root: Path, how: Any, token: str, *, ready: int) -> None:
    """Let ``personae run`` end (``exit``), or send ``how`` once ``ready`` marked processes run."""
    run = start_personae(root, "run", "go", "--persona", "sh", "--model", "scripted:scenario.yaml")
    with reaped(run):
        if how == "exit":
            _out, err = run.communicate(timeout=120)
            assert run.returncode == 0, err
        else:
            wait_until((root / "started.flag").exists, what="the holding command")
            wait_until(lambda: len(marked(token)) >= ready, limit=10, what="marked processes")
            run.send_signal(how)
            run.communicate(timeout=60)


@pytest.mark.parametrize("how", HOW, ids=_ids)
def test_mcp_server_dies_with_the_run(tmp_path: Path, how: Any) -> None:
    token = new_token()
    calls = [{"name": "mcp__probe__ping", "args": {}}]
    if how != "exit":
        calls.append(_shell(HOLD))
    root = _project(tmp_path, "run_shell, mcp__probe__ping", calls)
    entry = {"command": sys.executable, "args": [str(PROBE), token]}
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {"probe": entry}}))
    _drive(root, how, token, ready=2)  # the server and its helper
    if how == "exit":
        assert (root / "probe.started").exists()  # the server did run
    assert settle(token) == [], f"MCP server survivors after {_ids(how)}"


ORPHANS = (
    "setsid sh -c 'sleep 300.{t}' & "  # leaves the command's group
    "sh -c \"setsid sh -c 'sleep 301.{t} &' &\"; "  # a daemon's double fork
    "sleep 0.3"
)


@pytest.mark.parametrize("how", HOW, ids=_ids)
def test_orphans_of_a_command_die_with_the_run(tmp_path: Path, how: Any) -> None:
    token = new_token()
    calls = [_shell(ORPHANS.format(t=token))]
    if how != "exit":
        calls.append(_shell(HOLD))
    root = _project(tmp_path, "run_shell", calls)
    _drive(root, how, token, ready=2)  # both orphans outlived their command
    assert settle(token) == [], f"orphan survivors after {_ids(how)}"


def test_kill_all_kills_orphans_of_a_subreaper(tmp_path: Path) -> None:
    """In-process: ``capture_orphans`` + ``kill_all`` (what ``atexit`` runs)."""
    token = new_token()
    script = (
        "import subprocess, sys\n"
        "from personae.procs import RUN_PROCESSES\n"
        "assert RUN_PROCESSES.capture_orphans()\n"
        f"subprocess.run(['sh', '-c', \"setsid sh -c 'sleep 302.{token}' &\"], check=True)\n"
        "print('ok', flush=True)\n"
        "sys.stdin.readline()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdin is not None
    assert proc.stdout.readline().strip() == "ok"
    wait_until(lambda: marked(token), limit=10, what="the orphan")
    parents = {
        int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        for pid in marked(token)
    }
    assert proc.pid in parents  # the orphan was reparented to the subreaper, not to init
    proc.communicate("\n", timeout=30)
    assert settle(token) == []
