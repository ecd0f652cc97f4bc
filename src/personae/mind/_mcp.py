"""The only module that touches the MCP SDK (mcp 2.x ``MCPServer``).

Tools return TypedDicts so hosts get the packet as structured content and the
text content carries the same JSON (a ``-> str`` tool would be wrapped as
``{"result": "<json>"}``, which breaks hosts and the gate).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

import anyio
from anyio.streams.memory import MemoryObjectSendStream
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.shared._stream_protocols import ReadStream
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCRequest

from personae._version import VERSION
from personae.errors import PersonaeError
from personae.mind._tooldocs import DESCRIPTIONS, INSTRUCTIONS
from personae.mind.bootstraps import HostCall
from personae.mind.packet import BootstrapPacket, MindContext
from personae.mind.results import (
    MemoryFile,
    MemoryList,
    ObserveResult,
    RecallResult,
    RefreshResult,
    WriteResult,
)
from personae.mind.service import MindService

__all__ = ["build_server", "host_call", "probe_stdio", "run_http", "run_stdio", "tool_names"]

_T = TypeVar("_T")

MAX_HTTP_BODY = 32 * 1024 * 1024
"""Largest HTTP request body accepted (the SDK default is 4 MiB).

Oversized tool input must reach the tool, which answers with a tool error
naming its limit (``is_error``), instead of the transport refusing the
request with HTTP 413, which clients see as a protocol error."""


def _guard(fn: Callable[..., _T], *args: Any) -> _T:
    try:
        return fn(*args)
    except PersonaeError as exc:
        raise ToolError(str(exc)) from exc


def host_call(ctx: Context) -> HostCall:
    """What the host sent with this tool call: its client name and the call's ``_meta``."""
    try:
        request = ctx.request_context
    except ValueError:  # called outside a request (in-process tests)
        return HostCall()
    params = request.session.client_params
    client = params.client_info.name if params is not None else None
    return HostCall(client=client, meta=dict(request.meta or {}))


async def tool_names(server: MCPServer) -> list[str]:
    """Names of the tools registered on ``server``."""
    return [tool.name for tool in await server.list_tools()]


def build_server(service: MindService, *, name: str = "personae") -> MCPServer:
    """An MCPServer exposing ``service`` as the mind tools."""
    server: MCPServer = MCPServer(
        name, instructions=INSTRUCTIONS, log_level="WARNING", version=VERSION
    )

    async def bootstrap_session(session_id: str | None = None, *, ctx: Context) -> BootstrapPacket:
        return _guard(service.bootstrap, session_id, await tool_names(server), host_call(ctx))

    def get_system_prompt(*, ctx: Context) -> str:
        return service.system_prompt(host_call(ctx))

    def refresh_persona() -> RefreshResult:
        return _guard(service.refresh)

    def context() -> MindContext:
        return _guard(service.context)

    def list_memory_files(type: str | None = None, offset: int = 0, limit: int = 200) -> MemoryList:
        return _guard(service.list_memory_files, type, offset, limit)

    def read_memory_file(name: str) -> MemoryFile:
        return _guard(service.read_memory_file, name)

    def write_memory_file(name: str, content: str) -> WriteResult:
        return _guard(service.write_memory_file, name, content)

    def observe(tool_name: str, args: dict[str, Any] | str, result: Any = None) -> ObserveResult:
        return _guard(service.observe, tool_name, args, result)

    def reflect(
        observation: str, kind: Literal["user_said", "time_passed", "ambient", "internal"]
    ) -> ObserveResult:
        return _guard(service.reflect, observation, kind)

    def recall(query: str, k: int = 5, facet: str | None = None) -> RecallResult:
        return _guard(service.recall, query, k, facet)

    for fn in (
        bootstrap_session,
        get_system_prompt,
        refresh_persona,
        context,
        list_memory_files,
        read_memory_file,
        write_memory_file,
        observe,
        reflect,
        recall,
    ):
        server.add_tool(fn, name=fn.__name__, description=DESCRIPTIONS[fn.__name__])
    return server


