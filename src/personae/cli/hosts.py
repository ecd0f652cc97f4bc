"""`personae hosts ...`, `personae hook ...` and `personae doctor`."""

from __future__ import annotations

import typer

__all__ = ["app", "hook_app", "register"]

app = typer.Typer(help="Host instruction files and hooks.", no_args_is_help=True)
hook_app = typer.Typer(help="Host hook gates.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add ``doctor`` to the main app."""
