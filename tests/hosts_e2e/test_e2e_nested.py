"""A host started from a bootstrapped session's shell tool stays locked until it bootstraps,
in real Codex and Copilot CLI (Claude Code's case is in ``test_e2e_sessions.py``).

The outer session bootstraps, then its shell tool runs a second host of the same kind in
the same project, with the same home and configuration, while the outer host waits for it:
every ancestor of the inner host's hook is the bootstrapped outer host. The inner session's
shell call is blocked (its own session id) and its side effect never appears. One scripted
loopback server answers both hosts; the inner host's steps match on the inner prompt.
"""

from __future__ import annotations

import os
import shlex
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from _harness import HostRun, Sandbox, host_binary, make_sandbox, scenario
from _hosts import CODEX, COPILOT, MARKER, Host

from personae.models import ScriptedServer

pytestmark = pytest.mark.hosts

INNER = "INNER task: append ok to nested.txt"
BLOCKED = "personae gate: blocked"
DONE_MARK = "outer-ran"


def _write_inner(host: Host, sandbox: Sandbox, server: ScriptedServer, args: list[str]) -> str:
    """Write the script the outer session's shell call runs: the inner host with the same
    provider settings (passed explicitly: hosts drop variables named like keys from their
    shell tool), its output in inner.log, then a mark that the outer shell call finished.
    Returns the shell line that runs it (the server's URL is known only once it listens)."""
    settings = host.configure(sandbox, server, False)
    if "PYTHONPATH" in os.environ:  # hooks and mind server of the checkout under test
        settings["PYTHONPATH"] = os.environ["PYTHONPATH"]
    inner = ["env", *(f"{k}={v}" for k, v in settings.items()), str(host_binary(host.binary))]
    script = sandbox.home / "inner.sh"
    lines = [
        f"{shlex.join([*inner, *args])} < /dev/null > inner.log 2>&1",
        f"echo {DONE_MARK} > outer.txt",
    ]
    script.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return f"sh {shlex.quote(str(script))}"


def _inner_was_blocked(run: HostRun, sandbox: Sandbox) -> None:
    """The inner session's shell call came back blocked and did not run; the outer ran."""
    why = run.explain() + "\n--- inner.log (tail)\n"
    log = sandbox.root / "inner.log"
    why += log.read_text(errors="replace")[-3000:] if log.exists() else "(none)"
    assert run.server.remaining_steps == 0, why
    assert MARKER in run.result_after(run_bootstrap(run)), why
    assert (sandbox.root / "outer.txt").read_text() == f"{DONE_MARK}\n", why
    assert not (sandbox.root / "nested.txt").exists(), why
    inner_results = [
        str(m.get("content"))
        for body in run.server.requests
        if any(INNER in str(m.get("content")) for m in _user_messages(body))
        for m in body.get("messages", [])[-1:]
        if m.get("role") == "tool"
    ]
    assert any(BLOCKED in r and "for this session" in r for r in inner_results), (
        inner_results,
        why,
    )
    with sqlite3.connect(sandbox.root / ".personae" / "state.db") as conn:
        rows = conn.execute("SELECT session_id FROM mind_bootstraps").fetchall()
    assert len(rows) == 1, rows  # the outer session's bootstrap only


def _user_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body.get("messages", []) if m.get("role") == "user"]


def run_bootstrap(run: HostRun) -> str:
    """The bootstrap tool name this run called (the hosts name MCP tools differently)."""
    for answer in run.server.served:
        for call in answer.tool_calls if answer else []:
            if call.name.endswith("bootstrap_session"):
                return call.name
    raise AssertionError(f"no bootstrap call served\n{run.explain()}")


def test_a_copilot_started_from_a_bootstrapped_copilots_shell_stays_locked(
    tmp_path: Path,
) -> None:
    sandbox = make_sandbox(tmp_path)
    boot = COPILOT.bootstrap
    line = f"sh {shlex.quote(str(sandbox.home / 'inner.sh'))}; cat outer.txt"
    outer = {
        "name": "bash",
        "args": {"command": line, "description": "nested host", "initial_wait": 300},
    }
    nested = {"name": "bash", "args": {"command": "echo ok >> nested.txt", "description": "x"}}
    steps = [
        {"when": {"tool": boot, "last_contains": "Append ok"}, "tool_calls": [{"name": boot}]},
        {"when": {"contains": "mind_contract_available"}, "tool_calls": [outer]},
        {"when": {"last_contains": INNER}, "tool_calls": [nested]},
        {"when": {"last_contains": BLOCKED}, "text": "inner done"},
        {"when": {"last_contains": DONE_MARK}, "text": "done"},
    ]  # fmt: skip
    args = ["-p", INNER, "--allow-all", "--no-auto-update"]
    with ScriptedServer(scenario(steps)) as server:
        _write_inner(COPILOT, sandbox, server, args)
        run = COPILOT.run(sandbox, server)
    _inner_was_blocked(run, sandbox)


def test_a_codex_started_from_a_bootstrapped_codexs_shell_stays_locked(tmp_path: Path) -> None:
    sandbox = make_sandbox(tmp_path)
    boot = CODEX.bootstrap
    args = ["exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-hook-trust"]
    args += ["--dangerously-bypass-approvals-and-sandbox", INNER]
    # Codex returns from exec_command after at most 30 s and keeps the command running; the
    # outer session then waits in further exec_command calls until the inner host is done.
    wait = (
        "for i in $(seq 25); do [ -f outer.txt ] && break; sleep 1; done; "
        "cat outer.txt 2>/dev/null || echo still-waiting"
    )
    wait_call = {"name": "exec_command", "args": {"cmd": wait, "yield_time_ms": 30000}}
    rules = [
        {"when": {"last_contains": "still-waiting"}, "tool_calls": [wait_call]},
        {"when": {"last_contains": "Process running"}, "tool_calls": [wait_call]},
        # Codex starts MCP servers while the first request is in flight: until the bootstrap
        # tool is offered, the outer session waits by listing MCP resources (not gated).
        {"when": {"last_contains": "Append ok"}, "tool_calls": [{"name": "list_mcp_resources"}]},
        {"when": {"last_contains": "resources"}, "tool_calls": [{"name": "list_mcp_resources"}]},
    ]

    line = f"sh {shlex.quote(str(sandbox.home / 'inner.sh'))}; cat outer.txt"
    outer = {"name": "exec_command", "args": {"cmd": line, "yield_time_ms": 30000}}
    nested = {"name": "exec_command", "args": {"cmd": "echo ok >> nested.txt"}}
    steps = [
        {"when": {"tool": boot}, "tool_calls": [{"name": boot, "args": {}}]},
        {"when": {"contains": "mind_contract_available"}, "tool_calls": [outer]},
        {"when": {"last_contains": INNER}, "tool_calls": [nested]},
        {"when": {"last_contains": BLOCKED}, "text": "inner done"},
        {"when": {"last_contains": DONE_MARK}, "text": "done"},
    ]
    with ScriptedServer(scenario(steps, rules)) as server:
        _write_inner(CODEX, sandbox, server, args)
        run = CODEX.run(sandbox, server)
    _inner_was_blocked(run, sandbox)
