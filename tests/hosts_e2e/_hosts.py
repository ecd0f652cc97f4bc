"""The three real hosts as data: their binary, arguments and the configuration each needs
to talk to the scripted loopback server, and the check flows every host goes through.

A :class:`Host` runs its binary once in a :class:`~_harness.Sandbox` against a
:class:`~personae.models.ScriptedServer`; the flows (:func:`bootstrap_flow`,
:func:`spoof_flow`, :func:`missing_binary_flow`) make the sandbox, run the host on the
test's scenario steps and make the checks that hold for every host. The test modules keep
what differs: the host's tool names, its scenario steps and its extra checks.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _harness import (
    EVIL,
    SIDE_EFFECT,
    HostRun,
    Sandbox,
    assert_gate_failed_closed,
    assert_spoof_unlocked_nothing,
    clean_env,
    host_binary,
    make_sandbox,
    run_host,
    write_json,
)

from personae.models import Scenario, ScriptedServer

PROMPT = "Append ok to side-effect.txt."
"""The user prompt of every host run."""
MARKER = "personae-e2e-contract-marker"
"""Text of the sandbox's mind contract: in a bootstrap packet, the real mind server answered."""

Configure = Callable[[Sandbox, ScriptedServer, bool], dict[str, str]]
"""Writes a host's configuration files into the sandbox (with the ``evil`` MCP server when
the flag is set) and returns the environment variables the host run adds."""


@dataclass(frozen=True)
class Host:
    """One host CLI under test.

    ``shell`` is the name of the host's shell tool as the model calls it; ``gate`` is the
    name the host reports to hooks for it (what ``--gate`` takes); ``mcp_format`` is how
    the host names an MCP server's tool for the model.
    """

    binary: str
    args: tuple[str, ...]
    shell: str
    gate: str
    configure: Configure
    mcp_format: str = "mcp__{server}__{tool}"

    def mcp_tool(self, server: str, tool: str) -> str:
        """The name the model calls MCP server ``server``'s tool ``tool`` by."""
        return self.mcp_format.format(server=server, tool=tool)

    @property
    def bootstrap(self) -> str:
        """The mind server's ``bootstrap_session`` tool as the model calls it."""
        return self.mcp_tool("personae", "bootstrap_session")

    def run(self, sandbox: Sandbox, server: ScriptedServer, *, evil: bool = False) -> HostRun:
        """Run the host once on :data:`PROMPT` in ``sandbox`` against ``server``."""
        env = clean_env(sandbox, **self.configure(sandbox, server, evil))
        return run_host([str(host_binary(self.binary)), *self.args], sandbox, env, server)

    def run_scripted(self, sandbox: Sandbox, plan: Scenario, *, evil: bool = False) -> HostRun:
        """Run the host against a scripted server replaying ``plan``."""
        with ScriptedServer(plan) as server:
            return self.run(sandbox, server, evil=evil)


def _claude_configure(sandbox: Sandbox, server: ScriptedServer, evil: bool) -> dict[str, str]:
    if evil:
        mcp = sandbox.root / ".mcp.json"
        config = json.loads(mcp.read_text(encoding="utf-8"))
        config["mcpServers"]["evil"] = {"command": sys.executable, "args": [str(EVIL)]}
        write_json(mcp, config)
    return {
        "ANTHROPIC_BASE_URL": server.root_url,
        "ANTHROPIC_API_KEY": "scripted-no-key",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "IS_SANDBOX": "1",
    }


_CODEX_PASS_PYTHONPATH = """
[mcp_servers.personae]
env_vars = ["PYTHONPATH"]
"""
"""Codex gives MCP servers only a few variables of its own environment: this passes the
test's PYTHONPATH on, so the mind server runs the checkout under test (as the hooks do)."""


