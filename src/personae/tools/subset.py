"""Narrow-only tool subsets, enforced at dispatch, with a call log: a pydantic-ai toolset.

A subset is what one agent may call. A child's subset is cut from its
parent's with :meth:`ToolSubset.narrow` (an intersection: it never widens) and
shares the parent's tool instances. :meth:`ToolSubset.dispatch` refuses any
tool outside the subset, whatever the model asks for, so the restriction does
not depend on what the prompt says.

A subset is itself a pydantic-ai toolset (pass it to ``Agent(toolsets=[...])``):
every call goes through :meth:`ToolSubset.dispatch`, and a
:class:`~personae.errors.ToolError` becomes pydantic-ai's ``ToolFailed`` (the
model sees a failed tool result and can adapt; no retry budget is spent).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from pydantic_ai import RunContext, ToolFailed
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.toolsets.abstract import ToolsetTool
from pydantic_core import SchemaValidator, core_schema

from personae.errors import ToolError, UnknownNameError
from personae.tools.base import Tool, ToolContext, ToolLimits
from personae.tools.names import (
    BUILTIN_TOOL_NAMES,
    canonical_tool_name,
    split_tool_spec,
)
from personae.tools.records import CallLog, ToolCallRecord
from personae.tools.workspace import Workspace

__all__ = [
    "ToolRefusedError",
    "ToolSubset",
    "split_tool_spec",
]

# Arguments are validated by the tool's own parameter model inside dispatch, so
# a bad argument produces the same clear ToolError with or without pydantic-ai.
_ANY_ARGS = SchemaValidator(schema=core_schema.dict_schema(keys_schema=core_schema.str_schema()))


class ToolRefusedError(ToolError):
    """A call to a tool outside the caller's subset."""


OnCall = Callable[[ToolCallRecord], None]


class _Universe(Protocol):
    """Where a subset was cut from (a :class:`~personae.tools.registry.ToolRegistry`)."""

    def names(self) -> list[str]: ...


