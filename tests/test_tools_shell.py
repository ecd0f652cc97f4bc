"""run_shell with real subprocesses: timeout kills the group, caps, confined cwd, clean env."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from _helpers import builtin_subset, call_tool
from personae.errors import ConfigError, ToolError
from personae.tools import ToolLimits, ToolRegistry, ToolSubset, Workspace


def _subset(root: Path, **limits: Any) -> ToolSubset:
    return builtin_subset(root, ["run_shell"], **limits)


def sh(subset: ToolSubset, command: str | list[str], **args: Any) -> str:
    return call_tool(subset, "run_shell", command=command, **args)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def _wait_dead(pid: int, within: float = 3.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_string_and_argv_commands(tmp_path: Path) -> None:
    tools = _subset(tmp_path)
    out = sh(tools, "echo hello; echo oops >&2")
    assert out.startswith("hello\noops\n")
    assert out.splitlines()[-1].startswith("[exit code 0,")
    assert sh(tools, ["printf", "%s|", "a b", "$HOME"]).startswith("a b|$HOME|")


def test_failures_are_tool_errors_with_output(tmp_path: Path) -> None:
    tools = _subset(tmp_path)
    with pytest.raises(ToolError, match=r"exit code 3\nbefore") as info:
        sh(tools, "echo before; exit 3")
    assert info.value.data["exit_code"] == 3
    with pytest.raises(ToolError, match="command not found"):
        sh(tools, ["definitely-not-a-command-xyz"])
    with pytest.raises(ToolError, match="command is empty"):
        sh(tools, "   ")
    assert [c.ok for c in tools.calls] == [False, False, False]


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    # Unsandboxed: pids written by the command are host pids (test_tools_sandbox covers bwrap).
    tools = _subset(tmp_path, shell_timeout=5.0, shell_sandbox="off")
    started = time.monotonic()
    with pytest.raises(ToolError, match=r"timed out after 0\.5s") as info:
        sh(tools, "sleep 30 & echo $! > child.pid; echo started; sleep 30", timeout=0.5)
    assert time.monotonic() - started < 4.0
    assert "started" in str(info.value)
    child = int((tmp_path / "child.pid").read_text())
    assert _wait_dead(child), f"background child {child} survived the timeout"


@pytest.mark.parametrize("descriptor", ["process descriptor", "none (polling)"])
def test_exit_output_and_timeout_with_and_without_a_process_descriptor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, descriptor: str
) -> None:
    """The exit is waited for on a process descriptor where one opens; without one
    (not Linux) by polling: both give the output, the exit code and the timeout."""
    if descriptor.startswith("none"):
        monkeypatch.delattr(os, "pidfd_open")
    tools = _subset(tmp_path, shell_timeout=5.0, shell_sandbox="off")
    assert sh(tools, "sleep 0.05; echo out").startswith("out\n")
    with pytest.raises(ToolError) as info:
        sh(tools, "echo partial; exit 4")
    assert info.value.data["exit_code"] == 4 and "partial" in str(info.value)
    started = time.monotonic()
    with pytest.raises(ToolError, match=r"timed out after 0\.4s"):
        sh(tools, "echo begun; sleep 30", timeout=0.4)
    assert time.monotonic() - started < 4.0


def test_model_cannot_raise_the_timeout(tmp_path: Path) -> None:
    tools = _subset(tmp_path, shell_timeout=0.3)
    with pytest.raises(ToolError, match=r"timed out after 0\.3s"):
        sh(tools, "sleep 10", timeout=100)


def test_background_processes_do_not_outlive_the_call(tmp_path: Path) -> None:
    tools = _subset(tmp_path, shell_grace=0.2, shell_sandbox="off")
    out = sh(tools, "sleep 30 >/dev/null 2>&1 & echo $! > bg.pid; echo done")
    assert out.startswith("done\n")
    assert _wait_dead(int((tmp_path / "bg.pid").read_text()))
    # A background job still holding the output pipe is killed too, and the call returns.
    started = time.monotonic()
    out = sh(tools, "sleep 30 & echo $! > bg2.pid; echo done2")
    assert out.startswith("done2\n")
    assert time.monotonic() - started < 3.0
    assert _wait_dead(int((tmp_path / "bg2.pid").read_text()))


def test_output_cap_has_a_visible_notice(tmp_path: Path) -> None:
    tools = _subset(tmp_path, shell_max_output=1000)
    out = sh(tools, "head -c 100000 /dev/zero | tr '\\0' 'a'")
    assert out.startswith("a" * 1000 + "\n[output truncated: kept the first 1000 of 100000 bytes]")
    assert "a" * 1001 not in out


def test_cwd_is_confined(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (root / "out").symlink_to(tmp_path)
    tools = _subset(root)
    assert sh(tools, "pwd", cwd="sub").splitlines()[0] == str((root / "sub").resolve())
    assert sh(tools, "pwd").splitlines()[0] == str(root.resolve())
    for bad in ("..", "out", "/tmp"):
        with pytest.raises(ToolError, match="outside the workspace"):
            sh(tools, "pwd", cwd=bad)


def test_environment_is_scrubbed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LD_PRELOAD", "/nonexistent/evil.so")
    monkeypatch.setenv("PYTHONPATH", "/nonexistent/inject")
    monkeypatch.setenv("MY_SECRET_TOKEN", "s3cr3t")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("HARMLESS_EXTRA", "yes")
    monkeypatch.setenv("PATH", os.environ["PATH"] + os.pathsep + "relative/bin")
    tools = _subset(tmp_path, shell_env_allow=("HARMLESS_EXTRA",))
    env = dict(line.split("=", 1) for line in sh(tools, ["env"]).splitlines() if "=" in line)
    for name in ("LD_PRELOAD", "PYTHONPATH", "MY_SECRET_TOKEN", "OPENAI_API_KEY"):
        assert name not in env
    assert "s3cr3t" not in "".join(env.values())
    assert env["HARMLESS_EXTRA"] == "yes"
    assert env["HOME"] == str(tmp_path.resolve())
    assert "relative/bin" not in env["PATH"].split(os.pathsep)


@pytest.mark.parametrize(
    "name", ["LD_PRELOAD", "PYTHONPATH", "BASH_ENV", "GITHUB_TOKEN", "bad-name"]
)
def test_dangerous_env_allow_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ConfigError, match=name):
        ToolRegistry.builtin(Workspace(tmp_path), limits=ToolLimits(shell_env_allow=(name,)))


@pytest.mark.parametrize(
    "name",
    [
        "ENV",
        "PROMPT_COMMAND",
        "LD_AUDIT",
        "GLIBC_TUNABLES",
        "LESSOPEN",
        "OPENSSL_CONF",
        "EDITOR",
        "PS1",
        "MAVEN_OPTS",
        "npm_config_script_shell",
        "STRIPE_KEY",
        "DEPLOY_KEY_ID",
        "DB_PASS",
        "SSH_AUTH_SOCK",
        "SESSION_COOKIE",
    ],
)
def test_more_code_injecting_and_secret_env_names_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ConfigError, match=name):
        ToolRegistry.builtin(Workspace(tmp_path), limits=ToolLimits(shell_env_allow=(name,)))


def test_shell_startup_hooks_from_the_environment_do_not_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hook = tmp_path / "hook.sh"
    hook.write_text("touch injected\n")
    for name in ("BASH_ENV", "ENV"):
        monkeypatch.setenv(name, str(hook))
    monkeypatch.setenv("PROMPT_COMMAND", "touch injected")
    monkeypatch.setenv("DEPLOY_KEY", "k3y")
    tools = _subset(tmp_path, shell_env_allow=("LANGUAGE",))
    out = sh(tools, ["bash", "-c", "env; echo done"])
    assert out.splitlines()[-2] == "done"
    for name in ("BASH_ENV", "ENV", "PROMPT_COMMAND", "DEPLOY_KEY"):
        assert f"{name}=" not in out
    assert not (tmp_path / "injected").exists()
