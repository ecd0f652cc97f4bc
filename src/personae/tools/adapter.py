"""A pydantic-ai toolset over a :class:`~personae.tools.subset.ToolSubset`.

Every call goes through :meth:`ToolSubset.dispatch`, so the subset's rule is
enforced on the call itself and every call lands in the subset's log. A
:class:`~personae.errors.ToolError` becomes pydantic-ai's ``ToolFailed``: the
model sees a failed tool result with the message and can adapt; the run does
not crash and no retry budget is spent.

A model that names a tool outside the subset never reaches ``call_tool``:
pydantic-ai answers it with "Unknown tool name ..." and the list of allowed
tools (a retry prompt the model sees). :func:`refused_calls` turns those
answers in a run's messages into :class:`ToolCallRecord` entries so the team
runtime can report them next to the dispatched calls.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic_ai import RunContext, ToolFailed
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.toolsets.abstract import ToolsetTool
from pydantic_core import SchemaValidator, core_schema

from personae.errors import ToolError
from personae.tools.canonical import canonical_args
from personae.tools.subset import ToolCallRecord, ToolSubset

__all__ = ["SubsetToolset", "refused_calls", "to_toolset"]

# Arguments are validated by the tool's own parameter model inside dispatch, so
# a bad argument produces the same clear ToolError with or without pydantic-ai.
_ANY_ARGS = SchemaValidator(schema=core_schema.dict_schema(keys_schema=core_schema.str_schema()))


class SubsetToolset(AbstractToolset[Any]):
    """The tools of one subset as a pydantic-ai toolset (pass it to ``Agent(toolsets=[...])``)."""

    def __init__(self, subset: ToolSubset, *, id: str | None = None, max_retries: int = 1) -> None:
        self.subset = subset
        """The subset every call is dispatched through."""
        self._id = id
        self._max_retries = max_retries

    @property
    def id(self) -> str | None:
        """Toolset id (optional; needed only for durable execution)."""
        return self._id

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        """One tool definition per tool of the subset (name, description, JSON schema)."""
        return {
            tool.name: ToolsetTool(
                toolset=self,
                tool_def=ToolDefinition(
                    name=tool.name,
                    description=tool.description,
                    parameters_json_schema=tool.parameters,
                ),
                max_retries=self._max_retries,
                args_validator=_ANY_ARGS,
            )
            for tool in self.subset.tools
        }

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        """Dispatch through the subset; a tool error becomes a failed result the model sees."""
        try:
            return await self.subset.dispatch(name, tool_args)
        except ToolError as exc:
            raise ToolFailed(str(exc)) from exc


def to_toolset(subset: ToolSubset, *, id: str | None = None) -> SubsetToolset:
    """A pydantic-ai toolset whose every call goes through ``subset.dispatch``."""
    return SubsetToolset(subset, id=id)


def refused_calls(messages: Iterable[ModelMessage], subset: ToolSubset) -> list[ToolCallRecord]:
    """Calls in a run's ``messages`` to tools outside ``subset`` (pydantic-ai refused them).

    Each becomes a ``refused`` :class:`ToolCallRecord`; the subset's own log
    is not changed.
    """
    calls: dict[str, ToolCallPart] = {}
    records: list[ToolCallRecord] = []
    for message in messages:
        if isinstance(message, ModelResponse):
            for part in message.parts:
                if isinstance(part, ToolCallPart):
                    calls[part.tool_call_id] = part
        elif isinstance(message, ModelRequest):
            for rpart in message.parts:
                retry = getattr(rpart, "retry", None)
                if getattr(retry, "cause", None) != "unknown_tool":
                    continue
                call = calls.get(getattr(rpart, "tool_call_id", ""))
                # Exact names: pydantic-ai refuses 'Bash' even when run_shell is offered.
                if call is None or call.tool_name in subset.names:
                    continue
                args = call.args_as_dict()
                text = str(getattr(rpart, "content", ""))
                records.append(
                    ToolCallRecord(
                        tool=call.tool_name,
                        args=args,
                        canonical_args=canonical_args(args),
                        ok=False,
                        result_preview=text[: subset.limits.preview_chars],
                        error=text,
                        refused=True,
                    )
                )
    return records
