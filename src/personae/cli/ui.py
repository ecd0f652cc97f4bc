"""`personae ui`: the local, read-only web viewer (runs, model calls, budgets, chains)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from personae.errors import UsageError

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``ui`` to the main app."""

    @app.command("ui")
    def ui(
        port: Annotated[
            str, typer.Option(metavar="N", help="Port on 127.0.0.1 (0 picks a free one).")
        ] = "8765",
        root: Annotated[
            Path | None, typer.Option(help="Project folder (default: the current one).")
        ] = None,
        host: Annotated[
            str, typer.Option(help="Loopback address to bind (other hosts are refused).")
        ] = "127.0.0.1",
    ) -> None:
        """Open a local web viewer of this project's runs, contexts, budgets and chains."""
        # local import: CLI start-up (only the command that runs loads what it needs)
        from personae.ui.server import serve_viewer

        if not port.strip().isdigit():
            raise UsageError(f"{port!r} is not a port number (0-65535)", field="--port")
        serve_viewer(root if root is not None else Path.cwd(), port=int(port), host=host)
