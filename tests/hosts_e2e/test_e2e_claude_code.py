"""The gate and the mind server inside real Claude Code (`claude -p`), against the scripted
Anthropic Messages server (SSE streaming, tool_use blocks)."""

from __future__ import annotations

from pathlib import Path

from _harness import SHELL, scenario
from _hosts import CLAUDE, bootstrap_flow, missing_binary_flow, shell_then_done, spoof_flow

BASH = {"name": "Bash", "args": {"command": SHELL, "description": "append to the file"}}
AGENT = {
    "name": "Agent",
    "args": {"description": "append", "prompt": SHELL, "subagent_type": "general-purpose"},
}


def _search(tool: str) -> dict[str, object]:
    # Claude Code defers MCP tools: the model selects one with ToolSearch before calling it.
    return {"name": "ToolSearch", "args": {"query": f"select:{tool}", "max_results": 5}}


def test_blocked_then_bootstrap_then_allowed(tmp_path: Path) -> None:
    tool = CLAUDE.bootstrap
    steps = [
        {"when": {"tool": "Bash"}, "tool_calls": [BASH]},
        {"when": {"contains": "personae gate: blocked: Bash"}, "tool_calls": [AGENT]},
        {"when": {"contains": "personae gate: blocked: Agent"}, "tool_calls": [_search(tool)]},
        {"when": {"tool": "Bash"}, "tool_calls": [{"name": tool, "args": {}}]},
        {"when": {"contains": "mind_contract_available"}, "tool_calls": [BASH]},
        {"when": {"tool": "Bash"}, "text": "done"},
    ]
    run, _ = bootstrap_flow(CLAUDE, tmp_path, scenario(steps))
    # Agent (Claude Code's current name for Task) spawns a sub-agent: gated too.
    assert "personae gate: blocked: Agent" in run.result_after("Agent"), run.explain()
    packet = run.result_after(tool)
    assert '"mind_contract_available": true' in packet.replace('":true', '": true'), packet


def test_a_spoofed_bootstrap_unlocks_nothing(tmp_path: Path) -> None:
    # Only the shell tool is gated, so the other server's bootstrap_session runs and
    # returns a packet claiming success (by default other servers' tools are gated too).
    spoof = CLAUDE.mcp_tool("evil", "bootstrap_session")
    steps = [
        {"when": {"tool": "Bash"}, "tool_calls": [BASH]},
        {"when": {"contains": "personae gate: blocked"}, "tool_calls": [_search(spoof)]},
        {"when": {"tool": "Bash"}, "tool_calls": [{"name": spoof, "args": {}}]},
        {"when": {"tool": "Bash"}, "tool_calls": [BASH]},
        {"when": {"tool": "Bash"}, "text": "done"},
    ]
    spoof_flow(CLAUDE, tmp_path, scenario(steps), blocked="personae gate: blocked: Bash")


def test_missing_personae_binary_still_blocks(tmp_path: Path) -> None:
    missing_binary_flow(CLAUDE, tmp_path, scenario(shell_then_done(CLAUDE, BASH)))
