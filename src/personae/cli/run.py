"""`personae run`, `personae demo` and `personae runs ...`."""

from __future__ import annotations

import typer

__all__ = ["register", "runs_app"]

runs_app = typer.Typer(help="Stored runs and their events.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add ``run`` and ``demo`` to the main app."""
