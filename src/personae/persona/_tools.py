"""Tool-name parsing and checking shared by the persona and skill loaders."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from personae.errors import closest_name
from personae.tools.names import (
    BUILTIN_TOOL_NAMES,
    CLAUDE_TOOL_MAP,
    canonical_tool_name,
    mcp_server_of,
)

__all__ = [
    "ToolCheck",
    "check_tool_names",
    "claude_name",
    "claude_spelling",
    "program_tools",
    "split_names",
    "split_spawn_entries",
]

_TOKEN = re.compile(r"[^\s,()]+(?:\([^)]*\))?")
_COMMA = re.compile(r",(?![^(]*\))")
_SPAWN = re.compile(r"^\s*(?:Agent|Task|agent)\s*\((?P<names>[^)]*)\)\s*$")
_REVERSE = {v: k for k, v in reversed(list(CLAUDE_TOOL_MAP.items()))}
_PROGRAM_TOOLS: ContextVar[frozenset[str]] = ContextVar("personae_program_tools",
                                                        default=frozenset())  # fmt: skip
"""Names of the tools the calling program adds (Python function tools) while a cast loads."""


@contextmanager
def program_tools(names: Iterable[str]) -> Iterator[None]:
    """While in the block, persona and skill files may name the tools ``names`` (the
    function tools of the program that loads them) like built-in tools."""
    token = _PROGRAM_TOOLS.set(frozenset(names))
    try:
        yield
    finally:
        _PROGRAM_TOOLS.reset(token)


def split_names(value: Any, *, spaces: bool = False) -> list[str]:
    """Names from a comma string (or space string when ``spaces``) or a list of strings.

    Raises ``ValueError`` with a message when the value has the wrong type.
    """
    if value is None:
        return []
    if isinstance(value, str):
        if spaces:
            return _TOKEN.findall(value)
        # Commas inside parentheses belong to the entry: ``Agent(worker, researcher), Read``.
        return [part.strip() for part in _COMMA.split(value) if part.strip()]
    if isinstance(value, list):
        out: list[str] = []
        for item in value:
            if not isinstance(item, str):
                raise ValueError(f"entries must be strings, got {type(item).__name__} {item!r}")
            if item.strip():
                out.append(item.strip())
        return out
    raise ValueError(
        f"must be a comma-separated string or a list of names, got {type(value).__name__}"
    )


def split_spawn_entries(names: list[str]) -> tuple[list[str], list[str] | None]:
    """Take Claude Code's ``Agent(a, b)`` / ``Task(a, b)`` entries out of a tools list.

    Returns ``(tools, spawn)``: the list with each such entry replaced by
    ``agent``, and the persona names they allow (``None`` when there is none).
    """
    tools: list[str] = []
    spawn: list[str] | None = None
    for entry in names:
        match = _SPAWN.match(entry)
        if match is None:
            tools.append(entry)
            continue
        spawn = spawn or []
        for name in match.group("names").split(","):
            if name.strip() and name.strip() not in spawn:
                spawn.append(name.strip())
        if "agent" not in tools:
            tools.append("agent")
    return tools, spawn


def claude_name(tool: str) -> str:
    """The Claude Code name for a personae tool name (unchanged when there is none)."""
    return _REVERSE.get(tool, tool)


def claude_spelling(
    written: list[str], default: list[str], keep: Iterable[str]
) -> list[str] | None:
    """``written`` in Claude Code spelling (names in ``keep`` as written), or ``None``
    when that equals ``default`` (what an export would write anyway)."""
    kept = set(keep)
    spelled = [n if n in kept else claude_name(n) for n in written]
    return None if spelled == default else spelled


@dataclass
class ToolCheck:
    """Result of checking a list of tool names."""

    tools: list[str] = field(default_factory=list)
    """Canonical names personae can provide (order kept, duplicates removed)."""
    unavailable: list[str] = field(default_factory=list)
    """Names as written that personae does not provide."""
    messages: list[str] = field(default_factory=list)
    """One message per unavailable name (with the closest valid name when there is one)."""
    notes: list[str] = field(default_factory=list)
    """Warnings about names accepted with a change (a denied pattern denies the whole tool)."""


def check_tool_names(
    names: Iterable[str], servers: Iterable[str], *, deny: bool = False
) -> ToolCheck:
    """Map ``names`` to personae names and split them into available and unavailable.

    Valid names are the built-in tools and ``mcp__<server>[__<tool>]`` for a
    configured ``server``. An argument pattern such as ``Bash(git:*)`` cannot be
    enforced, so it fails closed: in an allow list (``deny=False``) the entry is
    unavailable; in a deny list (``deny=True``) the whole tool is denied.
    """
    configured = set(servers)
    result = ToolCheck()
    for raw in names:
        base = raw.split("(", 1)[0].strip()
        name = canonical_tool_name(base)
        server = mcp_server_of(name)
        known = (
            name in BUILTIN_TOOL_NAMES
            or name in _PROGRAM_TOOLS.get()
            or (server is not None and server in configured)
        )
        if known and base != raw.strip():
            if deny:
                result.notes.append(f"tool {raw!r}: argument pattern ignored; whole tool denied")
                if name not in result.tools:
                    result.tools.append(name)
            else:
                result.unavailable.append(raw)
                result.messages.append(
                    f"tool {raw!r}: argument patterns cannot be enforced; tool left out"
                )
            continue
        if known:
            if name not in result.tools:
                result.tools.append(name)
            continue
        result.unavailable.append(raw)
        if server is not None:
            result.messages.append(
                f"tool {raw!r}: MCP server {server!r} is not configured"
                + (f" (configured: {', '.join(sorted(configured))})" if configured else "")
            )
            continue
        valid = sorted(BUILTIN_TOOL_NAMES | set(CLAUDE_TOOL_MAP))
        hint = closest_name(name, valid)
        close = f"; did you mean {canonical_tool_name(hint)!r}?" if hint else ""
        listing = ", ".join(sorted(BUILTIN_TOOL_NAMES))
        result.messages.append(f"unknown tool {raw!r}{close} (valid: {listing})")
    return result
