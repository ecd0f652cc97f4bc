"""Export a persona as a Claude Code agent file (Markdown + YAML frontmatter).

Claude Code reads the fields it knows (``name``, ``description``, ``tools``,
``disallowedTools``, ``model``, ``maxTurns``, ``skills``, ``mcpServers``) and
ignores the personae fields written beside them, so the file works in that
host and loads back into the same persona.
"""

from __future__ import annotations

from typing import Any

import yaml

from personae.persona._tools import (
    check_tool_names,
    claude_name,
    split_names,
    split_spawn_entries,
)
from personae.persona.model import ContextMode, Persona, PersonaFileKind
from personae.tools.names import canonical_tool_name, mcp_server_of

__all__ = ["to_claude_code"]


def to_claude_code(persona: Persona) -> str:
    """The Claude Code agent file text for ``persona``."""
    name = persona.name
    if persona.source_kind is PersonaFileKind.PLUGIN:  # `plugin:name` here: the file's name
        name = name.rsplit(":", 1)[-1]
    meta: dict[str, Any] = {"name": name, "description": _description(persona)}
    if persona.tools is not None:
        names = _tool_names(persona)
        raw = persona.tools_as_written
        # the file's own spelling (`A,B`, a YAML list, `[]`) while it names the same entries
        meta["tools"] = raw if raw is not None and _split(raw) == names else ", ".join(names)
    elif persona.claude_tools == ["*"]:  # `tools: '*'` (every tool) as it was written
        meta["tools"] = "*"
    if persona.disallowed_tools:
        meta["disallowedTools"] = ", ".join(_disallowed_names(persona))
    if persona.model is not None:
        meta["model"] = persona.model
    if persona.max_steps is not None:
        meta["maxTurns"] = persona.max_steps
    if persona.skills:
        meta["skills"] = list(persona.skills)
    if persona.mcp_servers:
        servers = dict(persona.mcp_servers)
        # Names only (``mcpServers: [a, b]``) go back out as a list, as Claude Code reads them.
        meta["mcpServers"] = list(servers) if not any(servers.values()) else servers
    # personae fields (Claude Code ignores them; personae reads them back).
    if persona.needs_temp_workspace:
        meta["needs_temp_workspace"] = True
    if persona.context is not ContextMode.BRIEF:
        meta["context"] = persona.context.value
    constraints = persona.constraints.model_dump(exclude_defaults=True)
    if constraints:
        meta["constraints"] = constraints
    sandbox = persona.sandbox.model_dump(exclude_defaults=True)
    if sandbox:
        meta["sandbox"] = sandbox
    if persona.version is not None:
        meta["version"] = persona.version
    for key, value in persona.extra.items():
        meta.setdefault(key, value)
    head = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=10_000)
    body = persona.system_prompt
    return f"---\n{head}---\n\n{body}" if body else f"---\n{head}---\n"


def _split(raw: str | list[str]) -> list[str] | None:
    try:
        return split_names(raw)
    except ValueError:
        return None


def _description(persona: Persona) -> str:
    """The description as the file wrote it (a folded value's final newline) while it is
    still the same text."""
    written = persona.description_as_written
    if written is not None and written.split() == persona.description.split():
        return written
    return persona.description


def _tool_names(persona: Persona) -> list[str]:
    """The ``tools`` entries to write: the source file's own spelling and order while
    they still describe the persona's tools (``Agent`` stays ``Agent``, ``MultiEdit``
    stays ``MultiEdit``), else each tool's Claude Code name."""
    tools = persona.tools or []
    written = persona.claude_tools
    if written is not None:
        unavailable = [n for n in written if n in persona.unavailable_tools]
        plain, spawn = split_spawn_entries(
            [n for n in written if n not in persona.unavailable_tools]
        )
        kept = [canonical_tool_name(n) for n in plain]
        if (
            list(dict.fromkeys(kept)) == tools
            and unavailable == persona.unavailable_tools
            and (spawn or None) == (persona.subagents or None)
        ):
            return written
    names = [claude_name(t) for t in tools]
    if persona.subagents and "agent" in tools:  # the spawn list in Claude Code's syntax
        names[tools.index("agent")] = f"Agent({', '.join(persona.subagents)})"
    return names + list(persona.unavailable_tools)


def _disallowed_names(persona: Persona) -> list[str]:
    """The ``disallowedTools`` entries to write (as written while still the same set)."""
    written = persona.claude_disallowed_tools
    if written is not None:
        servers = {s for n in written if (s := mcp_server_of(n)) is not None}
        check = check_tool_names(written, servers, deny=True)
        if set(check.tools) | set(check.unavailable) == set(persona.disallowed_tools):
            return written
    return [claude_name(t) for t in persona.disallowed_tools]
