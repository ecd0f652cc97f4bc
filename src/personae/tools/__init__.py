"""Tools: registry, workspace-confined built-ins, narrow-only subsets, pydantic-ai adapter.

The adapter (``personae.tools.adapter``) imports pydantic-ai and is not
imported here; import it where a toolset is needed.
"""

from personae.tools.base import Tool, ToolContext, ToolLimits
from personae.tools.canonical import canonical_args
from personae.tools.names import BUILTIN_TOOL_NAMES, CLAUDE_TOOL_MAP, canonical_tool_name
from personae.tools.registry import ToolRegistry
from personae.tools.subset import (
    ToolCallRecord,
    ToolRefusedError,
    ToolSubset,
    effective_tool_names,
    unavailable_tool_names,
)
from personae.tools.workspace import Workspace

__all__ = [
    "BUILTIN_TOOL_NAMES",
    "CLAUDE_TOOL_MAP",
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
