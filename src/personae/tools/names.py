"""Canonical built-in tool names and the Claude Code name mapping."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from personae.errors import UnknownNameError

__all__ = [
    "BUILTIN_TOOL_NAMES",
    "CLAUDE_TOOL_MAP",
    "MCP_TOOL_NAME",
    "canonical_tool_name",
    "mcp_entry_covers",
    "mcp_server_of",
    "mcp_tool_name",
    "require_tool_names",
    "split_tool_spec",
]

_SPEC_RE = re.compile(r"^\s*([^()\s]+)\s*(?:\((.*)\))?\s*$", re.DOTALL)

MCP_TOOL_NAME = re.compile(r"^mcp__(?P<server>.+?)(?:__(?P<tool>.+))?$")
"""``mcp__<server>__<tool>`` (or ``mcp__<server>``): groups ``server`` and ``tool``."""


def mcp_entry_covers(entry: str, server: str, tool: str | None) -> bool:
    """Whether tools-list ``entry`` names ``tool`` of MCP server ``server`` (``None``: any
    tool of it): ``mcp__<server>`` and ``mcp__<server>__*`` name all its tools."""
    match = MCP_TOOL_NAME.match(entry)
    if match is None or match.group("server") != server:
        return False
    named = match.group("tool")
    return named in (None, "*") or (tool is not None and named == tool)


def mcp_tool_name(server: str, tool: str) -> str:
    """The name the model sees for ``tool`` of ``server``: ``mcp__<server>__<tool>``
    (``tool=""``: the prefix of every tool of ``server``)."""
    return f"mcp__{server}__{tool}"


def mcp_server_of(name: str) -> str | None:
    """The server part of an ``mcp__<server>__<tool>`` (or ``mcp__<server>``) name."""
    match = MCP_TOOL_NAME.match(name)
    return match.group("server") if match else None


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


def split_tool_spec(spec: str) -> tuple[str, str | None]:
    """``"Bash(git diff:*)"`` -> ``("run_shell", "git diff:*")``; a plain name gets ``None``."""
    match = _SPEC_RE.match(spec)
    if match is None:
        return canonical_tool_name(spec), None
    return canonical_tool_name(match.group(1)), match.group(2)


def require_tool_names(
    names: Iterable[str],
    known: Iterable[str] = BUILTIN_TOOL_NAMES,
    *,
    file: str | Path | None = None,
    line: int | None = None,
    field: str = "tools",
) -> list[str]:
    """Canonical names of a tools list, each checked against ``known``; strict: raises.

    Unlike ``personae.persona._tools.check_tool_names`` (which sorts names into
    available and unavailable for the loader's messages), an unknown name here
    is an error.
    Claude Code names are mapped; a ``Name(pattern)`` entry is checked by its
    name. Order is kept, duplicates dropped.

    Raises:
        UnknownNameError: the first unknown name, with the closest valid one.
    """
    valid = set(known)
    out: list[str] = []
    for spec in names:
        name, _pattern = split_tool_spec(spec)
        if name not in valid:
            raise UnknownNameError("tool", spec, valid, file=file, line=line, field=field)
        if name not in out:
            out.append(name)
    return out
