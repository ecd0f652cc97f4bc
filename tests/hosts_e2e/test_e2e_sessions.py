"""One bootstrap unlocks one session, in the real hosts: sessions that share a host process
(Claude Code ``/clear``) or run under a bootstrapped host (a host started from its shell
tool) each stay locked until they bootstrap themselves.

Each run drives the real binary against the scripted loopback server, with the host files
``personae hosts render --write`` wrote; side-effect files show which shell calls ran.
"""

from __future__ import annotations

import shlex
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from _harness import RUN_TIMEOUT, JsonLinesHost, clean_env, host_binary, make_sandbox, scenario
from _hosts import CLAUDE, MARKER

from personae.models import ScriptedServer

pytestmark = pytest.mark.hosts

BLOCKED = "personae gate: blocked"


def _append(name: str) -> str:
    return f"echo ok >> {name}"


def _bash(name: str) -> dict[str, Any]:
    return {"name": "Bash", "args": {"command": _append(name), "description": "append"}}


_SEARCH = {
    "name": "ToolSearch",
    "args": {"query": f"select:{CLAUDE.bootstrap}", "max_results": 5},
}
_BOOT = {"name": CLAUDE.bootstrap, "args": {}}


def _tool_results(server: ScriptedServer) -> list[str]:
    """Every tool result the host sent back, in order, from every request (for messages)."""
    seen: dict[str, str] = {}
    for request in server.requests:
        for message in request.get("messages", []):
            if message.get("role") == "tool":
                seen.setdefault(str(message.get("tool_call_id")), str(message["content"])[:300])
    return list(seen.values())


class _Lines(JsonLinesHost):
    """A host speaking JSON lines on stdout, read on a thread."""

    def wait_for(self, found: Any, what: str) -> dict[str, Any]:
        deadline = time.monotonic() + RUN_TIMEOUT
        while time.monotonic() < deadline:
            for message in list(self.seen):
                if found(message):
                    return message
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"no {what}; got {self.seen[-5:]}")

    def results(self) -> list[dict[str, Any]]:
        """The ``result`` lines so far (one per finished turn)."""
        return [m for m in list(self.seen) if m.get("type") == "result"]


def test_claude_clear_starts_a_locked_session(tmp_path: Path) -> None:
    """`/clear` through `claude -p --input-format stream-json`: one process, one MCP server,
    a new session id that the first session's bootstrap does not unlock."""
    sandbox = make_sandbox(tmp_path)
    steps = [
        {"when": {"contains": "FIRST"}, "tool_calls": [_SEARCH]},
        {"when": {"contains": "FIRST"}, "tool_calls": [_BOOT]},
        {"when": {"contains": "mind_contract_available"}, "tool_calls": [_bash("first.txt")]},
        {"when": {"contains": "FIRST"}, "text": "done one"},
        {"when": {"contains": "SECOND"}, "tool_calls": [_bash("second.txt")]},
        {"when": {"contains": BLOCKED}, "tool_calls": [_SEARCH]},
        {"when": {"contains": "SECOND"}, "tool_calls": [_BOOT]},
        {"when": {"contains": "mind_contract_available"}, "tool_calls": [_bash("third.txt")]},
        {"when": {"contains": "SECOND"}, "text": "done two"},
    ]
    args = ["-p", "--input-format", "stream-json", "--output-format", "stream-json"]
    args += ["--verbose", "--permission-mode", "bypassPermissions"]
    with ScriptedServer(scenario(steps)) as server:
        env = clean_env(sandbox, **CLAUDE.configure(sandbox, server, False))
        host = _Lines(
            subprocess.Popen(
                [str(host_binary("claude")), *args],
                cwd=sandbox.root,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
        )
        try:
            sessions = []
            for text in ("FIRST", "/clear", "SECOND"):
                before = len(host.results())
                host.send({"type": "user", "message": {"role": "user", "content": text}})
                host.wait_for(lambda _m, n=before: len(host.results()) > n, f"result of {text}")
                sessions.append(host.results()[-1].get("session_id"))
        finally:
            host.close()
        served = [(a.text, [c.name for c in a.tool_calls]) if a else None for a in server.served]
        served.append(_tool_results(server))  # type: ignore[arg-type]
        assert server.remaining_steps == 0, served
    assert sessions[0] != sessions[2], sessions  # /clear started a new session
    root = sandbox.root
    assert (root / "first.txt").read_text() == "ok\n"  # bootstrapped session one ran it
    assert not (root / "second.txt").exists(), served  # session two before its bootstrap
    assert (root / "third.txt").read_text() == "ok\n"  # session two after its bootstrap


def test_a_claude_started_from_a_bootstrapped_claudes_shell_stays_locked(tmp_path: Path) -> None:
    """The outer session bootstraps, then starts another Claude Code from its Bash tool in
    the same folder: the inner session's shell calls are blocked (its own session id, its own
    host process) although every ancestor of its hook is bootstrapped."""
    sandbox = make_sandbox(tmp_path)
    inner = shlex.join(
        ["env", "-u", "CLAUDECODE", str(host_binary("claude")), "-p", "INNER task",
         "--output-format", "stream-json", "--verbose", "--include-hook-events",
         "--permission-mode", "bypassPermissions"]
    )  # fmt: skip
    outer_shell = {
        "name": "Bash",
        "args": {"command": f"{inner} > inner.jsonl 2>&1; echo ok >> outer.txt", "timeout": 200000,
                 "description": "nested host"},
    }  # fmt: skip
    steps = [
        {"when": {"contains": "Append ok"}, "tool_calls": [_SEARCH]},
        {"when": {"contains": "Append ok"}, "tool_calls": [_BOOT]},
        {"when": {"contains": "mind_contract_available"}, "tool_calls": [outer_shell]},
        {"when": {"contains": "INNER"}, "tool_calls": [_bash("nested.txt")]},
        {"when": {"contains": "INNER"}, "text": "inner done"},
    ]
    run = CLAUDE.run_scripted(sandbox, scenario(steps))
    assert run.server.remaining_steps == 0, run.explain()
    assert MARKER in run.result_after(CLAUDE.bootstrap)
    assert (sandbox.root / "outer.txt").read_text() == "ok\n", run.explain()
    inner_log = (sandbox.root / "inner.jsonl").read_text(encoding="utf-8")
    assert BLOCKED in inner_log, inner_log[-3000:]
    assert not (sandbox.root / "nested.txt").exists(), inner_log[-3000:]
