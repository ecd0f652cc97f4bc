"""The tools a run works with: one toolset, its names, and how to rebuild it on another root."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_ai.toolsets import AbstractToolset

from personae.persona.model import Persona

__all__ = ["ToolBox", "narrow_names"]


@dataclass(frozen=True, kw_only=True)
class ToolBox:
    """A toolset plus the names it offers.

    ``rebase`` builds the same tools confined to another workspace root (used
    for sub-agents with ``needs_temp_workspace``); ``None`` when the tools do
    not depend on a workspace.
    """

    toolset: AbstractToolset[Any]
    """The pydantic-ai toolset (the same instances are shared with sub-agents)."""
    names: frozenset[str]
    """Tool names the toolset offers."""
    root: Path | None = None
    """Workspace root the tools are confined to."""
    rebase: Callable[[Path], ToolBox] | None = None
    """Same tools on another root."""

    def narrowed(self, names: Iterable[str]) -> frozenset[str]:
        """The subset of ``names`` this box offers (narrow only: never adds a name)."""
        return self.names & frozenset(names)


def narrow_names(persona: Persona, available: frozenset[str]) -> frozenset[str]:
    """A persona's effective tools: its list (``None``: all) within ``available``, minus
    disallowed tools. Never more than ``available``."""
    wanted = available if persona.tools is None else frozenset(persona.tools)
    return (available & wanted) - frozenset(persona.disallowed_tools)
