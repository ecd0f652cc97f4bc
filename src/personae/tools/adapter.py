"""Calls pydantic-ai refused before they reached a toolset, read from a run's messages.

A model that names a tool it was not offered never reaches ``call_tool``:
pydantic-ai answers it with "Unknown tool name ..." and the list of offered
tools (a retry prompt the model sees). :func:`refused_tool_calls` finds those
calls in a run's messages; :func:`refused_calls` turns them into refused
:class:`~personae.tools.records.ToolCallRecord` entries for a subset.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    ToolCallPart,
)

from personae.tools.records import ToolCallRecord
from personae.tools.subset import ToolSubset

__all__ = ["refused_calls", "refused_tool_calls"]


def refused_tool_calls(
    messages: Iterable[ModelMessage], offered: Container[str]
) -> Iterator[tuple[ToolCallPart, str]]:
    """Each call in ``messages`` to a tool not in ``offered`` that pydantic-ai answered with a
    retry prompt instead of running it, with the text the model was told.

    Names are compared exactly (pydantic-ai refuses 'Bash' even when run_shell is
    offered); the output tools (``final_result...``) are never listed.
    """
    calls: dict[str, ToolCallPart] = {}
    for message in messages:
        if isinstance(message, ModelResponse):
            for part in message.parts:
                if isinstance(part, ToolCallPart):
                    calls[part.tool_call_id] = part
        elif isinstance(message, ModelRequest):
            for rpart in message.parts:
                cause = getattr(getattr(rpart, "retry", None), "cause", None)
                if cause != "unknown_tool" and not isinstance(rpart, RetryPromptPart):
                    continue
                call = calls.get(str(getattr(rpart, "tool_call_id", "")))
                if call is None or call.tool_name in offered:
                    continue
                if call.tool_name.startswith("final_result"):
                    continue
                yield call, str(getattr(rpart, "content", ""))


def refused_calls(messages: Iterable[ModelMessage], subset: ToolSubset) -> list[ToolCallRecord]:
    """Calls in a run's ``messages`` to tools outside ``subset`` (pydantic-ai refused them).

    Each becomes a ``refused`` :class:`ToolCallRecord`; the subset's own log
    is not changed.
    """
    return [
        ToolCallRecord.made(
            call.tool_name,
            call.args_as_dict(),
            ok=False,
            text=text,
            refused=True,
            preview_chars=subset.limits.preview_chars,
        )
        for call, text in refused_tool_calls(messages, subset.names)
    ]
