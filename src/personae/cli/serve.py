"""`personae serve`: the mind MCP server."""

from __future__ import annotations

import os
import signal
import socket
import sys
from pathlib import Path
from typing import Annotated

import typer

from personae.cli._options import MemoryDirOpt, MindPromptOpt, StoreOpt
from personae.cli._root import project_root
from personae.errors import UsageError

__all__ = ["register"]


def _check_port_free(host: str, port: int) -> None:
    """Fail with one line when ``--port`` is already taken (before the server says hello)."""
    if not 1 <= port <= 65535:  # the server reports an out-of-range port
        return
    try:
        family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except OSError:
        return  # the server reports a bad host
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise UsageError(
                f"cannot listen on {host}:{port}: {exc.strerror or exc}", field="--port"
            ) from None


def _interactive_stdio(store: Path) -> None:
    """``serve`` started by hand on a terminal: say what it is; stop at the first Ctrl-C.

    The stdio transport reads stdin in a worker thread that a KeyboardInterrupt does not
    wake (it would wait for Enter), so the first Ctrl-C ends the process at once. Nothing
    is lost: every memory write and store transaction is complete when it returns.
    """
    print(
        "personae serve: MCP server on stdin/stdout (for an MCP client: a host's .mcp.json, "
        f"the MCP Inspector); store {store}. Ctrl-C stops it; --http serves HTTP.",
        file=sys.stderr,
        flush=True,
    )

    def stop(signum: int, frame: object) -> None:
        print("personae: interrupted", file=sys.stderr, flush=True)
        os._exit(130)

    signal.signal(signal.SIGINT, stop)


def register(app: typer.Typer) -> None:
    """Add ``serve`` to the main app."""

    @app.command("serve")
    def serve_command(  # noqa: PLR0917
        memory_dir: MemoryDirOpt = None,
        prompt: MindPromptOpt = None,
        store: StoreOpt = None,
        http: Annotated[
            bool, typer.Option("--http", help="Serve streamable HTTP instead of stdio.")
        ] = False,
        host: Annotated[str, typer.Option("--host", help="Loopback address for --http.")] = (
            "127.0.0.1"
        ),
        port: Annotated[int, typer.Option("--port", help="Port for --http.")] = 8765,
    ) -> None:
        """Run the mind MCP server (stdio by default; --http for streamable HTTP on loopback)."""
        # local import: CLI start-up (only the command that runs loads what it needs)
        from personae.mind.server import default_paths, serve

        if http:
            _check_port_free(host, port)

        paths = default_paths(project_root(), memory_dir=memory_dir, prompt=prompt, store=store)
        if not http and sys.stdin.isatty():
            _interactive_stdio(paths.store)
        serve(paths, http=http, host=host, port=port)
