"""The tool registry: every tool a run can use, bound to a workspace and limits."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from personae.errors import UnknownNameError, UsageError
from personae.tools._shell import check_env_allow
from personae.tools.base import Tool, ToolLimits
from personae.tools.builtin import builtin_tools
from personae.tools.names import canonical_tool_name
from personae.tools.records import ToolCallRecord
from personae.tools.subset import ToolSubset
from personae.tools.workspace import Workspace

__all__ = ["ToolRegistry"]


class ToolRegistry:
    """Named tools plus the workspace and limits they run with.

    The registry is the universe of tool names: subsets are cut from it, and a
    name it does not hold is an :class:`~personae.errors.UnknownNameError`.
    """

    def __init__(self, workspace: Workspace, *, limits: ToolLimits | None = None) -> None:
        self.workspace = workspace
        """Default workspace for subsets cut from this registry."""
        self.limits = limits if limits is not None else ToolLimits()
        """Caps every tool applies."""
        check_env_allow(self.limits.shell_env_allow)
        self._tools: dict[str, Tool[Any]] = {}

    @classmethod
    def builtin(cls, workspace: Workspace, *, limits: ToolLimits | None = None) -> ToolRegistry:
        """A registry holding every built-in tool (read_file ... web_fetch)."""
        registry = cls(workspace, limits=limits)
        for tool in builtin_tools():
            registry.register(tool)
        return registry

    def register(self, tool: Tool[Any]) -> Tool[Any]:
        """Add ``tool``; a second tool with the same name is a :class:`UsageError`."""
        if tool.name in self._tools:
            raise UsageError(f"tool {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        return tool

    def names(self) -> list[str]:
        """Registered tool names, sorted."""
        return sorted(self._tools)

    def get(self, name: str) -> Tool[Any]:
        """The tool called ``name`` (Claude Code names such as ``Read`` are mapped).

        Raises:
            UnknownNameError: no such tool; the message names the closest one.
        """
        tool = self._tools.get(canonical_tool_name(name))
        if tool is None:
            raise UnknownNameError("tool", name, self._tools)
        return tool

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and canonical_tool_name(name) in self._tools

    def __iter__(self) -> Iterator[Tool[Any]]:
        return iter([self._tools[n] for n in self.names()])

    def __len__(self) -> int:
        return len(self._tools)

    def subset(
        self,
        names: Iterable[str] | None = None,
        *,
        on_call: Callable[[ToolCallRecord], None] | None = None,
        record: bool = True,
    ) -> ToolSubset:
        """A :class:`~personae.tools.subset.ToolSubset` of ``names`` (``None`` = every tool).

        Unknown names raise :class:`UnknownNameError` naming the closest tool.
        ``record=False`` keeps no call log in the subset and its children (a
        recording wrapper around them logs the calls instead).
        """
        tools = {t.name: t for t in (self if names is None else map(self.get, names))}
        return ToolSubset(
            tools, universe=self, workspace=self.workspace, limits=self.limits,
            on_call=on_call, record=record,
        )  # fmt: skip
