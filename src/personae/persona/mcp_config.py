"""MCP server entries of a persona: which servers, their parsed config, which tools are granted.

Config entries follow Claude Code's ``.mcp.json`` shape: stdio servers
(``command``, ``args``, ``env``, optional ``cwd``) and remote servers
(``type: http`` or ``sse`` with ``url`` and ``headers``). ``${VAR}`` and
``${VAR:-default}`` are expanded from the environment in every string, as
Claude Code does. Tool names are ``mcp__<server>__<tool>``; a persona's
``tools`` may grant one tool, a whole server (``mcp__<server>`` or
``mcp__<server>__*``), or everything (``tools`` absent).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from personae.errors import ConfigError
from personae.persona.model import Persona
from personae.tools.names import MCP_TOOL_NAME, mcp_entry_covers, split_tool_spec

__all__ = [
    "McpServerSpec",
    "parse_server",
    "servers_for",
    "tool_granted",
]

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,48}$")


@dataclass(frozen=True, kw_only=True)
class McpServerSpec:
    """One server entry, checked and with variables expanded."""

    name: str
    """Server name (the ``<server>`` of ``mcp__<server>__<tool>``)."""
    transport: Literal["stdio", "http", "sse"]
    """How to reach it."""
    command: str = ""
    """Executable (stdio)."""
    args: tuple[str, ...] = ()
    """Arguments (stdio)."""
    env: dict[str, str] = field(default_factory=dict)
    """Variables set for the server process; only these and a safe base set are passed."""
    cwd: str | None = None
    """Working directory (stdio; default: the project root)."""
    url: str = ""
    """Endpoint (http/sse)."""
    headers: dict[str, str] = field(default_factory=dict)
    """HTTP headers (http/sse)."""


def _expand(value: str, where: str) -> str:
    def sub(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        got = os.environ.get(name)
        if got is None or (got == "" and default is not None):
            if default is None:
                raise ConfigError(f"environment variable {name!r} is not set", field=where)
            return default
        return got

    return _VAR.sub(sub, value)


def _str_map(raw: Any, where: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"must be a mapping, got {type(raw).__name__}", field=where)
    out: dict[str, str] = {}
    for key, value in raw.items():
        if not isinstance(value, str | int | float | bool):
            raise ConfigError(f"{key}: must be a string", field=where)
        text = value if isinstance(value, str) else str(value).lower()
        out[str(key)] = _expand(text, f"{where}.{key}")
    return out


def parse_server(name: str, config: Any) -> McpServerSpec:
    """Check one server entry and expand its variables.

    Raises:
        ConfigError: naming the field that is wrong (the caller turns it into a warning).
    """
    if not _SERVER_NAME.match(name):
        raise ConfigError(f"bad server name {name!r} (letters, digits, _ and -)")
    if not isinstance(config, Mapping) or not config:
        raise ConfigError("no configuration (expected command/args/env or type/url)")
    kind = config.get("type") or ("stdio" if "command" in config else "http")
    if kind == "streamable-http":
        kind = "http"
    if kind not in ("stdio", "http", "sse"):
        raise ConfigError(f"unknown type {kind!r} (stdio, http or sse)", field="type")
    if kind == "stdio":
        command = config.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ConfigError("stdio server needs a non-empty 'command'", field="command")
        args = config.get("args") or []
        if not isinstance(args, list) or not all(isinstance(a, str | int | float) for a in args):
            raise ConfigError("must be a list of strings", field="args")
        cwd = config.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise ConfigError("must be a string", field="cwd")
        return McpServerSpec(
            name=name,
            transport="stdio",
            command=_expand(command.strip(), "command"),
            args=tuple(_expand(str(a), f"args[{i}]") for i, a in enumerate(args)),
            env=_str_map(config.get("env"), "env"),
            cwd=_expand(cwd, "cwd") if cwd else None,
        )
    url = config.get("url")
    if not isinstance(url, str) or not url.strip():
        raise ConfigError(f"{kind} server needs a 'url'", field="url")
    url = _expand(url.strip(), "url")
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"url must start with http:// or https://, got {url!r}", field="url")
    return McpServerSpec(
        name=name,
        transport="sse" if kind == "sse" else "http",
        url=url,
        headers=_str_map(config.get("headers"), "headers"),
    )


def tool_granted(persona: Persona, server: str, tool: str) -> bool:
    """Whether ``persona`` may call ``tool`` of ``server`` (its ``tools`` minus disallowed).

    ``tools`` absent grants every tool of the persona's servers. An entry with
    an argument pattern (``mcp__s__t(...)``) cannot be enforced: as an allow
    entry it grants nothing, as a deny entry it denies the whole tool.
    """
    for spec in persona.disallowed_tools:
        if mcp_entry_covers(split_tool_spec(spec)[0], server, tool):
            return False
    if persona.tools is None:
        return True
    for spec in persona.tools:
        name, pattern = split_tool_spec(spec)
        if pattern is None and mcp_entry_covers(name, server, tool):
            return True
    return False


def servers_for(persona: Persona, project: Mapping[str, Any]) -> dict[str, Any]:
    """The servers to start for ``persona``: name -> raw config (``None`` when unconfigured).

    Its own ``mcpServers`` (an inline entry, or a name referring to a project
    server) when its ``tools`` are absent; otherwise only servers its ``tools``
    name (its own or the project's). Servers denied as a whole are left out.
    """
    names: list[str] = list(persona.mcp_servers)
    if persona.tools is not None:
        named: list[str] = []
        for spec in persona.tools:
            name, pattern = split_tool_spec(spec)
            match = MCP_TOOL_NAME.match(name)
            if match and pattern is None and match.group("server") not in named:
                named.append(match.group("server"))
        names = named
    denied = {
        m.group("server")
        for spec in persona.disallowed_tools
        if (m := MCP_TOOL_NAME.match(split_tool_spec(spec)[0])) and m.group("tool") in (None, "*")
    }
    out: dict[str, Any] = {}
    for name in names:
        if name in denied:
            continue
        own = persona.mcp_servers.get(name)
        out[name] = own if own else project.get(name)
    return out
