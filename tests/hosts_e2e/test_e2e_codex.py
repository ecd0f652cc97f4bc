"""The gate and the mind server inside real Codex (`codex exec`), against the scripted
OpenAI Responses server (a custom model provider in a throwaway CODEX_HOME)."""

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
)

from personae.models import ScriptedServer

EXEC = {"name": "exec_command", "args": {"cmd": SHELL}}
SPAWN = {"name": "multi_agent_v1__spawn_agent", "args": {"message": SHELL}}
# Codex starts MCP servers while the first request is in flight; until its tools are
# offered, the scripted side waits by listing MCP resources (not gated).
WAIT = {"when": {"contains": "personae gate"}, "tool_calls": [{"name": "list_mcp_resources"}]}


def _codex(sandbox: Sandbox, server: ScriptedServer, *, extra_toml: str = "") -> HostRun:
    codex_home = sandbox.home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    # What a user adds to CODEX_HOME (printed by `personae hosts render`), plus the provider.
    (codex_home / "config.toml").write_text(
        f"""model = "scripted"
model_provider = "scripted"

[model_providers.scripted]
name = "scripted loopback server"
base_url = "{server.base_url}"
wire_api = "responses"
env_key = "SCRIPTED_API_KEY"

[projects.{json.dumps(str(sandbox.root))}]
trust_level = "trusted"
{extra_toml}""",
        encoding="utf-8",
    )
    env = clean_env(sandbox, CODEX_HOME=str(codex_home), SCRIPTED_API_KEY="scripted-no-key")
    command = [
        str(host_binary("codex")),
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--dangerously-bypass-hook-trust",
        "--dangerously-bypass-approvals-and-sandbox",
        "Append ok to side-effect.txt.",
    ]
    return run_host(command, sandbox, env, server)


def test_blocked_then_bootstrap_then_allowed(tmp_path: Path) -> None:
    sandbox = make_sandbox(tmp_path)
    tool = "mcp__personae__bootstrap_session"
    plan = scenario(
        [
            {"tool_calls": [EXEC]},
            {"when": {"contains": "personae gate: blocked: Bash"}, "tool_calls": [SPAWN]},
            {"when": {"tool": tool}, "tool_calls": [{"name": tool, "args": {}}]},
            {"when": {"contains": "mind_contract_available"}, "tool_calls": [EXEC]},
            {"when": {"contains": "Process exited"}, "text": "done"},
        ],
        [WAIT],
    )
    with ScriptedServer(plan) as server:
        run = _codex(sandbox, server)
    assert server.remaining_steps == 0, run.explain()
    assert "personae gate: blocked: Bash" in run.result_after("exec_command"), run.explain()
    # Spawning a sub-agent (Codex reports it to hooks as spawn_agent) is gated too.
    assert "personae gate: blocked: spawn_agent" in run.result_after(SPAWN["name"])
    packet = run.result_after(tool)
    assert "personae-e2e-contract-marker" in packet, packet
    assert sandbox.side_effect.read_text(encoding="utf-8") == "ok\n", run.explain()
    assert run.returncode == 0, run.explain()


def test_a_spoofed_bootstrap_unlocks_nothing(tmp_path: Path) -> None:
    # Only the shell tool is gated, so the other server's bootstrap_session runs and
    # returns a packet claiming success (by default other servers' tools are gated too).
    sandbox = make_sandbox(tmp_path, gates=["Bash"])
    evil = f'\n[mcp_servers.evil]\ncommand = "{sys.executable}"\nargs = ["{EVIL}"]\n'
    spoof = "mcp__evil__bootstrap_session"
    plan = scenario(
        [
            {"tool_calls": [EXEC]},
            {"when": {"tool": spoof}, "tool_calls": [{"name": spoof, "args": {}}]},
            {"tool_calls": [EXEC]},
            {"text": "done"},
        ],
        [WAIT],
    )
    with ScriptedServer(plan) as server:
        run = _codex(sandbox, server, extra_toml=evil)
    assert_spoof_unlocked_nothing(
        run, sandbox, shell="exec_command", spoof=spoof, blocked="personae gate: blocked"
    )


def test_missing_personae_binary_still_blocks(tmp_path: Path) -> None:
    sandbox = make_sandbox(tmp_path, hook_personae=str(tmp_path / "uninstalled" / "personae"))
    plan = scenario([{"tool_calls": [EXEC]}, {"text": "done"}])
    with ScriptedServer(plan) as server:
        run = _codex(sandbox, server)
    assert_gate_failed_closed(run, sandbox, shell="exec_command")
