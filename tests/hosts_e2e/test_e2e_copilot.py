"""The gate and the mind server inside real Copilot CLI (`copilot -p`, offline), against the
scripted OpenAI chat-completions server (its provider environment variables)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from _harness import (
    EVIL,
    PERSONAE,
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

BASH = {"name": "bash", "args": {"command": SHELL, "description": "append to the file"}}
TASK = {
    "name": "task",
    "args": {
        "name": "helper",
        "description": "x",
        "prompt": SHELL,
        "agent_type": "general-purpose",
    },
}
CREATE = {"name": "create", "args": {"path": "created.txt", "file_text": "x"}}


def _copilot(
    sandbox: Sandbox, server: ScriptedServer, *, personae: str = PERSONAE, evil: bool = False
) -> HostRun:
    # Copilot reads MCP servers only from ~/.copilot/mcp-config.json (printed by
    # `personae hosts render`); the hook file .github/hooks/personae.json is in the project.
    servers: dict[str, Any] = {
        "personae": {"type": "local", "command": personae, "args": ["serve"], "tools": ["*"]}
    }
    if evil:
        servers["evil"] = {
            "type": "local",
            "command": sys.executable,
            "args": [str(EVIL)],
            "tools": ["*"],
        }
    write_json(sandbox.home / ".copilot" / "mcp-config.json", {"mcpServers": servers})
    env = clean_env(
        sandbox,
        COPILOT_OFFLINE="true",
        COPILOT_PROVIDER_BASE_URL=server.base_url,
        COPILOT_PROVIDER_TYPE="openai",
        COPILOT_PROVIDER_WIRE_API="completions",
        COPILOT_PROVIDER_API_KEY="scripted-no-key",
        COPILOT_MODEL="scripted",
        COPILOT_ALLOW_ALL="true",
    )
    command = [
        str(host_binary("copilot")),
        "-p",
        "Append ok to side-effect.txt.",
        "--allow-all",
        "--no-auto-update",
    ]
    return run_host(command, sandbox, env, server)


def test_blocked_then_bootstrap_then_allowed(tmp_path: Path) -> None:
    sandbox = make_sandbox(tmp_path)
    tool = "personae-bootstrap_session"
    plan = scenario(
        [
            {"when": {"tool": "bash"}, "tool_calls": [BASH]},
            {"when": {"contains": "personae gate: blocked: bash"}, "tool_calls": [TASK, CREATE]},
            {
                "when": {"contains": "personae gate: blocked: create"},
                "tool_calls": [{"name": tool}],
            },
            {"when": {"contains": "mind_contract_available"}, "tool_calls": [BASH]},
            {"when": {"tool": "bash"}, "text": "done"},
        ]
    )
    with ScriptedServer(plan) as server:
        run = _copilot(sandbox, server)
    assert server.remaining_steps == 0, run.explain()
    assert "personae gate: blocked: bash" in run.result_after("bash"), run.explain()
    # Spawning a sub-agent and creating a file are gated too.
    assert "personae gate: blocked: task" in run.result_after("task"), run.explain()
    assert "personae gate: blocked: create" in run.result_after("create"), run.explain()
    assert not (sandbox.root / "created.txt").exists()
    assert "personae-e2e-contract-marker" in run.result_after(tool)
    # Copilot's hook input has a sessionId the model never sees: the bootstrap is bound
    # to the Copilot process that started the mind server and runs the hook.
    assert sandbox.side_effect.read_text(encoding="utf-8") == "ok\n", run.explain()
    assert run.returncode == 0, run.explain()


def test_a_spoofed_bootstrap_unlocks_nothing(tmp_path: Path) -> None:
    # Only the shell tool is gated, so the other server's bootstrap_session runs and
    # returns a packet claiming success (by default other servers' tools are gated too).
    sandbox = make_sandbox(tmp_path, gates=["bash"])
    spoof = "evil-bootstrap_session"
    plan = scenario(
        [
            {"when": {"tool": "bash"}, "tool_calls": [BASH]},
            {"when": {"tool": spoof}, "tool_calls": [{"name": spoof}]},
            {"when": {"tool": "bash"}, "tool_calls": [BASH]},
            {"when": {"tool": "bash"}, "text": "done"},
        ]
    )
    with ScriptedServer(plan) as server:
        run = _copilot(sandbox, server, evil=True)
    assert_spoof_unlocked_nothing(
        run, sandbox, shell="bash", spoof=spoof, blocked="personae gate: blocked"
    )


def test_missing_personae_binary_still_blocks(tmp_path: Path) -> None:
    missing = str(tmp_path / "uninstalled" / "personae")
    sandbox = make_sandbox(tmp_path, hook_personae=missing)
    plan = scenario(
        [
            {"when": {"tool": "bash"}, "tool_calls": [BASH]},
            {"when": {"tool": "bash"}, "text": "done"},
        ]
    )
    with ScriptedServer(plan) as server:
        run = _copilot(sandbox, server, personae=missing)
    assert_gate_failed_closed(run, sandbox, shell="bash")
