"""Two sessions of one real ``copilot --acp`` process: the first session's bootstrap does not
unlock the second; each is locked until it bootstraps itself.

The test is the ACP client (newline-delimited JSON-RPC on the host's stdin and stdout): it
opens both sessions before either prompt, so both exist in the one Copilot process while the
first bootstraps. The model is the scripted loopback server; side-effect files show which
shell calls ran, the store shows which process and session each bootstrap was recorded for.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from _harness import (
    RUN_TIMEOUT,
    JsonLinesHost,
    Sandbox,
    clean_env,
    host_binary,
    make_sandbox,
    scenario,
)
from _hosts import COPILOT, MARKER

from personae.models import ScriptedServer

pytestmark = pytest.mark.hosts

BLOCKED = "personae gate: blocked: bash"


def _bash(name: str) -> dict[str, Any]:
    return {"name": "bash", "args": {"command": f"echo ok >> {name}", "description": "append"}}


class _Acp(JsonLinesHost):
    """A minimal ACP client: requests with ids, the agent's notifications kept in order."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self._next = 0
        super().__init__(proc)

    def received(self, message: dict[str, Any]) -> None:
        if message.get("method") == "session/request_permission" and "id" in message:
            # --allow-all answers these itself; should one come, allow it once.
            option = message["params"]["options"][0]["optionId"]
            outcome = {"outcome": "selected", "optionId": option}
            self.send({"jsonrpc": "2.0", "id": message["id"], "result": {"outcome": outcome}})

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._next += 1
        ident = self._next
        self.send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        deadline = time.monotonic() + RUN_TIMEOUT
        while time.monotonic() < deadline and self.proc.poll() is None:
            for message in list(self.seen):
                if message.get("id") == ident and "method" not in message:
                    assert "error" not in message, (method, message)
                    return dict(message["result"])
            time.sleep(0.05)
        raise AssertionError(f"no answer to {method} within {RUN_TIMEOUT} s; got {self.seen[-5:]}")

    def tool_updates(self, session: str) -> list[dict[str, Any]]:
        """Every tool call update of ``session`` (ACP ``session/update`` notifications)."""
        found = []
        for message in list(self.seen):
            params = message.get("params") or {}
            update = params.get("update") or {}
            if (
                message.get("method") == "session/update"
                and params.get("sessionId") == session
                and update.get("sessionUpdate") in ("tool_call", "tool_call_update")
            ):
                found.append(update)
        return found


def _copilot_log(sandbox: Sandbox) -> str:
    """The MCP lines of Copilot's own log (why a server was not offered, when it was not)."""
    lines = []
    for log in sorted((sandbox.home / ".copilot" / "logs").glob("*.log")):
        lines += [ln[:400] for ln in log.read_text(errors="replace").splitlines() if "mcp" in ln]
    return "\n".join(lines[-20:])


def test_two_acp_sessions_of_one_copilot_each_bootstrap(tmp_path: Path) -> None:
    sandbox = make_sandbox(tmp_path)
    boot = COPILOT.bootstrap
    steps = [
        {"when": {"last_contains": "FIRST"}, "tool_calls": [_bash("first-before.txt")]},
        {"when": {"tool": boot, "contains": "FIRST"}, "tool_calls": [{"name": boot}]},
        {"when": {"contains": "mind_contract_available"}, "tool_calls": [_bash("first-after.txt")]},
        {"when": {"contains": "FIRST"}, "text": "first done"},
        {"when": {"last_contains": "SECOND"}, "tool_calls": [_bash("second-before.txt")]},
        {"when": {"tool": boot, "contains": "SECOND"}, "tool_calls": [{"name": boot}]},
        {"when": {"contains": "mind_contract_available"},
         "tool_calls": [_bash("second-after.txt")]},
        {"when": {"contains": "SECOND"}, "text": "second done"},
    ]  # fmt: skip
    with ScriptedServer(scenario(steps)) as server:
        env = clean_env(sandbox, **COPILOT.configure(sandbox, server, False))
        command = [str(host_binary("copilot")), "--acp", "--stdio", "--allow-all"]
        host = _Acp(
            subprocess.Popen(
                [*command, "--no-auto-update"],
                cwd=sandbox.root,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
        )
        try:
            host.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
            new = {"cwd": str(sandbox.root), "mcpServers": []}
            first = str(host.request("session/new", new)["sessionId"])
            second = str(host.request("session/new", new)["sessionId"])
            for session, text in ((first, "FIRST"), (second, "SECOND")):
                prompt = [{"type": "text", "text": text}]
                host.request("session/prompt", {"sessionId": session, "prompt": prompt})
        finally:
            host.close()
        served = [(a.text, [c.name for c in a.tool_calls]) if a else None for a in server.served]
        why = f"served {served}\n--- Copilot's MCP log lines\n{_copilot_log(sandbox)}"
        assert server.remaining_steps == 0, why
    assert first != second
    root = sandbox.root
    assert not (root / "first-before.txt").exists(), why
    assert (root / "first-after.txt").read_text() == "ok\n", why
    # The second session ran its first shell call after the first session's bootstrap, in
    # the same Copilot process: blocked, for its own session id (the hook payload's sessionId).
    assert not (root / "second-before.txt").exists(), why
    assert (root / "second-after.txt").read_text() == "ok\n", why
    for session in (first, second):
        updates = json.dumps(host.tool_updates(session))
        assert BLOCKED in updates and "no recorded bootstrap for this session" in updates, updates
        # Each session's own mind server answered with that session's id (its environment).
        assert MARKER in updates and f'\\"session_id\\": \\"{session}\\"' in updates, updates
    with sqlite3.connect(root / ".personae" / "state.db") as conn:
        query = "SELECT session_id, host_pid FROM mind_bootstraps ORDER BY id"
        rows = conn.execute(query).fetchall()
    # One bootstrap per session, both recorded by the one Copilot process.
    assert [r[0] for r in rows] == [first, second], rows
    assert rows[0][1] is not None and rows[0][1] == rows[1][1], rows
