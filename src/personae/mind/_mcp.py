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

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

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


def run_stdio(server: MCPServer) -> None:
    """Serve over stdio until the client closes the stream."""
    server.run("stdio")


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