FALLBACK_GRACE = 0.25
"""Seconds the stdio server waits, after a first request of the 2026-07-28 protocol, for
an ``initialize`` the client already sent behind it (see :func:`_drop_abandoned_opening`)."""
_PROTOCOL_META = "io.modelcontextprotocol/protocolVersion"

_Item = SessionMessage | Exception


def _request(item: _Item) -> JSONRPCRequest | None:
    if isinstance(item, SessionMessage) and isinstance(item.message, JSONRPCRequest):
        return item.message
    return None


def _is_modern(item: _Item) -> bool:
    request = _request(item)
    meta = (request.params or {}).get("_meta") if request is not None else None
    return (
        request is not None
        and request.method != "initialize"
        and _PROTOCOL_META in (meta if isinstance(meta, dict) else {})
    )


def _is_initialize(item: _Item) -> bool:
    request = _request(item)
    return request is not None and request.method == "initialize"


async def _drop_abandoned_opening(
    source: ReadStream[_Item], sink: MemoryObjectSendStream[_Item]
) -> None:
    """Relay the client's messages, minus a 2026-07-28 opening the client gave up on.

    A client that speaks both protocol eras (Copilot CLI 1.0) first sends
    ``server/discover`` and, when no answer comes within about 10 s, falls back to the
    ``initialize`` handshake on the same pipe. A server that starts slower than that (a
    loaded machine) reads both; the SDK lets the first request choose the era and then
    refuses the ``initialize``, and the host drops the server for the whole session (no
    bootstrap tool, so the gate blocks every gated tool). When an ``initialize`` is already
    waiting behind a 2026-07-28 opening, the opening requests are dropped and the
    handshake the client now waits for is served.
    """
    async with sink:
        held: list[_Item] = []
        try:
            held.append(await source.receive())
            if _is_modern(held[0]):
                with anyio.move_on_after(FALLBACK_GRACE):
                    while not _is_initialize(held[-1]):
                        held.append(await source.receive())
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            pass
        if any(_is_initialize(item) for item in held):
            held = [item for item in held if not _is_modern(item)]
        for item in held:
            await sink.send(item)
        try:
            async for item in source:
                await sink.send(item)
        except anyio.ClosedResourceError:
            return


async def _serve_stdio(server: MCPServer) -> None:
    low = server._lowlevel_server
    async with stdio_server() as (read_stream, write_stream):
        sink, relayed = anyio.create_memory_object_stream[_Item](16)
        async with anyio.create_task_group() as group:
            group.start_soon(_drop_abandoned_opening, read_stream, sink)
            async with relayed:
                await low.run(relayed, write_stream, low.create_initialization_options())
            group.cancel_scope.cancel()


def run_stdio(server: MCPServer) -> None:
    """Serve over stdio until the client closes the stream (a client's abandoned
    2026-07-28 opening is dropped when it has fallen back to ``initialize``)."""
    anyio.run(_serve_stdio, server)


def run_http(server: MCPServer, host: str, port: int) -> None:
    """Serve streamable HTTP at ``http://host:port/mcp``."""
    print(f"personae: mind server on http://{host}:{port}/mcp", file=sys.stderr, flush=True)
    server.run("streamable-http", host=host, port=port, max_request_body_size=MAX_HTTP_BODY)


async def probe_stdio(
    command: str, args: list[str], *, cwd: Path, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Start a stdio server, call bootstrap_session, return its structured content.

    Raises RuntimeError when the call fails or returns no structured content.
    """
    params = StdioServerParameters(command=command, args=args, cwd=str(cwd), env=env)
    with open(os.devnull, "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            result = await session.call_tool("bootstrap_session", {})
    if result.is_error or not isinstance(result.structured_content, dict):
        text = result.content[0].text if result.content else "no content"  # type: ignore[union-attr]
        raise RuntimeError(f"bootstrap_session failed: {text}")
    return dict(result.structured_content)
