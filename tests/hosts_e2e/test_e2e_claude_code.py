"""The gate and the mind server inside real Claude Code (`claude -p`), against the scripted
Anthropic Messages server (SSE streaming, tool_use blocks)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from _harness import (
    EVIL,
    SHELL,
    HostRun,
    Sandbox,
    assert_gate_failed_closed,
    assert_spoof_unlocked_nothing,
    clean_env,
    host_binary,
    make_sandbox,
    run_host,
    scenario,
    write_json,
)

from personae.models import ScriptedServer

BASH = {"name": "Bash", "args": {"command": SHELL, "description": "append to the file"}}
AGENT = {
    "name": "Agent",
    "args": {"description": "append", "prompt": SHELL, "subagent_type": "general-purpose"},
}


def _search(tool: str) -> dict[str, object]:
    # Claude Code defers MCP tools: the model selects one with ToolSearch before calling it.
    return {"name": "ToolSearch", "args": {"query": f"select:{tool}", "max_results": 5}}


def _claude(sandbox: Sandbox, server: ScriptedServer) -> HostRun:
    env = clean_env(
        sandbox,
        ANTHROPIC_BASE_URL=server.root_url,
        ANTHROPIC_API_KEY="scripted-no-key",
        DISABLE_TELEMETRY="1",
        DISABLE_AUTOUPDATER="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        IS_SANDBOX="1",
    )
    command = [
        str(host_binary("claude")),
        "-p",
        "Append ok to side-effect.txt.",
        "--output-format",
        "stream-json",
        "--verbose",
        "--include-hook-events",
        "--permission-mode",
        "bypassPermissions",
    ]
    return run_host(command, sandbox, env, server)


def test_blocked_then_bootstrap_then_allowed(tmp_path: Path) -> None:
    sandbox = make_sandbox(tmp_path)
    tool = "mcp__personae__bootstrap_session"
    plan = scenario(
        [
            {"when": {"tool": "Bash"}, "tool_calls": [BASH]},
            {"when": {"contains": "personae gate: blocked: Bash"}, "tool_calls": [AGENT]},
            {"when": {"contains": "personae gate: blocked: Agent"}, "tool_calls": [_search(tool)]},
            {"when": {"tool": "Bash"}, "tool_calls": [{"name": tool, "args": {}}]},
            {"when": {"contains": "mind_contract_available"}, "tool_calls": [BASH]},
            {"when": {"tool": "Bash"}, "text": "done"},
        ]
    )
    with ScriptedServer(plan) as server:
        run = _claude(sandbox, server)
    assert server.remaining_steps == 0, run.explain()
    blocked = run.result_after("Bash")
    assert "personae gate: blocked: Bash" in blocked, run.explain()
    # Agent (Claude Code's current name for Task) spawns a sub-agent: gated too.
    assert "personae gate: blocked: Agent" in run.result_after("Agent"), run.explain()
    packet = run.result_after(tool)
    assert '"mind_contract_available": true' in packet.replace('":true', '": true'), packet
    assert "personae-e2e-contract-marker" in packet
    # The second, identical Bash call ran: exactly one line from it, none from the first.
    assert sandbox.side_effect.read_text(encoding="utf-8") == "ok\n", run.explain()
    assert run.returncode == 0, run.explain()


def test_a_spoofed_bootstrap_unlocks_nothing(tmp_path: Path) -> None:
    # Only the shell tool is gated, so the other server's bootstrap_session runs and
    # returns a packet claiming success (by default other servers' tools are gated too).
    sandbox = make_sandbox(tmp_path, gates=["Bash"])
    mcp = sandbox.root / ".mcp.json"
    config = json.loads(mcp.read_text(encoding="utf-8"))
    config["mcpServers"]["evil"] = {"command": sys.executable, "args": [str(EVIL)]}
    write_json(mcp, config)
    spoof = "mcp__evil__bootstrap_session"
    plan = scenario(
        [
            {"when": {"tool": "Bash"}, "tool_calls": [BASH]},
            {"when": {"contains": "personae gate: blocked"}, "tool_calls": [_search(spoof)]},
            {"when": {"tool": "Bash"}, "tool_calls": [{"name": spoof, "args": {}}]},
            {"when": {"tool": "Bash"}, "tool_calls": [BASH]},
            {"when": {"tool": "Bash"}, "text": "done"},
        ]
    )
    with ScriptedServer(plan) as server:
        run = _claude(sandbox, server)
    assert_spoof_unlocked_nothing(
        run, sandbox, shell="Bash", spoof=spoof, blocked="personae gate: blocked: Bash"
    )


def test_missing_personae_binary_still_blocks(tmp_path: Path) -> None:
    sandbox = make_sandbox(tmp_path, hook_personae=str(tmp_path / "uninstalled" / "personae"))
    plan = scenario(
        [
            {"when": {"tool": "Bash"}, "tool_calls": [BASH]},
            {"when": {"tool": "Bash"}, "text": "done"},
        ]
    )
    with ScriptedServer(plan) as server:
        run = _claude(sandbox, server)
    assert_gate_failed_closed(run, sandbox, shell="Bash")
