"""MCP server configurations across a handover: what the file carries, what the child starts.

The source side (:func:`carried_configs`) writes the entries of the servers the
source persona runs with, in the ``.mcp.json`` shape (``type``, ``command``,
``args``, ``env``, ``cwd``; ``url``, ``headers``) and never a secret: a value that
is a secret by its name (``API_TOKEN``, ``Authorization``, ``X-Api-Key`` ...) or
by its shape (``sk-...``, ``Bearer ...``, a password in a URL) becomes a
``${NAME}`` reference to a variable of the receiver's environment. An env value
takes its own variable's name (``API_TOKEN: ${API_TOKEN}``); a header, an
argument or a URL takes ``MCP_<SERVER>_<FIELD>`` (``${MCP_GITHUB_AUTHORIZATION}``).
A value that already is a reference (``${GITHUB_TOKEN}``, ``Bearer ${GITHUB_TOKEN}``)
is carried as it is. The receiver expands references from its own environment
when the server starts, so a credential travels only by name.

The receiving side (:func:`reconnect_plan`) decides, server by server, whether the
child starts it. The receiving persona decides first: a server it denies as a whole
(``disallowedTools: mcp__S``) or, when it has a ``tools`` list, one that list does
not name (``mcp__S``, ``mcp__S__*``, ``mcp__S__tool``) is reported and not started.
Then the project's ``handover.mcp_reconnect`` decides where the configuration may
come from: ``project`` (the default) starts only servers the receiving persona or
project configures (``.mcp.json``, plugins, the persona's own ``mcpServers``),
with that configuration, never a command from the file; ``handover`` also starts a
server configured only in the handover file (trust the files you receive first:
such an entry runs a command); ``none`` reconnects to nothing. Nothing here starts
a process: the plan adds entries to the persona, and the run's MCP hub starts them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from personae.handover.schema import ContextHandover
from personae.persona.cast import Cast
from personae.persona.model import Persona
from personae.security.redact import (
    is_secret_name,
    looks_like_secret,
    only_references,
    secret_env_values,
)
from personae.tools.names import MCP_TOOL_NAME, split_tool_spec

__all__ = [
    "ReconnectMode",
    "ReconnectPlan",
    "carried_configs",
    "reconnect_cast",
    "reconnect_plan",
]

ReconnectMode = Literal["project", "handover", "none"]
"""``handover.mcp_reconnect``: where a reconnected server's configuration may come from."""

_KEYS = ("type", "command", "args", "env", "cwd", "url", "headers")
"""The entry fields carried (Claude Code's ``.mcp.json`` shape); others stay behind."""
_PURE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NOT_NAME = re.compile(r"[^A-Za-z0-9]+")


def _variable(*parts: str) -> str:
    """``MCP_<PARTS>`` as an environment variable name (upper case, ``_`` between words)."""
    words = [_NOT_NAME.sub("_", p).strip("_").upper() for p in parts]
    return "_".join(["MCP", *[w for w in words if w]])


def _hidden(name: str, value: str, env_secrets: Mapping[str, str]) -> bool:
    """Whether ``name=value`` must not be written as it is."""
    if only_references(value):
        return False
    if is_secret_name(name) or looks_like_secret(value):
        return True
    return any(secret in value for secret in env_secrets)


def _carry_map(
    server: str, what: str, raw: Any, env_secrets: Mapping[str, str], notes: list[str]
) -> dict[str, str] | None:
    if not isinstance(raw, Mapping):
        return None
    out: dict[str, str] = {}
    for key, item in raw.items():
        text = item if isinstance(item, str) else str(item).lower()
        if _hidden(str(key), text, env_secrets):
            ref = str(key) if what == "env" and _PURE_NAME.match(str(key)) else None
            ref = ref or _variable(server, str(key))
            out[str(key)] = f"${{{ref}}}"
            notes.append(f"{server}.{what}.{key} -> ${{{ref}}}")
        else:
            out[str(key)] = text
    return out


def _carry_one(
    server: str, raw: Mapping[str, Any], env_secrets: Mapping[str, str], notes: list[str]
) -> dict[str, Any]:
    entry: dict[str, Any] = {}
    for key in _KEYS:
        if key not in raw or raw[key] is None:
            continue
        value = raw[key]
        if key in ("env", "headers"):
            carried = _carry_map(server, key, value, env_secrets, notes)
            if carried is not None:
                entry[key] = carried
        elif key == "args" and isinstance(value, Sequence) and not isinstance(value, str):
            args: list[str] = []
            for i, arg in enumerate(value):
                text = str(arg)
                if _hidden("", text, env_secrets):
                    ref = _variable(server, "arg", str(i))
                    notes.append(f"{server}.args[{i}] -> ${{{ref}}}")
                    text = f"${{{ref}}}"
                args.append(text)
            entry[key] = args
        elif isinstance(value, str):
            if key in ("url", "command") and _hidden("", value, env_secrets):
                ref = _variable(server, key)
                notes.append(f"{server}.{key} -> ${{{ref}}}")
                value = f"${{{ref}}}"
            entry[key] = value
    return entry


