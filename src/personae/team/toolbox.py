"""The tools a run works with: a narrow-only tool subset as a pydantic-ai toolset."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_ai.toolsets import AbstractToolset

from personae.persona.model import Persona
from personae.tools.adapter import to_toolset
from personae.tools.subset import ToolSubset, effective_tool_names
from personae.tools.workspace import Workspace

__all__ = ["ToolBox", "narrow_names"]


@dataclass(frozen=True, kw_only=True)
class ToolBox:
    """A :class:`~personae.tools.subset.ToolSubset` and its pydantic-ai toolset.

    Every call goes through ``subset.dispatch`` (which refuses tools outside
    the subset). :meth:`narrow` cuts a child's box (same tool instances);
    :meth:`rebase` puts the same tools on another workspace root.
    """

    subset: ToolSubset
    """The tools this box may dispatch."""

    @classmethod
    def of(cls, subset: ToolSubset) -> ToolBox:
        """Wrap a subset."""
        return cls(subset=subset)

    @property
    def names(self) -> frozenset[str]:
        """Tool names in the subset."""
        return frozenset(self.subset.names)

    @property
    def root(self) -> Path:
        """The workspace root the tools act on."""
        return self.subset.workspace.root

    @property
    def toolset(self) -> AbstractToolset[Any]:
        """A pydantic-ai toolset dispatching through the subset."""
        return to_toolset(self.subset)

    def narrow(self, names: Iterable[str]) -> ToolBox:
        """The intersection with ``names`` (never widens; same tool instances)."""
        known = [n for n in names if n in self.names]
        return ToolBox(subset=self.subset.narrow(known))

    def rebase(self, root: Path) -> ToolBox:
        """The same tools acting on workspace ``root``."""
        return ToolBox(subset=self.subset.with_workspace(Workspace(root)))


def narrow_names(persona: Persona, available: Iterable[str]) -> frozenset[str]:
    """A persona's effective tools within ``available`` (never more than ``available``)."""
    return frozenset(effective_tool_names(persona, available))
