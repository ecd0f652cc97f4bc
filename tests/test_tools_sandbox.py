"""The run_shell sandbox (bubblewrap) with real commands: writes, hidden paths, network.

CI installs bubblewrap (scripts/setup.d/30-bubblewrap.sh); without a working
``bwrap`` these tests fail and say so.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from _helpers import run_async
from _lifetime import marked, settle
from personae.errors import ToolError
from personae.tools import ToolLimits, ToolRegistry, ToolSubset, Workspace
from personae.tools.sandbox import bwrap_status


@pytest.fixture(autouse=True)
def _needs_bwrap() -> None:
    status = bwrap_status()
    assert status.available, f"{status.reason}: run scripts/setup.d/30-bubblewrap.sh"


def _tools(root: Path, **limits: Any) -> ToolSubset:
    return ToolRegistry.builtin(Workspace(root), limits=ToolLimits(**limits)).subset(["run_shell"])


def sh(tools: ToolSubset, command: str | list[str], **args: Any) -> str:
    return run_async(tools.dispatch("run_shell", {"command": command, **args}))


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's home: a secret file and an ``allowed`` folder."""
    home = tmp_path / "home"
    (home / "allowed").mkdir(parents=True)
    (home / "secret.txt").write_text("HOME-SECRET\n")
    (home / "allowed" / "ok.txt").write_text("ALLOWED-FILE\n")
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def outside() -> Iterator[Path]:
    """A folder outside the workspace, /tmp, /var/tmp and the home (on the read-only part)."""
    path = Path(tempfile.mkdtemp(prefix="personae-sbx-", dir="/var/cache"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_workspace_is_writable_and_the_rest_is_not(tmp_path: Path, outside: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    tools = _tools(ws)
    assert sh(tools, "echo in > inside.txt; cat inside.txt").startswith("in\n")
    assert (ws / "inside.txt").read_text() == "in\n"
    with pytest.raises(ToolError, match="Read-only file system"):
        sh(tools, f"echo x > {outside}/escaped.txt")
    assert not (outside / "escaped.txt").exists()
    # /tmp is private to the command: a write there never reaches the real /tmp.
    sh(tools, f"mkdir -p {tmp_path}/side && echo x > {tmp_path}/side/f.txt")
    assert not (tmp_path / "side").exists()
    # Unsandboxed (mode off) the same write lands: the test's check can fail.
    sh(_tools(ws, shell_sandbox="off"), f"echo x > {outside}/escaped.txt")
    assert (outside / "escaped.txt").read_text() == "x\n"


def test_home_is_hidden_except_allowed_paths(tmp_path: Path, home: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    read = f"cat {home}/secret.txt"
    with pytest.raises(ToolError, match="No such file or directory"):
        sh(_tools(ws), read)
    allowed = _tools(ws, shell_allow_paths=("~/allowed",))
    assert sh(allowed, f"cat {home}/allowed/ok.txt").startswith("ALLOWED-FILE")
    with pytest.raises(ToolError, match="No such file or directory"):
        sh(allowed, read)  # only the allowed folder shows
    with pytest.raises(ToolError, match="Read-only file system"):
        sh(allowed, f"echo x > {home}/allowed/ok.txt")  # and read-only
    assert sh(_tools(ws, shell_sandbox="off"), read).startswith("HOME-SECRET")


@pytest.fixture
def listener() -> Iterator[int]:
    """A loopback TCP listener answering every connection with a line; yields its port."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.sendall(b"HELLO-FROM-HOST\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


def test_network_is_off_unless_allowed(tmp_path: Path, listener: int) -> None:
    connect = ["bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{listener}; head -n1 <&3"]
    with pytest.raises(ToolError, match="Connection refused"):
        sh(_tools(tmp_path), connect)
    assert sh(_tools(tmp_path, shell_network=True), connect).startswith("HELLO-FROM-HOST")


def test_processes_that_leave_the_group_die_with_the_sandbox(tmp_path: Path) -> None:
    token = secrets.token_hex(4).translate(str.maketrans("abcdef", "123456"))
    out = sh(_tools(tmp_path, shell_grace=0.2), f"setsid sleep 900.{token} & echo started")
    assert out.startswith("started")
    assert settle(token) == []
    with pytest.raises(ToolError, match="timed out"):
        sh(_tools(tmp_path), f"setsid sleep 901.{token} & sleep 902.{token}", timeout=1)
    assert settle(token) == []
    assert marked(token) == []


FAKE_BWRAP = "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"
CHILD = """
import asyncio, sys
from pathlib import Path
from personae.tools import ToolLimits, ToolRegistry, Workspace
tools = ToolRegistry.builtin(Workspace(sys.argv[1]), limits=ToolLimits(shell_sandbox=sys.argv[2]))
sub = tools.subset(["run_shell"])
for word in ("one", "two"):
    try:
        print(asyncio.run(sub.dispatch("run_shell", {"command": ["/bin/echo", word]})).split()[0])
    except Exception as exc:
        print("ERROR", exc)
"""


@pytest.mark.parametrize("broken", ["missing", "no-namespaces"])
def test_without_a_working_bwrap_one_warning_or_a_refusal(tmp_path: Path, broken: str) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "true").symlink_to(shutil.which("true") or "/bin/true")
    if broken == "no-namespaces":  # a stand-in for bwrap in a container without namespaces
        (bin_dir / "bwrap").write_text(FAKE_BWRAP)
        (bin_dir / "bwrap").chmod(0o755)
    env = {**os.environ, "PATH": str(bin_dir)}
    runs = {}
    for mode in ("auto", "required"):
        runs[mode] = subprocess.run(
            [sys.executable, "-c", CHILD, str(tmp_path), mode],
            env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    auto, required = runs["auto"], runs["required"]
    assert auto.stdout.split() == ["one", "two"], auto.stderr
    warnings = auto.stderr.strip().splitlines()
    assert len(warnings) == 1 and warnings[0].startswith("personae: warning: run_shell is not")
    assert "apt install bubblewrap" in warnings[0]
    reason = "not installed" if broken == "missing" else "cannot create a sandbox"
    assert reason in warnings[0]
    assert required.stdout.count("ERROR") == 2 and "sandbox is required" in required.stdout
    assert required.stderr == ""


PERSONA = """---
name: sh
description: Runs one shell command.
tools: [run_shell]
sandbox:
  allow_paths: [~/allowed]
---
You are sh.
"""


def test_persona_and_config_grants_reach_the_sandbox(tmp_path: Path, home: Path) -> None:
    """`personae run`: the persona's allow_paths show one folder of the home, nothing else."""
    root = tmp_path / "proj"
    (root / ".personae" / "personas").mkdir(parents=True)
    (root / ".personae" / "personas" / "sh.md").write_text(PERSONA)
    (root / ".personae" / "config.yaml").write_text("sandbox: {mode: required}\n")
    command = f"cat {home}/allowed/ok.txt; cat {home}/secret.txt || echo SECRET-HIDDEN"
    scenario = {"steps": [
        {"when": {"role": "manager"}, "output": {"subtasks": [{"description": "Run it"}]}},
        {"when": {"role": "worker"},
         "tool_calls": [{"name": "run_shell", "args": {"command": command}}]},
        {"when": {"role": "worker"}, "text": "ran it"},
        {"when": {"role": "validator"}, "output": {
            "approved": True, "requirements_met": True, "issues": [],
            "completion_signal": {"confidence": "high", "progress_made": True}}},
        {"when": {"role": "manager"}, "text": "DONE"},
    ]}  # fmt: skip
    (root / "scenario.yaml").write_text(yaml.safe_dump(scenario))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PERSONAE_")}
    done = subprocess.run(
        [sys.executable, "-m", "personae", "run", "go", "--persona", "sh", "--json",
         "--model", "scripted:scenario.yaml"],
        cwd=root, env=env, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    calls = [json.loads(line) for line in done.stdout.splitlines()]
    shell = [e for e in calls if e["kind"] == "tool_call"]
    assert shell and shell[0]["data"]["ok"], shell
    preview = shell[0]["data"]["result"]
    assert "ALLOWED-FILE" in preview and "SECRET-HIDDEN" in preview
    assert "HOME-SECRET" not in preview
