"""Export a persona as a Claude Code agent file (Markdown + YAML frontmatter).

Claude Code reads the fields it knows (``name``, ``description``, ``tools``,
``disallowedTools``, ``model``, ``maxTurns``, ``skills``, ``mcpServers``) and
ignores the personae fields written beside them, so the file works in that
host and loads back into the same persona.
"""

from __future__ import annotations

from typing import Any

import yaml

from personae.persona._tools import claude_name
from personae.persona.model import ContextMode, Persona

__all__ = ["to_claude_code"]


def to_claude_code(persona: Persona) -> str:
    """The Claude Code agent file text for ``persona``."""
    meta: dict[str, Any] = {"name": persona.name, "description": persona.description}
    if persona.tools is not None:
        names = [claude_name(t) for t in persona.tools] + list(persona.unavailable_tools)
        meta["tools"] = ", ".join(names)
    if persona.disallowed_tools:
        meta["disallowedTools"] = ", ".join(claude_name(t) for t in persona.disallowed_tools)
    if persona.model is not None:
        meta["model"] = persona.model
    if persona.max_steps is not None:
        meta["maxTurns"] = persona.max_steps
    if persona.skills:
        meta["skills"] = list(persona.skills)
    if persona.mcp_servers:
        meta["mcpServers"] = dict(persona.mcp_servers)
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