def carried_configs(
    servers: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The entries a handover carries for ``servers`` (name -> raw entry as configured, with
    its ``${VAR}`` references unexpanded; ``None`` for a name with no entry, left out), and
    one note per value replaced by a reference (``"github.headers.Authorization ->
    ${MCP_GITHUB_AUTHORIZATION}"``). ``environ``: where secret-named variables' values are
    looked for in the entries (default ``os.environ``)."""
    env_secrets = secret_env_values(environ)
    notes: list[str] = []
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(servers):
        raw = servers[name]
        if isinstance(raw, Mapping) and raw:
            out[name] = _carry_one(name, raw, env_secrets, notes)
    return out, notes


@dataclass(frozen=True, kw_only=True)
class ReconnectPlan:
    """What the receiving run does with the source's MCP servers."""

    servers: dict[str, Any] = field(default_factory=dict)
    """Entries to add to the receiving persona's ``mcpServers`` (name -> entry): the run
    starts them with its own servers."""
    started: dict[str, str] = field(default_factory=dict)
    """Server -> where its configuration comes from (``persona``, ``project``,
    ``handover``), for every server reconnected."""
    refused: dict[str, str] = field(default_factory=dict)
    """Server -> why it is not started."""

    def notes(self) -> list[str]:
        """One line per server of the source (reconnected, or why not)."""
        lines = [
            f"MCP server {name!r} of the source reconnected (configuration: {where})"
            for name, where in sorted(self.started.items())
        ]
        lines += [
            f"MCP server {name!r} of the source not started: {why}"
            for name, why in sorted(self.refused.items())
        ]
        return lines


def _denied(persona: Persona, server: str) -> bool:
    for spec in persona.disallowed_tools:
        match = MCP_TOOL_NAME.match(split_tool_spec(spec)[0])
        if match and match.group("server") == server and match.group("tool") in (None, "*"):
            return True
    return False


def _named(persona: Persona, server: str) -> bool:
    """Whether ``persona``'s ``tools`` list names a tool (or all tools) of ``server``."""
    for spec in persona.tools or ():
        name, pattern = split_tool_spec(spec)
        match = MCP_TOOL_NAME.match(name)
        if match and pattern is None and match.group("server") == server:
            return True
    return False


def _allowed(persona: Persona, server: str) -> str | None:
    """Why ``persona`` does not allow ``server`` (``None``: it does)."""
    if _denied(persona, server):
        return f"persona {persona.name} denies it (disallowedTools)"
    if persona.tools is not None and not _named(persona, server):
        return (
            f"persona {persona.name} does not allow it (its tools name no mcp__{server}; "
            f"add mcp__{server} to allow every tool of it)"
        )
    return None


def reconnect_plan(
    persona: Persona | None,
    *,
    names: Sequence[str],
    configs: Mapping[str, Any],
    project_servers: Mapping[str, Any],
    mode: ReconnectMode = "project",
) -> ReconnectPlan:
    """Which of the source's servers (``names`` from ``context.mcpServers``, ``configs`` from
    ``context.mcpServerConfigs``) the run of ``persona`` starts, and with which entry; see the
    module doc for the rules. ``project_servers``: the receiving project's (``.mcp.json``,
    plugins)."""
    plan = ReconnectPlan()
    for server in sorted({*names, *configs}):
        carried = configs.get(server)
        if mode == "none":
            plan.refused[server] = "the project's handover.mcp_reconnect is 'none'"
            continue
        if persona is None:
            plan.refused[server] = "the run has no persona to grant its tools"
            continue
        why = _allowed(persona, server)
        if why is not None:
            plan.refused[server] = why
            continue
        own = persona.mcp_servers.get(server)
        if own:
            plan.started[server] = "the persona's own"
            continue
        local = project_servers.get(server)
        if local:
            plan.servers[server] = local
            differs = isinstance(carried, Mapping) and dict(carried) != dict(local)
            plan.started[server] = "the project's" + (
                "; the source's differs and is not used" if differs else ""
            )
        elif isinstance(carried, Mapping) and carried and mode == "handover":
            plan.servers[server] = dict(carried)
            plan.started[server] = "from the handover file (handover.mcp_reconnect: handover)"
        elif isinstance(carried, Mapping) and carried:
            plan.refused[server] = (
                "configured only in the handover file, and the project's "
                "handover.mcp_reconnect is 'project' (configure it in .mcp.json, or set "
                "handover.mcp_reconnect: handover to start servers handover files configure)"
            )
        else:
            plan.refused[server] = "no configuration for it here, and none in the handover"
    return plan


def reconnect_cast(
    cast: Cast, persona: str | None, handover: ContextHandover, mode: ReconnectMode
) -> tuple[Cast, ReconnectPlan]:
    """``cast`` with ``persona``'s ``mcpServers`` extended by :func:`reconnect_plan` for the
    source servers of ``handover`` (a copy; ``cast`` is not changed), and the plan."""
    found = cast.find(persona) if persona else None
    context = handover.context
    plan = reconnect_plan(
        found, names=context.mcp_servers or (), configs=context.mcp_server_configs or {},
        project_servers=cast.mcp_servers, mode=mode,
    )  # fmt: skip
    if found is None or not plan.servers:
        return cast, plan
    updated = found.model_copy(update={"mcp_servers": {**found.mcp_servers, **plan.servers}})
    personas = {k: (updated if v is found else v) for k, v in cast.personas.items()}
    return dataclasses.replace(cast, personas=personas), plan
