"""personae inside pydantic-ai (``pip install 'personae[pydantic-ai]'``).

- :func:`persona_agent`: a persona becomes a pydantic-ai ``Agent`` whose
  instructions are the persona's prompt verbatim and whose tools are the
  parent's toolset narrowed to the persona's tools (narrow only: a persona
  never gains a tool its parent lacks; a hidden tool cannot be called).
- :class:`FitHistory`: a history processor (pydantic-ai's ``ProcessHistory``
  capability) that fits the message
  history to a token budget with personae's exchange rules (a tool call is
  kept or dropped with all of its results; the latest user prompt is always
  kept; counts are exact for the model's tokenizer).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any, cast

from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model
from pydantic_ai.tools import RunContext, ToolDefinition
from pydantic_ai.toolsets import AbstractToolset

from personae.context.fit_items import Fitted, fit_items
from personae.context.messages import ChatMessage, ChatToolCall
from personae.persona import Persona
from personae.tokens import TokenCounter, counter_for_model
from personae.tools.grants import effective_tool_names
from personae.tools.names import canonical_tool_name

__all__ = ["FitHistory", "count_model_messages", "persona_agent"]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False, sort_keys=True, default=str)


def _request_part(part: Any) -> ChatMessage:
    if isinstance(part, SystemPromptPart):
        return ChatMessage("system", part.content)
    if isinstance(part, ToolReturnPart):
        return ChatMessage("tool", _text(part.content), tool_call_id=part.tool_call_id)
    if isinstance(part, RetryPromptPart) and part.tool_name is not None:
        return ChatMessage("tool", _text(part.content), tool_call_id=part.tool_call_id)
    if isinstance(part, UserPromptPart | RetryPromptPart):
        return ChatMessage("user", _text(part.content))
    return ChatMessage("user", _text(getattr(part, "content", "")))


def _response(message: ModelResponse) -> ChatMessage:
    text = "".join(p.content for p in message.parts if isinstance(p, TextPart))
    calls = tuple(
        ChatToolCall(id=p.tool_call_id, name=p.tool_name, arguments=p.args_as_json_str())
        for p in message.parts
        if isinstance(p, ToolCallPart)
    )
    return ChatMessage("assistant", text, tool_calls=calls)


class _Adapter:
    def parts(self, item: ModelMessage) -> list[ChatMessage]:
        if isinstance(item, ModelResponse):
            return [_response(item)]
        return [_request_part(p) for p in item.parts] or [ChatMessage("user", "")]

    def rebuild(
        self, item: ModelMessage, keep: list[int], texts: dict[int, str]
    ) -> ModelMessage | None:
        if isinstance(item, ModelResponse):
            if 0 not in texts:
                return item
            others = [p for p in item.parts if not isinstance(p, TextPart)]
            return dataclasses.replace(item, parts=[TextPart(texts[0]), *others])
        parts = []
        for j in keep:
            part = item.parts[j]
            if j in texts and isinstance(part, ToolReturnPart | RetryPromptPart | UserPromptPart):
                part = cast(Any, dataclasses.replace)(part, content=texts[j])
            parts.append(part)
        return dataclasses.replace(item, parts=parts) if parts else None


def count_model_messages(messages: Sequence[ModelMessage], *, model: str | None = None) -> int:
    """Exact tokens of ``messages`` with personae's counter for ``model``.

    Counts every part's text, tool names, call ids and arguments, plus 3
    framing tokens per part, as chat APIs add them per message.
    """
    counter = counter_for_model(model)
    adapter = _Adapter()
    return sum(_part_tokens(m, counter) for item in messages for m in adapter.parts(item))


def _part_tokens(message: ChatMessage, counter: TokenCounter) -> int:
    pieces = [message.role, message.content, message.tool_call_id or ""]
    pieces += [f"{c.id} {c.name} {c.arguments}" for c in message.tool_calls]
    return sum(counter.count(p) for p in pieces if p) + 3


class FitHistory:
    """``Agent(..., capabilities=[ProcessHistory(FitHistory(budget, model=...))])``.

    Before every model request the history is fitted to ``budget`` tokens
    (counted by :func:`count_model_messages` for ``model``). ``last`` holds the
    latest fit (tokens, items dropped, outputs shortened).
    """

    def __init__(self, budget: int, *, model: str | None = None) -> None:
        self.budget = budget
        self.model = model
        self.last: Fitted[ModelMessage] | None = None
        """The most recent fit."""

    def __call__(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """The fitted history (pydantic-ai calls this before each model request)."""
        fitted = fit_items(
            messages,
            _Adapter(),
            lambda ms: count_model_messages(ms, model=self.model),
            self.budget,
            text_counter=counter_for_model(self.model),
        )
        self.last = fitted
        return fitted.items


def persona_agent(
    persona: Persona,
    model: Model | str | None = None,
    *,
    toolsets: Sequence[AbstractToolset[Any]] = (),
    history_budget: int | None = None,
    **agent_kwargs: Any,
) -> Agent[Any, Any]:
    """A pydantic-ai ``Agent`` for ``persona``.

    The persona's prompt is the agent's ``instructions``, verbatim: pydantic-ai
    sends them with every request, also when a ``message_history`` is given (a
    ``system_prompt`` is sent only when there is none, so a stored history or a
    handoff from another persona would run without it). Each of the parent's
    ``toolsets`` is narrowed to the persona's tools (``persona.tools`` intersected
    with what the toolsets offer, minus ``disallowed_tools``; Claude Code names
    such as ``Read`` match ``read_file``); tools outside it are hidden from the
    model and refused if called. ``history_budget`` adds a :class:`FitHistory`.
    """

    def allowed(ctx: RunContext[Any], tool: ToolDefinition) -> bool:
        del ctx
        return canonical_tool_name(tool.name) in effective_tool_names(persona, [tool.name])

    narrowed = [ts.filtered(allowed) for ts in toolsets]
    capabilities = list(agent_kwargs.pop("capabilities", None) or [])
    if history_budget is not None:
        name = model if isinstance(model, str) else getattr(model, "model_name", None)
        capabilities.append(ProcessHistory(FitHistory(history_budget, model=name)))
    return Agent(
        model,
        instructions=persona.system_prompt,
        name=persona.name,
        description=persona.description,
        toolsets=narrowed,
        capabilities=capabilities,
        **agent_kwargs,
    )
