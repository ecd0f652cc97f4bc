"""`personae ui`: the local, read-only web viewer (runs, model calls, budgets, chains)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from personae.cli._ports import MIND_HTTP_PORT, VIEWER_PORT, pick_port
from personae.cli._root import ROOT_HELP, project_root
from personae.errors import UsageError

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``ui`` to the main app."""

    @app.command("ui")
    def ui(
        port: Annotated[
            str | None,
            typer.Option(
                metavar="N",
                help=f"Port on 127.0.0.1 (default {VIEWER_PORT}, or the next free one when it is "
                f"busy; 0 picks any free one; personae serve --http defaults to {MIND_HTTP_PORT}).",
            ),
        ] = None,
        root: Annotated[Path | None, typer.Option(help=ROOT_HELP)] = None,
        host: Annotated[
            str, typer.Option(help="Loopback address to bind (other hosts are refused).")
        ] = "127.0.0.1",
    ) -> None:
        """Open a local web viewer of this project's runs, contexts, budgets and chains."""
        # local import: CLI start-up (only the command that runs loads what it needs)
        from personae.ui.server import check_host, serve_viewer

        if port is not None and not port.strip().isdigit():
            raise UsageError(f"{port!r} is not a port number (0-65535)", field="--port")
        given = int(port) if port is not None else None
        if given is None:
            check_host(host)  # a non-loopback --host is refused before any port is probed
        chosen = pick_port(host, given, default=VIEWER_PORT, command="personae ui")
        # read-only: outside any project it shows an empty store and writes nothing
        serve_viewer(root if root is not None else project_root(), port=chosen, host=host)
