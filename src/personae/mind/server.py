"""Public entry points of the mind MCP server.

``create_server`` builds the MCP server for a memory directory, a prompt file
and a store; ``serve`` runs it over stdio (default) or streamable HTTP on a
loopback address.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from mcp.server import MCPServer

from personae.errors import UsageError
from personae.layout import Layout
from personae.mind import _mcp
from personae.mind.bootstraps import bootstrap_scope, nearest_host
from personae.mind.service import MindService
from personae.store.db import Store

__all__ = ["MindPaths", "create_server", "default_paths", "serve"]


@dataclass(frozen=True, kw_only=True)
class MindPaths:
    """Where the mind keeps its files."""

    memory_dir: Path
    """Folder of memory Markdown files (``MEMORY.md`` is the index)."""
    prompt: Path | None
    """The mind contract prompt file (``@include`` lines allowed)."""
    store: Path
    """The SQLite store (catalog cache, journal, recorded bootstraps)."""


def default_paths(
    root: Path | Layout,
    *,
    memory_dir: Path | None = None,
    prompt: Path | None = None,
    store: Path | None = None,
) -> MindPaths:
    """The mind's paths: each one given, else the project's default (``.personae/memory``,
    ``.personae/mind.md``, ``.personae/state.db``; ``root`` may be a :class:`Layout`, such
    as :meth:`Layout.for_mind`'s user-level one outside any project)."""
    layout = root if isinstance(root, Layout) else Layout(root)
    return MindPaths(
        memory_dir=memory_dir or layout.memory,
        prompt=prompt or layout.mind_prompt,
        store=store or layout.state_db,
    )


def create_server(
    paths: MindPaths, *, name: str = "personae", host: tuple[int, int] | None = None
) -> tuple[MCPServer, MindService]:
    """The MCP server and the service behind it (the store opens, and migrates, now).

    ``host`` (pid, start time) is the process that started the server over stdio;
    bootstraps are recorded with it so that host's hook gate can find them.
    """
    service = MindService(
        paths.memory_dir,
        paths.prompt,
        Store(paths.store),
        host=host,
        scope=bootstrap_scope(paths.store),
    )
    return _mcp.build_server(service, name=name), service


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(
    paths: MindPaths, *, http: bool = False, host: str = "127.0.0.1", port: int = 8766
) -> None:
    """Run the server: stdio by default, streamable HTTP on a loopback address with ``http``."""
    if http and not _loopback(host):
        raise UsageError(
            f"--host {host} is not a loopback address; the mind server only listens on "
            "127.0.0.1, ::1 or localhost",
            field="host",
        )
    if http and not 0 < port < 65536:
        raise UsageError(f"--port {port} is out of range (1-65535)", field="port")
    binding = None
    if not http:
        # Over stdio the host (Claude Code, Codex, Copilot CLI) started this server, past
        # any shell or wrapper; its hooks run under the same process: bind bootstraps to it.
        parent = nearest_host()
        if parent is not None and parent.started is not None:
            binding = (parent.pid, parent.started)
    server, _service = create_server(paths, host=binding)
    if http:
        _mcp.run_http(server, host, port)
    else:
        _mcp.run_stdio(server)
