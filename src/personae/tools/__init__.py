"""Tools: registry, workspace-confined built-ins, narrow-only subsets as pydantic-ai toolsets.

Every name loads its module on first use: the registry and subsets import pydantic-ai,
the tool base asyncio, and a leaf (``personae.tools.names`` for the persona loader and
hook gate, ``personae.tools.records`` for the run's events) loads only itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from personae._lazy import lazy_front

if TYPE_CHECKING:
    from personae.tools.base import Tool, ToolContext, ToolLimits
    from personae.tools.canonical import canonical_args
    from personae.tools.grants import effective_tool_names, unavailable_tool_names
    from personae.tools.names import BUILTIN_TOOL_NAMES, CLAUDE_TOOL_MAP, canonical_tool_name
    from personae.tools.records import CallLog, ToolCallRecord
    from personae.tools.registry import ToolRegistry
    from personae.tools.subset import ToolRefusedError, ToolSubset
    from personae.tools.workspace import Workspace

_LAZY = {
    "Tool": "personae.tools.base",
    "ToolContext": "personae.tools.base",
    "ToolLimits": "personae.tools.base",
    "canonical_args": "personae.tools.canonical",
    "BUILTIN_TOOL_NAMES": "personae.tools.names",
    "CLAUDE_TOOL_MAP": "personae.tools.names",
    "canonical_tool_name": "personae.tools.names",
    "CallLog": "personae.tools.records",
    "ToolCallRecord": "personae.tools.records",
    "Workspace": "personae.tools.workspace",
    "ToolRegistry": "personae.tools.registry",
    "ToolRefusedError": "personae.tools.subset",
    "ToolSubset": "personae.tools.subset",
    "effective_tool_names": "personae.tools.grants",
    "unavailable_tool_names": "personae.tools.grants",
}

__all__ = [
    "BUILTIN_TOOL_NAMES",
    "CLAUDE_TOOL_MAP",
    "CallLog",
    "Tool",
    "ToolCallRecord",
    "ToolContext",
    "ToolLimits",
    "ToolRefusedError",
    "ToolRegistry",
    "ToolSubset",
    "Workspace",
    "canonical_args",
    "canonical_tool_name",
    "effective_tool_names",
    "unavailable_tool_names",
]


__getattr__ = lazy_front(__name__, _LAZY)
