"""Per-host facts the gate and the host files rely on: Claude Code, Codex, Copilot CLI.

Each :class:`HostAdapter` says which tool names are gated (shell, edit, spawn,
web and other servers' MCP tools, as the host names them in its hook input),
the hook matcher written into the host's config (in that host's regex
dialect: ECMAScript for Claude Code, Rust ``regex`` for Codex, which has no
look-around; Copilot CLI has no matcher and runs the hook for every tool),
how personae's own MCP tools are named there, and the host's deny contract
(Claude Code and Codex: exit 2 with the reason on stderr; Copilot CLI: JSON
``permissionDecision: "deny"`` on stdout with exit 0, since a non-zero exit is
a hook failure it logs and skips).

Verified against the real binaries (Claude Code 2.1.331, Codex 0.169.0,
Copilot CLI 1.0.102; see ``tests/hosts_e2e``). Kept free of heavy imports: the
gate loads this on every tool call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum

from personae.mind._tooldocs import DESCRIPTIONS

__all__ = [
    "ADAPTERS",
    "MIND_TOOLS",
    "UNLOCK_TOOLS",
    "Host",
    "HostAdapter",
    "adapter",
]

MIND_TOOLS = tuple(DESCRIPTIONS)
"""The personae mind server's tools, as it registers them (never gated: they are how a
session unlocks)."""

UNLOCK_TOOLS = ("bootstrap_session", "get_system_prompt")
"""Mind tools whose successful result unlocks the gate (the second is the taught fallback)."""


class Host(StrEnum):
    """A coding-agent host personae installs hooks and instructions for."""

    CLAUDE = "claude"
    """Claude Code."""
    CODEX = "codex"
    """OpenAI Codex CLI."""
    COPILOT = "copilot"
    """GitHub Copilot CLI."""


@dataclass(frozen=True, kw_only=True)
class HostAdapter:
    """How one host names tools, matches hooks and reads a hook's denial."""

    name: Host
    """``claude``, ``codex`` or ``copilot``."""
    title: str
    """Product name for messages."""
    gated: tuple[str, ...]
    """Gated tool-name patterns (full match; no look-around, valid in every dialect)."""
    dialect: str | None
    """Regex dialect of the host's hook matcher (``ecmascript``, ``rust``; ``None``: no matcher)."""
    mcp_format: str
    """How the host names an MCP tool: ``{server}`` and ``{tool}`` placeholders."""
    json_deny: bool
    """Deny with JSON on stdout and exit 0 (Copilot CLI) instead of exit 2 + stderr."""

    @property
    def matcher(self) -> str | None:
        """The hook matcher for the host's config (``None``: the host has none)."""
        if self.dialect is None:
            return None
        return "^(?:" + "|".join(self.gated) + ")$"

    def mcp_tool(self, tool: str, server: str = "personae") -> str:
        """The host's name for ``tool`` of MCP server ``server``."""
        return self.mcp_format.format(server=server, tool=tool)

    def own_tools(self, server: str = "personae") -> frozenset[str]:
        """The host's names for every personae mind tool."""
        return frozenset(self.mcp_tool(t, server) for t in MIND_TOOLS)

    def unlock_tools(self, server: str = "personae") -> frozenset[str]:
        """The host's names for the tools whose success unlocks the gate."""
        return frozenset(self.mcp_tool(t, server) for t in UNLOCK_TOOLS)

    def deny(self, message: str) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) that make this host refuse the tool call."""
        if self.json_deny:
            payload = {"permissionDecision": "deny", "permissionDecisionReason": message}
            return 0, json.dumps(payload) + "\n", ""
        return 2, "", message + "\n"


_MCP_OTHER = "mcp__.*"

ADAPTERS: dict[Host, HostAdapter] = {
    Host.CLAUDE: HostAdapter(
        name=Host.CLAUDE,
        title="Claude Code",
        gated=(
            "Bash",
            "PowerShell",
            "Write",
            "Edit",
            "MultiEdit",
            "NotebookEdit",
            "WebFetch",
            "WebSearch",
            "Task",
            "Agent",
            _MCP_OTHER,
        ),
        dialect="ecmascript",
        mcp_format="mcp__{server}__{tool}",
        json_deny=False,
    ),
    Host.CODEX: HostAdapter(
        name=Host.CODEX,
        title="Codex",
        # Codex reports exec_command/shell calls to hooks as "Bash"; the raw names are
        # gated too in case a version reports them unmapped.
        gated=(
            "Bash",
            "exec_command",
            "shell",
            "local_shell",
            "unified_exec",
            "write_stdin",
            "apply_patch",
            "Edit",
            "Write",
            "spawn_agent",
            "send_input",
            "multi_agent.*",
            _MCP_OTHER,
        ),
        dialect="rust",
        mcp_format="mcp__{server}__{tool}",
        json_deny=False,
    ),
    Host.COPILOT: HostAdapter(
        name=Host.COPILOT,
        title="Copilot CLI",
        gated=(
            "bash",
            "write_bash",
            "powershell",
            "write_powershell",
            "edit",
            "create",
            "task",
            "write_agent",
            "web_fetch",
            # Other MCP servers' tools are named "<server>-<tool>"; built-in names have no '-'.
            "[A-Za-z0-9_.]+-.+",
        ),
        dialect=None,
        mcp_format="{server}-{tool}",
        json_deny=True,
    ),
}
"""Every supported host by name."""


def adapter(name: Host | str) -> HostAdapter:
    """The adapter for ``name``; ValueError naming the valid hosts otherwise."""
    try:
        return ADAPTERS[Host(name)]
    except ValueError:
        raise ValueError(f"unknown host {name!r} (valid: {', '.join(ADAPTERS)})") from None
