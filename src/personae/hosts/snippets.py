"""Host instruction snippets and hook/MCP configuration, rendered from one template.

Hosts reliably show the model their instruction files (CLAUDE.md, AGENTS.md,
.github/copilot-instructions.md), tool descriptions and tool results, not MCP
server instructions; so the bootstrap rule goes into every instruction file.
"""

from __future__ import annotations

import shlex
from typing import Any

__all__ = [
    "BEGIN",
    "END",
    "GATE_MATCHER",
    "HOOK_COMMAND",
    "MAX_SNIPPET_CHARS",
    "REQUIRED_MARKERS",
    "SERVER_NAME",
    "SESSION_START_COMMAND",
    "claude_hooks",
    "copilot_hooks",
    "gate_args",
    "home_instructions",
    "mcp_entry",
    "snippet",
]

SERVER_NAME = "personae"
BEGIN = "<!-- personae:bootstrap:begin (managed by `personae hosts render`) -->"
END = "<!-- personae:bootstrap:end -->"
MAX_SNIPPET_CHARS = 1_500
HOOK_COMMAND = "personae hook pre-tool-use"
SESSION_START_COMMAND = "personae hook session-start"
GATE_MATCHER = "Bash|Write|Edit|MultiEdit|NotebookEdit|WebFetch|Task|mcp__(?!personae__).*"

REQUIRED_MARKERS = (
    "bootstrap_session",
    "observe",
    "reflect",
    "recall",
    "mind_contract_available",
    "get_system_prompt",
    "context",
    "list_memory_files",
    "degraded",
    "MCP server instructions",
)
"""Strings every rendered snippet (and every checked file) must contain."""

_TEMPLATE = """\
{begin}
## personae mind: session bootstrap

Before the first substantive answer or any external tool call, call \
`{p}bootstrap_session()` once and treat its packet as the live mind contract. \
MCP server instructions are not reliably shown to the model; this file is.

- Tool missing? Fall back in order: `{p}get_system_prompt()`, `{p}context()`, \
`{p}list_memory_files()`.
- `mind_contract_available` false (or get_system_prompt text starts with "ERROR:"): \
say the mind is degraded and do not impersonate the persona.
- Server unreachable: say you are in degraded body-only mode before using tools \
that depend on memory or persona.
{hook_line}
Per turn:
- `observe(tool_name, args)` before and `observe(tool_name, args, result)` after \
external tool calls unless a hook records them.
- `reflect(observation, kind)` for user_said, time_passed, ambient, internal.
- `recall(query, k, facet)` when an excerpt is not enough; surface cautionary_flags.
{end}
"""

_HOOK_LINES = {
    "claude": "- A PreToolUse hook blocks Bash, edits and other MCP tools until "
    "bootstrap_session succeeds.\n",
    "codex": "- A PreToolUse hook blocks shell tools until bootstrap_session succeeds.\n",
    "copilot": "- A preToolUse hook blocks shell and edit tools until "
    "bootstrap_session succeeds.\n",
}


def snippet(host: str) -> str:
    """The instruction block for ``host`` (claude, codex or copilot)."""
    prefix = f"mcp__{SERVER_NAME}__" if host == "claude" else ""
    return _TEMPLATE.format(begin=BEGIN, end=END, p=prefix, hook_line=_HOOK_LINES[host])


def _command_hook(command: str, timeout: int) -> dict[str, Any]:
    return {"type": "command", "command": command, "timeout": timeout}


def gate_args(gates: list[str]) -> str:
    """`` --gate PATTERN`` for each pattern, shell-quoted."""
    return "".join(f" --gate {shlex.quote(g)}" for g in gates)


def claude_hooks(gates: list[str] | None = None) -> dict[str, Any]:
    """The ``hooks`` entries for Claude Code settings and Codex hooks.json.

    The matcher is the union of the gate patterns (the hook only runs for tools
    it may block); the gate itself matches each pattern against the whole name.
    """
    command = f"{HOOK_COMMAND}{gate_args(gates or [])}"
    matcher = "|".join(f"^(?:{g})$" for g in gates) if gates else GATE_MATCHER
    return {
        "PreToolUse": [{"matcher": matcher, "hooks": [_command_hook(command, 10)]}],
        "SessionStart": [{"hooks": [_command_hook(SESSION_START_COMMAND, 10)]}],
    }


def copilot_hooks(gates: list[str] | None = None) -> dict[str, Any]:
    """The Copilot CLI hook file (``.github/hooks/personae.json``)."""
    command = f"{HOOK_COMMAND}{gate_args(gates or [])}"
    return {
        "version": 1,
        "hooks": {"preToolUse": [{"type": "command", "bash": command, "timeoutSec": 10}]},
    }


def mcp_entry() -> dict[str, Any]:
    """The MCP server entry (stdio) for ``.mcp.json`` style configs."""
    return {"command": "personae", "args": ["serve"]}


def home_instructions() -> str:
    """What to paste into files in the home directory (never written by personae)."""
    return f"""\
Files in your home directory are never edited by personae. To enable personae globally:

1. Claude Code: append the CLAUDE.md block above to ~/.claude/CLAUDE.md, or run
   `claude mcp add {SERVER_NAME} -- personae serve` for a user-scoped MCP server.
2. Codex: add to ~/.codex/config.toml
     [mcp_servers.{SERVER_NAME}]
     command = "personae"
     args = ["serve"]
     [features]
     codex_hooks = true
3. Copilot CLI: add to ~/.copilot/mcp-config.json under "mcpServers":
     "{SERVER_NAME}": {{"type": "local", "command": "personae", "args": ["serve"], "tools": ["*"]}}
"""
