"""`personae serve`: the mind MCP server."""

from __future__ import annotations

import typer

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``serve`` to the main app."""
