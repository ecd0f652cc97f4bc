"""A persona's MCP servers, connected for one turn through pydantic-ai's ``MCPToolset``.

:class:`McpHub` starts the servers a persona (or a sub-agent persona) is
configured with the first time it is needed in a turn, shares them between
the worker attempts and sub-agents of that turn, and stops every one of them
when the turn ends (:meth:`McpHub.aclose`, also on error). Tools appear to the
model as ``mcp__<server>__<tool>``; only the tools the persona grants are
listed, and :class:`McpServerToolset` refuses any other name at dispatch.
A sub-agent starts no server of its own: it gets the MCP tools its persona
grants among those its parent has (narrow only), on the parent's processes.

A stdio server process gets only a safe base environment (``HOME``, ``PATH``,
``USER``, ``LOGNAME``, ``SHELL``, ``TERM``; the MCP SDK's default) plus the
variables its entry sets explicitly: nothing else of ours (``LD_PRELOAD``,
``PYTHONPATH``, API keys ...) is passed through. It is tied to the run
(:func:`personae.procs.tied_argv`: parent-death signal, own process group
registered in :data:`personae.procs.RUN_PROCESSES`), so it dies with the run
on any exit, ``kill -9`` included, and its group is killed when it is
stopped. A server that fails to start, or whose entry is wrong, is reported
once through ``on_warning`` and its tools are simply unavailable; the run
goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from pydantic_ai import ToolFailed
from pydantic_ai.tools import RunContext
from pydantic_ai.toolsets import AbstractToolset, CombinedToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from personae.errors import ConfigError
from personae.persona.mcp_config import (
    McpServerSpec,
    parse_server,
    servers_for,
    tool_granted,
)
from personae.persona.model import Persona
from personae.procs import RUN_PROCESSES, tied_argv
from personae.tools.names import mcp_tool_name

__all__ = [
    "DEFAULT_START_TIMEOUT",
    "McpHub",
    "McpServerToolset",
    "OnWarning",
    "inherited_toolset",
]

DEFAULT_START_TIMEOUT = 30.0
"""Seconds a server may take to start and answer the MCP handshake."""

OnWarning = Callable[[str, dict[str, Any]], None]
"""Receives a user-visible warning and its data (server, persona, error)."""


@dataclass
class McpServerToolset(WrapperToolset[Any]):
    """One server's tools renamed ``mcp__<server>__<tool>`` and cut to ``granted``.

    ``granted`` holds the renamed names this agent may call; anything else is
    refused here, at dispatch, whatever the model asks for.
    """

    server: str = ""
    granted: frozenset[str] = frozenset()

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tools = await self.wrapped.get_tools(ctx)
        out: dict[str, ToolsetTool[Any]] = {}
        for name, tool in tools.items():
            full = mcp_tool_name(self.server, name)
            if full in self.granted:
                out[full] = replace(tool, toolset=self, tool_def=replace(tool.tool_def, name=full))
        return out

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        prefix = mcp_tool_name(self.server, "")
        if name not in self.granted or not name.startswith(prefix):
            raise ToolFailed(f"tool {name!r} is not granted to this persona")
        original = name.removeprefix(prefix)
        ctx = replace(ctx, tool_name=original)
        tool = replace(tool, tool_def=replace(tool.tool_def, name=original))
        return await self.wrapped.call_tool(original, tool_args, ctx, tool)


def _combined(
    grants: list[McpServerToolset],
) -> tuple[AbstractToolset[Any] | None, frozenset[str]]:
    """The servers' toolsets that grant something, as one toolset, and the names granted."""
    kept: list[AbstractToolset[Any]] = [g for g in grants if g.granted]
    if not kept:
        return None, frozenset()
    names = frozenset(n for g in grants for n in g.granted)
    return (kept[0] if len(kept) == 1 else CombinedToolset(kept)), names


