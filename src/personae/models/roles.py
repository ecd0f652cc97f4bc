"""The marker that names a team role in its instructions."""

from __future__ import annotations

__all__ = ["ROLE_MARKER"]

ROLE_MARKER = "personae-role: {role}"
"""Marker every team role puts in its instructions (lets scenarios match a role)."""
