"""The package version, in one place (the front door, the CLI and the MCP server's
``serverInfo`` read it; a test keeps pyproject.toml's equal to it)."""

from __future__ import annotations

__all__ = ["VERSION"]

VERSION = "0.1.0"
"""personae's version."""
