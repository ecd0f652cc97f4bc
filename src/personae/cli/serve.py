"""`personae serve`: the mind MCP server."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Annotated

import typer

from personae.cli._options import MemoryDirOpt, MindPromptOpt, StoreOpt
from personae.cli._ports import MIND_HTTP_PORT, VIEWER_PORT, pick_port, port_taken
from personae.errors import UsageError
from personae.layout import Layout

__all__ = ["register"]


def _check_port_free(host: str, port: int) -> None:
    """Fail with one line when ``--port`` is already taken (before the server says hello)."""
    reason = port_taken(host, port)
    if reason is not None:
        raise UsageError(f"cannot listen on {host}:{port}: {reason}", field="--port")


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
        port: Annotated[
            int | None,
            typer.Option(
                "--port",
                help=f"Port for --http (default {MIND_HTTP_PORT}, or the next free one when it "
                f"is busy; personae ui defaults to {VIEWER_PORT}).",
            ),
        ] = None,
    ) -> None:
        """Run the mind MCP server (stdio by default; --http for streamable HTTP on loopback)."""
        # local import: CLI start-up (only the command that runs loads what it needs)
        from personae.mind.server import default_paths, serve

        if http and port is not None:
            _check_port_free(host, port)
        chosen = pick_port(host, port, default=MIND_HTTP_PORT, command="personae serve --http")

        # outside any project the mind lives in the user's data folder: the folder a host
        # was started in never becomes a project (the hook gate looks in the same place)
        paths = default_paths(
            Layout.for_mind(Path.cwd()), memory_dir=memory_dir, prompt=prompt, store=store
        )
        if not http and sys.stdin.isatty():
            _interactive_stdio(paths.store)
        serve(paths, http=http, host=host, port=chosen)