class ToolSubset(AbstractToolset[Any]):
    """The tools one agent may call, the workspace they act on, and a log of calls."""

    def __init__(
        self,
        tools: Mapping[str, Tool[Any]],
        *,
        universe: _Universe,
        workspace: Workspace,
        limits: ToolLimits,
        on_call: OnCall | None = None,
        dropped: Iterable[str] = (),
        record: bool = True,
    ) -> None:
        self._tools = dict(sorted(tools.items()))
        self._universe = universe
        self.limits = limits
        """Caps the tools apply."""
        self.workspace = workspace
        """Workspace the tools act on."""
        self.on_call = on_call
        """Called with a :class:`ToolCallRecord` after every dispatch."""
        self.dropped: tuple[str, ...] = tuple(dropped)
        """Names asked for when this subset was narrowed that the parent did not have."""
        self.record = record
        """Whether dispatches are logged here (off when a recording wrapper logs them)."""
        self.log = CallLog()
        """Every call dispatched through this subset, in order (when :attr:`record`)."""

    def _derive(
        self,
        tools: Mapping[str, Tool[Any]],
        *,
        workspace: Workspace | None = None,
        limits: ToolLimits | None = None,
        on_call: OnCall | None = None,
        dropped: Iterable[str] = (),
    ) -> ToolSubset:
        return ToolSubset(
            tools,
            universe=self._universe,
            workspace=workspace or self.workspace,
            limits=limits or self.limits,
            on_call=on_call,
            dropped=dropped,
            record=self.record,
        )

    @property
    def id(self) -> str | None:
        """Toolset id (pydantic-ai; needed only for durable execution)."""
        return None

    @property
    def calls(self) -> list[ToolCallRecord]:
        """Every call dispatched through this subset, in order."""
        return self.log.calls

    @property
    def names(self) -> tuple[str, ...]:
        """Tool names in the subset, sorted."""
        return tuple(self._tools)

    @property
    def tools(self) -> list[Tool[Any]]:
        """The tool instances, sorted by name (shared with the parent and registry)."""
        return list(self._tools.values())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and canonical_tool_name(name) in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def __bool__(self) -> bool:
        return True  # an empty subset is still a toolset (pydantic-ai tests toolsets for truth)

    def __repr__(self) -> str:
        return f"ToolSubset({list(self._tools)!r}, workspace={self.workspace!r})"

    def get(self, name: str) -> Tool[Any]:
        """The tool ``name`` if it is in the subset; refused otherwise."""
        tool = self._tools.get(canonical_tool_name(name))
        if tool is None:
            raise self._refusal(name)
        return tool

    def narrow(self, names: Iterable[str] | None, *, on_call: OnCall | None = None) -> ToolSubset:
        """A child subset: this subset intersected with ``names`` (``None`` = all of it).

        It never widens: a known name this subset lacks is not granted and is
        listed in the child's :attr:`dropped`. A name the registry has never
        heard of raises :class:`UnknownNameError` naming the closest. The child
        shares the tool instances and workspace and starts an empty call log.
        """
        if names is None:
            return self._derive(self._tools, on_call=on_call)
        known = set(self._universe.names()) | BUILTIN_TOOL_NAMES
        kept: dict[str, Tool[Any]] = {}
        dropped: list[str] = []
        for raw in names:
            name = canonical_tool_name(raw)
            if name not in known:
                raise UnknownNameError("tool", raw, known)
            if name in self._tools:
                kept[name] = self._tools[name]
            elif name not in dropped:
                dropped.append(name)
        return self._derive(kept, on_call=on_call, dropped=dropped)

    def with_workspace(self, workspace: Workspace) -> ToolSubset:
        """The same tools (same instances) acting on ``workspace`` instead; fresh call log."""
        return self._derive(
            self._tools, workspace=workspace, on_call=self.on_call, dropped=self.dropped
        )

    def with_limits(self, limits: ToolLimits) -> ToolSubset:
        """The same tools (same instances) applying ``limits`` instead; fresh call log."""
        return self._derive(self._tools, limits=limits, on_call=self.on_call, dropped=self.dropped)

    def _refusal(self, name: str) -> ToolRefusedError:
        allowed = ", ".join(self._tools) or "(none)"
        return ToolRefusedError(
            str(name), f"tool {name!r} is not available to this agent (allowed: {allowed})"
        )

    async def dispatch(self, name: str, args: Mapping[str, Any] | None = None) -> str:
        """Run tool ``name`` with ``args`` if it is in the subset.

        Returns the tool's text result. Raises :class:`ToolRefusedError` for a
        tool outside the subset and :class:`ToolError` for any failure (an
        unexpected exception inside a tool is wrapped, never propagated raw).
        Every call, refused or not, is appended to :attr:`calls` and passed to
        :attr:`on_call`.
        """
        started = time.monotonic()
        given = dict(args) if isinstance(args, Mapping) else {}
        tool = self._tools.get(canonical_tool_name(name)) if isinstance(name, str) else None
        try:
            if tool is None:
                raise self._refusal(str(name))
            ctx = ToolContext(workspace=self.workspace, limits=self.limits, tool=tool.name)
            try:
                result = await tool.run(args, ctx)
            except ToolError:
                raise
            except Exception as exc:  # a bug or OS error inside a tool: report, don't crash
                raise ToolError(tool.name, f"failed: {type(exc).__name__}: {exc}") from exc
        except ToolError as exc:
            refused = isinstance(exc, ToolRefusedError)
            self._record(str(name), given, False, exc.message, started, refused=refused)
            raise
        self._record(tool.name, given, True, result, started)
        return result

    def _record(
        self, name: str, args: dict[str, Any], ok: bool, text: str, started: float, **extra: Any
    ) -> None:
        if not self.record:
            return
        record = ToolCallRecord.made(
            name, args, ok=ok, text=text, started=started,
            preview_chars=self.limits.preview_chars, **extra,
        )  # fmt: skip
        self.log.add(record, self.on_call)

    @property
    def failed_calls(self) -> list[ToolCallRecord]:
        """Calls that failed or were refused."""
        return self.log.failed

    @property
    def tools_used(self) -> list[str]:
        """Names of tools that ran (successfully or not), in first-use order."""
        return list(dict.fromkeys(c.tool for c in self.calls if not c.refused))

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        """One pydantic-ai tool definition per tool (name, description, JSON schema)."""
        return {
            tool.name: ToolsetTool(
                toolset=self,
                tool_def=ToolDefinition(
                    name=tool.name,
                    description=tool.description,
                    parameters_json_schema=tool.parameters,
                ),
                max_retries=1,
                args_validator=_ANY_ARGS,
            )
            for tool in self._tools.values()
        }

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        """Dispatch through the subset; a tool error becomes a failed result the model sees."""
        try:
            return await self.dispatch(name, tool_args)
        except ToolError as exc:
            raise ToolFailed(str(exc)) from exc
