"""Tools: registry, workspace-confined built-ins, narrow-only subsets, pydantic-ai adapter."""

from personae.tools.names import BUILTIN_TOOL_NAMES, CLAUDE_TOOL_MAP, canonical_tool_name

__all__ = ["BUILTIN_TOOL_NAMES", "CLAUDE_TOOL_MAP", "canonical_tool_name"]
