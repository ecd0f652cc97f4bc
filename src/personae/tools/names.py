"""Canonical built-in tool names and the Claude Code name mapping."""

from __future__ import annotations

__all__ = ["BUILTIN_TOOL_NAMES", "CLAUDE_TOOL_MAP", "canonical_tool_name"]

BUILTIN_TOOL_NAMES: frozenset[str] = frozenset(
    {
        "read_file",
        "write_file",
        "edit_file",
        "list_dir",
        "glob",
        "grep",
        "run_shell",
        "web_fetch",
        "agent",
        "handover_to_persona",
    }
)
"""Tools personae provides itself."""

CLAUDE_TOOL_MAP: dict[str, str] = {
    "Read": "read_file",
    "Write": "write_file",
    "Edit": "edit_file",
    "MultiEdit": "edit_file",
    "Bash": "run_shell",
    "Grep": "grep",
    "Glob": "glob",
    "LS": "list_dir",
    "WebFetch": "web_fetch",
    "Task": "agent",
    "Agent": "agent",
}
"""Claude Code tool names -> personae tool names."""


def canonical_tool_name(name: str) -> str:
    """The personae name for ``name`` (Claude Code names mapped; others unchanged)."""
    stripped = name.strip()
    return CLAUDE_TOOL_MAP.get(stripped, stripped)
