"""The gate and the mind server inside real Copilot CLI (`copilot -p`, offline), against the
scripted OpenAI chat-completions server (its provider environment variables)."""

from __future__ import annotations

from pathlib import Path

from _harness import SHELL, scenario
from _hosts import COPILOT, bootstrap_flow, missing_binary_flow, shell_then_done, spoof_flow

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


def test_blocked_then_bootstrap_then_allowed(tmp_path: Path) -> None:
    tool = COPILOT.bootstrap
    steps = [
        {"when": {"tool": "bash"}, "tool_calls": [BASH]},
        {"when": {"contains": "personae gate: blocked: bash"}, "tool_calls": [TASK, CREATE]},
        {
            "when": {"contains": "personae gate: blocked: create"},
            "tool_calls": [{"name": tool}],
        },
        {"when": {"contains": "mind_contract_available"}, "tool_calls": [BASH]},
        {"when": {"tool": "bash"}, "text": "done"},
    ]
    # Copilot's hook input has a sessionId the model never sees: the bootstrap is bound
    # to the Copilot process that started the mind server and runs the hook.
    run, sandbox = bootstrap_flow(COPILOT, tmp_path, scenario(steps))
    # Spawning a sub-agent and creating a file are gated too.
    assert "personae gate: blocked: task" in run.result_after("task"), run.explain()
    assert "personae gate: blocked: create" in run.result_after("create"), run.explain()
    assert not (sandbox.root / "created.txt").exists()


def test_a_spoofed_bootstrap_unlocks_nothing(tmp_path: Path) -> None:
    # Only the shell tool is gated, so the other server's bootstrap_session runs and
    # returns a packet claiming success (by default other servers' tools are gated too).
    spoof = COPILOT.mcp_tool("evil", "bootstrap_session")
    steps = [
        {"when": {"tool": "bash"}, "tool_calls": [BASH]},
        {"when": {"tool": spoof}, "tool_calls": [{"name": spoof}]},
        {"when": {"tool": "bash"}, "tool_calls": [BASH]},
        {"when": {"tool": "bash"}, "text": "done"},
    ]
    spoof_flow(COPILOT, tmp_path, scenario(steps), blocked="personae gate: blocked")


def test_missing_personae_binary_still_blocks(tmp_path: Path) -> None:
    missing_binary_flow(COPILOT, tmp_path, scenario(shell_then_done(COPILOT, BASH)))