def inherited_toolset(
    persona: Persona, parent: AbstractToolset[Any] | None, parent_allowed: frozenset[str]
) -> tuple[AbstractToolset[Any] | None, frozenset[str]]:
    """A sub-agent's MCP toolset: what ``persona`` grants of its parent's MCP toolset
    ``parent`` (as :meth:`McpHub.toolset_for` returned it), cut to ``parent_allowed``.

    Narrow only: the same servers (no process is started) and never a name the parent
    lacks.
    """
    if isinstance(parent, McpServerToolset):
        parts = [parent]
    elif isinstance(parent, CombinedToolset):
        parts = [t for t in parent.toolsets if isinstance(t, McpServerToolset)]
    else:
        parts = []
    grants: list[McpServerToolset] = []
    for part in parts:
        prefix = mcp_tool_name(part.server, "")
        granted = {
            name
            for name in part.granted & parent_allowed
            if tool_granted(persona, part.server, name.removeprefix(prefix))
        }
        grants.append(replace(part, granted=frozenset(granted)))
    return _combined(grants)


@dataclass
class _Server:
    spec: McpServerSpec
    toolset: AbstractToolset[Any]
    tools: list[str]
    log: IO[str] | None = None
    pgid: int | None = None


def _stderr_tail(log: IO[str] | None, limit: int = 400) -> str:
    if log is None:
        return ""
    try:
        log.flush()
        log.seek(0)
        text = log.read().strip()
    except (OSError, ValueError):
        return ""
    if not text:
        return ""
    tail = text[-limit:].replace("\n", " | ")
    return f"; server stderr: {tail}"


def _error_text(exc: BaseException) -> str:
    inner: BaseException = exc
    while isinstance(inner, BaseExceptionGroup) and inner.exceptions:
        inner = inner.exceptions[0]
    text = str(inner).strip().splitlines()
    return f"{type(inner).__name__}: {text[0] if text else ''}".rstrip(": ")


def _stop_group(pgid: int | None) -> None:
    """Kill what is left of a stdio server's process group and forget it."""
    if pgid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        RUN_PROCESSES.discard(pgid)


