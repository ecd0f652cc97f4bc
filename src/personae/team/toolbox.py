"""The tools a run works with: a narrow-only tool subset as a pydantic-ai toolset.

Also the ``run_shell`` sandbox grants of a persona (:func:`persona_limits`)
and their narrow-only form for a sub-agent (:func:`narrow_sandbox`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic_ai.toolsets import AbstractToolset

from personae.persona.model import Persona
from personae.project import SandboxConfig
from personae.tools.adapter import to_toolset
from personae.tools.base import ToolLimits
from personae.tools.sandbox import expand_allowed
from personae.tools.subset import ToolSubset, effective_tool_names
from personae.tools.workspace import Workspace

__all__ = ["ToolBox", "narrow_names", "narrow_sandbox", "persona_limits"]


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

    def with_limits(self, limits: ToolLimits) -> ToolBox:
        """The same tools applying ``limits`` (a sub-agent's own sandbox grants)."""
        return ToolBox(subset=self.subset.with_limits(limits))


def narrow_names(persona: Persona, available: Iterable[str]) -> frozenset[str]:
    """A persona's effective tools within ``available`` (never more than ``available``)."""
    return frozenset(effective_tool_names(persona, available))


def persona_limits(
    config: SandboxConfig, persona: Persona | None, base: ToolLimits | None = None
) -> ToolLimits:
    """``base`` with the ``run_shell`` sandbox the project config and ``persona`` allow.

    Either grant is enough: network if the config or the persona allows it;
    the config's allowed paths plus the persona's.
    """
    network = config.network or (persona is not None and persona.sandbox.network)
    paths = [*config.allow_paths, *(persona.sandbox.allow_paths if persona else [])]
    return replace(
        base or ToolLimits(),
        shell_sandbox=config.mode,
        shell_network=network,
        shell_allow_paths=tuple(paths),
    )


def narrow_sandbox(parent: ToolLimits, wanted: ToolLimits) -> ToolLimits:
    """A sub-agent's sandbox: its own grants (``wanted``) cut to what ``parent`` has.

    Network only if both allow it; an allowed path only if it is one of the
    parent's or lies under one (``~`` expanded). Every other limit is the
    parent's: a child never gets more than its parent.
    """
    home = os.path.expanduser("~")
    roots = expand_allowed(parent.shell_allow_paths, home)
    kept = [
        raw
        for raw in wanted.shell_allow_paths
        if any(
            path == root or path.startswith(root.rstrip("/") + "/")
            for path in expand_allowed([raw], home)
            for root in roots
        )
    ]
    return replace(
        parent,
        shell_network=parent.shell_network and wanted.shell_network,
        shell_allow_paths=tuple(kept),
    )
