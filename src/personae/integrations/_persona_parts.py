"""What a persona file says about how it runs, read once for every framework adapter:
its own model (``model:``), its MCP servers (``mcpServers:``, or the project's servers
its ``tools`` name) and its step budget (``maxTurns:``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from personae.errors import ConfigError
from personae.models.resolve import ModelSpec, parse_model_spec
from personae.persona import Persona
from personae.persona.mcp_config import McpServerSpec, parse_server, servers_for

__all__ = ["own_model_spec", "server_specs"]


def own_model_spec(persona: Persona) -> ModelSpec | None:
    """The persona's own model (``provider:name``; ``sonnet``/``opus``/``haiku`` as Claude
    Code maps them), or ``None`` when its file names none or says ``inherit``.

    Raises ``ValueError`` naming the persona for a spec that does not parse, and for
    a ``scripted:`` scenario (the replay server needs an owner that stops it: pass
    its model instead)."""
    raw = (persona.model or "").strip()
    if raw in ("", "inherit"):
        return None
    try:
        spec = parse_model_spec(raw, source="model")
    except ConfigError as exc:
        raise ValueError(f"persona {persona.name!r}: {exc}") from exc
    if spec.is_scripted:
        raise ValueError(
            f"persona {persona.name!r}: model {raw!r} is a replay scenario; start a "
            "ScriptedServer and pass its model instead"
        )
    return spec


def server_specs(persona: Persona, project: Mapping[str, Any] | None) -> list[McpServerSpec]:
    """The MCP servers ``persona`` uses, checked, as the team runtime picks them: its own
    ``mcpServers`` (inline entries, or names of ``project`` servers) when it has no
    ``tools`` list, else the servers its ``tools`` name; servers denied whole left out.

    Raises ``ValueError`` naming the persona and the server for a name that no entry
    configures and for an entry that is wrong (the team runtime warns and goes on; a
    framework agent is built once, before anything runs)."""
    specs: list[McpServerSpec] = []
    for name, config in servers_for(persona, project or {}).items():
        if config is None:
            raise ValueError(
                f"persona {persona.name!r}: MCP server {name!r} is not configured (give its "
                "entry in the persona's mcpServers, or pass the project's servers: "
                "mcp_servers=cast.mcp_servers)"
            )
        try:
            specs.append(parse_server(name, config))
        except ConfigError as exc:
            raise ValueError(f"persona {persona.name!r}: MCP server {name!r}: {exc}") from exc
    return specs
