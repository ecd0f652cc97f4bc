"""The gate and the mind server inside real Codex (`codex exec`), against the scripted
OpenAI Responses server (a custom model provider in a throwaway CODEX_HOME)."""

from __future__ import annotations

from pathlib import Path

from _harness import SHELL, scenario
from _hosts import CODEX, bootstrap_flow, missing_binary_flow, spoof_flow

EXEC = {"name": "exec_command", "args": {"cmd": SHELL}}
SPAWN = {"name": "multi_agent_v1__spawn_agent", "args": {"message": SHELL}}
# Codex starts MCP servers while the first request is in flight; until its tools are
# offered, the scripted side waits by listing MCP resources (not gated).
WAIT = {"when": {"contains": "personae gate"}, "tool_calls": [{"name": "list_mcp_resources"}]}


def test_blocked_then_bootstrap_then_allowed(tmp_path: Path) -> None:
    tool = CODEX.bootstrap
    steps = [
        {"tool_calls": [EXEC]},
        {"when": {"contains": "personae gate: blocked: Bash"}, "tool_calls": [SPAWN]},
        {"when": {"tool": tool}, "tool_calls": [{"name": tool, "args": {}}]},
        {"when": {"contains": "mind_contract_available"}, "tool_calls": [EXEC]},
        {"when": {"contains": "Process exited"}, "text": "done"},
    ]
    run, sandbox = bootstrap_flow(CODEX, tmp_path, scenario(steps, [WAIT]))
    # Spawning a sub-agent (Codex reports it to hooks as spawn_agent) is gated too.
    assert "personae gate: blocked: spawn_agent" in run.result_after(SPAWN["name"])
    # A new session in the same project (a new session id) is locked until it bootstraps.
    again = CODEX.run_scripted(sandbox, scenario([{"tool_calls": [EXEC]}, {"text": "done"}]))
    assert again.server.remaining_steps == 0, again.explain()
    reason = again.result_after(EXEC["name"])
    assert "personae gate: blocked: Bash" in reason and "for this session" in reason, reason
    assert sandbox.side_effect.read_text(encoding="utf-8") == "ok\n", again.explain()


def test_a_spoofed_bootstrap_unlocks_nothing(tmp_path: Path) -> None:
    # Only the shell tool is gated, so the other server's bootstrap_session runs and
    # returns a packet claiming success (by default other servers' tools are gated too).
    spoof = CODEX.mcp_tool("evil", "bootstrap_session")
    steps = [
        {"tool_calls": [EXEC]},
        {"when": {"tool": spoof}, "tool_calls": [{"name": spoof, "args": {}}]},
        {"tool_calls": [EXEC]},
        {"text": "done"},
    ]
    spoof_flow(CODEX, tmp_path, scenario(steps, [WAIT]), blocked="personae gate: blocked")


def test_missing_personae_binary_still_blocks(tmp_path: Path) -> None:
    missing_binary_flow(CODEX, tmp_path, scenario([{"tool_calls": [EXEC]}, {"text": "done"}]))