@dataclass(kw_only=True)
class McpHub:
    """The MCP servers of one turn: started on first use, shared, all stopped by :meth:`aclose`."""

    project_servers: Mapping[str, Any] = field(default_factory=dict)
    """Servers configured for the project (``.mcp.json``, plugins), by name."""
    cwd: Path | None = None
    """Working directory of stdio servers without their own ``cwd`` (the project root)."""
    on_warning: OnWarning | None = None
    """Called once per server that cannot be used."""
    start_timeout: float = DEFAULT_START_TIMEOUT
    """Seconds a server may take to start and complete the handshake."""
    _servers: dict[str, _Server] = field(default_factory=dict, repr=False)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)
    _failed: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def running(self) -> list[str]:
        """Names of the servers started and not stopped yet."""
        return sorted(self._servers)

    async def toolset_for(
        self,
        persona: Persona,
        *,
        parent_allowed: frozenset[str] | None = None,
        parent: AbstractToolset[Any] | None = None,
    ) -> tuple[AbstractToolset[Any] | None, frozenset[str]]:
        """The MCP toolset for ``persona`` and the tool names it grants.

        A top-level persona (the worker) gets the tools it grants of its own
        servers, started here on first use. A sub-agent (``parent_allowed``
        given) starts nothing: it gets the tools its persona grants among
        ``parent``'s (its parent's MCP toolset as this method returned it) that
        ``parent_allowed`` has, served by the parent's server processes (narrow
        only; the same tool instances; no ``parent``: nothing). Returns
        ``(None, frozenset())`` when nothing is granted.
        """
        if parent_allowed is not None:
            return inherited_toolset(persona, parent, parent_allowed)
        grants: list[McpServerToolset] = []
        bound: dict[str, _Server] = {}
        for server, config in servers_for(persona, self.project_servers).items():
            running = await self._start(server, config, persona.name)
            if running is None:
                continue
            bound[server] = running
            granted = {
                mcp_tool_name(server, tool)
                for tool in running.tools
                if tool_granted(persona, server, tool)
            }
            grants.append(
                McpServerToolset(running.toolset, server=server, granted=frozenset(granted))
            )
        self._check_named(persona, bound)
        return _combined(grants)

    def _check_named(self, persona: Persona, bound: Mapping[str, _Server]) -> None:
        """Warn about ``mcp__<server>__<tool>`` entries the running server does not offer."""
        for spec in persona.tools or []:
            for server, running in bound.items():
                prefix = mcp_tool_name(server, "")
                tool = spec.removeprefix(prefix)
                if spec.startswith(prefix) and tool != "*" and tool not in running.tools:
                    offered = ", ".join(running.tools) or "(none)"
                    self._warn(
                        f"{persona.name}\0{spec}",
                        f"persona {persona.name} names {spec!r}, which MCP server {server!r} "
                        f"does not offer (it has: {offered})",
                        server=server,
                        persona=persona.name,
                    )

    def _warn(self, key: str, message: str, **data: Any) -> None:
        if key in self._failed:
            return
        self._failed[key] = message
        if self.on_warning is not None:
            self.on_warning(message, data)

    async def _start(self, name: str, config: Any, persona: str) -> _Server | None:
        async with self._lock:  # one process per server entry, even for concurrent callers
            return await self._start_locked(name, config, persona)

    async def _start_locked(self, name: str, config: Any, persona: str) -> _Server | None:
        key = f"{name}\0{json.dumps(config, sort_keys=True, default=str)}"
        if key in self._failed:
            return None
        running = self._servers.get(key)
        if running is not None:
            return running
        if config is None:
            self._warn(
                key,
                f"MCP server {name!r} (persona {persona}) is not configured; its tools are "
                "unavailable",
                server=name,
                persona=persona,
            )
            return None
        try:
            spec = parse_server(name, config)
        except ConfigError as exc:
            self._warn(
                key,
                f"MCP server {name!r} (persona {persona}): bad configuration: {exc}; its tools "
                "are unavailable",
                server=name,
                persona=persona,
                error=str(exc),
            )
            return None
        log: IO[str] | None = None
        toolset: AbstractToolset[Any] | None = None
        pgid: int | None = None
        fd, pidname = tempfile.mkstemp(prefix="personae-mcp-", suffix=".pid")
        os.close(fd)
        pidfile = Path(pidname)
        try:
            toolset, log = self._connect(spec, pidfile)
            try:
                await toolset.__aenter__()
            finally:
                if spec.transport == "stdio":
                    pgid = RUN_PROCESSES.add_pidfile(pidfile)
            try:
                tools = [t.name for t in await toolset.list_tools()]  # type: ignore[attr-defined]
            except BaseException:
                await toolset.__aexit__(None, None, None)
                raise
        except Exception as exc:
            _stop_group(pgid)
            message = _error_text(exc) + _stderr_tail(log)
            if log is not None:
                log.close()
            self._warn(
                key,
                f"MCP server {name!r} (persona {persona}) failed to start: {message}; its tools "
                "are unavailable",
                server=name,
                persona=persona,
                error=message,
            )
            return None
        finally:
            pidfile.unlink(missing_ok=True)
        running = _Server(spec=spec, toolset=toolset, tools=tools, log=log, pgid=pgid)
        self._servers[key] = running
        return running

    def _connect(
        self, spec: McpServerSpec, pidfile: Path
    ) -> tuple[AbstractToolset[Any], IO[str] | None]:
        # local import: fastmcp loads only when a persona has MCP servers
        from fastmcp.client.transports import SSETransport, StdioTransport, StreamableHttpTransport
        from pydantic_ai.mcp import MCPToolset

        options: dict[str, Any] = {
            "tool_error_behavior": "failed",
            "init_timeout": self.start_timeout,
            "id": f"mcp_{spec.name}",
        }
        if spec.transport == "stdio":
            log = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
            cwd = spec.cwd or (str(self.cwd) if self.cwd is not None else None)
            command, args = tied_argv(spec.command, spec.args, pidfile)
            transport = StdioTransport(
                command,
                args,
                env=dict(spec.env),  # merged over the SDK's safe base set only
                cwd=cwd,
                keep_alive=False,  # the process ends when the toolset is closed
                log_file=log,
            )
            return MCPToolset(transport, **options), log
        headers = dict(spec.headers) or None
        remote = (
            SSETransport(spec.url, headers=headers)
            if spec.transport == "sse"
            else StreamableHttpTransport(spec.url, headers=headers)
        )
        return MCPToolset(remote, **options), None

    async def aclose(self) -> None:
        """Stop every server started in this turn (errors while stopping are ignored)."""
        servers, self._servers = list(self._servers.values()), {}
        for server in reversed(servers):
            try:
                await server.toolset.__aexit__(None, None, None)
            except Exception:  # a server that died on its own: nothing left to stop
                pass
            finally:
                _stop_group(server.pgid)
                if server.log is not None:
                    server.log.close()

    async def __aenter__(self) -> McpHub:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