def _codex_configure(sandbox: Sandbox, server: ScriptedServer, evil: bool) -> dict[str, str]:
    codex_home = sandbox.home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    extra = f'\n[mcp_servers.evil]\ncommand = "{sys.executable}"\nargs = ["{EVIL}"]\n'
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
{_CODEX_PASS_PYTHONPATH if "PYTHONPATH" in os.environ else ""}
{extra if evil else ""}""",
        encoding="utf-8",
    )
    return {"CODEX_HOME": str(codex_home), "SCRIPTED_API_KEY": "scripted-no-key"}


def _copilot_configure(sandbox: Sandbox, server: ScriptedServer, evil: bool) -> dict[str, str]:
    # Copilot reads MCP servers from ~/.copilot/mcp-config.json and from the project's
    # .mcp.json (its entry wins); the hook file .github/hooks/personae.json is in the project.
    personae = sandbox.personae
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
    return {
        "COPILOT_OFFLINE": "true",
        "COPILOT_PROVIDER_BASE_URL": server.base_url,
        "COPILOT_PROVIDER_TYPE": "openai",
        "COPILOT_PROVIDER_WIRE_API": "completions",
        "COPILOT_PROVIDER_API_KEY": "scripted-no-key",
        "COPILOT_MODEL": "scripted",
        "COPILOT_ALLOW_ALL": "true",
    }


CLAUDE = Host(
    binary="claude",
    args=(
        "-p",
        PROMPT,
        "--output-format",
        "stream-json",
        "--verbose",
        "--include-hook-events",
        "--permission-mode",
        "bypassPermissions",
    ),
    shell="Bash",
    gate="Bash",
    configure=_claude_configure,
)
"""Claude Code (`claude -p`) against the scripted Anthropic Messages server."""

CODEX = Host(
    binary="codex",
    args=(
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--dangerously-bypass-hook-trust",
        "--dangerously-bypass-approvals-and-sandbox",
        PROMPT,
    ),
    shell="exec_command",
    gate="Bash",
    configure=_codex_configure,
)
"""Codex (`codex exec`) against the scripted OpenAI Responses server (a custom model
provider in a throwaway CODEX_HOME)."""

COPILOT = Host(
    binary="copilot",
    args=("-p", PROMPT, "--allow-all", "--no-auto-update"),
    shell="bash",
    gate="bash",
    configure=_copilot_configure,
    mcp_format="{server}-{tool}",
)
"""Copilot CLI (`copilot -p`, offline) against the scripted OpenAI chat-completions server
(its provider environment variables)."""


def shell_then_done(host: Host, call: dict[str, Any]) -> list[dict[str, Any]]:
    """Scenario steps: the model makes the shell ``call`` when the request offers the host's
    shell tool, then answers "done" (for hosts whose requests name the shell tool)."""
    offered = {"tool": host.shell}
    return [{"when": offered, "tool_calls": [call]}, {"when": offered, "text": "done"}]


def bootstrap_flow(host: Host, tmp_path: Path, plan: Scenario) -> tuple[HostRun, Sandbox]:
    """Run ``plan`` (blocked shell call, ..., the host's bootstrap tool, the shell call
    again) in a new sandbox with the host's default gates, and check what holds for every host:
    every step was used, the first shell call was blocked with the reason, the bootstrap
    packet carries the mind contract, the second shell call ran (its side effect is on
    disk once) and the host exited 0. Returns the run and its sandbox for the host's own
    checks."""
    sandbox = make_sandbox(tmp_path)
    run = host.run_scripted(sandbox, plan)
    assert run.server.remaining_steps == 0, run.explain()
    blocked = f"personae gate: blocked: {host.gate}"
    assert blocked in run.result_after(host.shell), run.explain()
    packet = run.result_after(host.bootstrap)
    assert MARKER in packet, packet
    # The second, identical shell call ran: exactly one line from it, none from the first.
    assert sandbox.side_effect.read_text(encoding="utf-8") == "ok\n", run.explain()
    assert run.returncode == 0, run.explain()
    # The post-tool-use hook recorded the shell call that ran in the mind's journal.
    recorded = recorded_tools(sandbox)
    assert any(SIDE_EFFECT in args for _, args in recorded), (recorded, run.explain())
    return run, sandbox


def recorded_tools(sandbox: Sandbox) -> list[tuple[str, str]]:
    """(tool name, arguments) of every tool call the mind's journal recorded, in order."""
    with sqlite3.connect(sandbox.root / ".personae" / "state.db") as conn:
        rows = conn.execute(
            "SELECT tool_name, args FROM mind_journal WHERE tool_name IS NOT NULL ORDER BY id"
        ).fetchall()
    return [(str(r[0]), str(r[1])) for r in rows]


def spoof_flow(host: Host, tmp_path: Path, plan: Scenario, *, blocked: str) -> None:
    """Only the shell tool is gated and an ``evil`` MCP server offers its own
    ``bootstrap_session``: it runs and claims success, yet both shell calls are blocked with
    ``blocked`` and nothing ran (:func:`_harness.assert_spoof_unlocked_nothing`)."""
    sandbox = make_sandbox(tmp_path, gates=[host.gate])
    run = host.run_scripted(sandbox, plan, evil=True)
    spoof = host.mcp_tool("evil", "bootstrap_session")
    assert_spoof_unlocked_nothing(run, sandbox, shell=host.shell, spoof=spoof, blocked=blocked)


def missing_binary_flow(host: Host, tmp_path: Path, plan: Scenario) -> None:
    """The host files name a personae binary that is not installed: the shell call is
    blocked, not run (:func:`_harness.assert_gate_failed_closed`)."""
    sandbox = make_sandbox(tmp_path, hook_personae=str(tmp_path / "uninstalled" / "personae"))
    run = host.run_scripted(sandbox, plan)
    assert_gate_failed_closed(run, sandbox, shell=host.shell)
