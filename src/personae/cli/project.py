"""`personae init`: scaffold a project."""

from __future__ import annotations

import typer

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``init`` to the main app."""
