"""personae inside pydantic-ai (``pip install 'personae[pydantic-ai]'``).

- :func:`persona_agent`: a persona becomes a pydantic-ai ``Agent`` whose
  instructions are the persona's prompt verbatim and whose tools are the
  parent's toolset narrowed to the persona's tools (narrow only: a persona
  never gains a tool its parent lacks; a hidden tool cannot be called).
- :class:`RunLimits`: usage limits every run of an agent keeps (pydantic-ai takes
  them per run); :func:`persona_agent` adds the persona's ``maxTurns`` as one.
- :class:`FitHistory`: a history processor (pydantic-ai's ``ProcessHistory``
  capability) that fits the message
  history to a token budget with personae's exchange rules (a tool call is
  kept or dropped with all of its results; the latest user prompt is always
  kept; counts are exact for the model's tokenizer).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from pydantic_ai import Agent
from pydantic_ai.capabilities import AbstractCapability, ProcessHistory
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
from pydantic_ai.models import Model, ModelRequestContext
from pydantic_ai.tools import RunContext, ToolDefinition
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.usage import UsageLimits

from personae.context.fit_items import Fitted, fit_items
from personae.context.messages import ChatMessage, ChatToolCall
from personae.errors import ConfigError
from personae.integrations._persona_parts import own_model_spec, server_specs
from personae.models.resolve import ModelResolver
from personae.persona import Persona
from personae.persona.mcp_config import McpServerSpec, tool_granted
from personae.team.mcp_servers import DEFAULT_START_TIMEOUT
from personae.tokens import TokenCounter, counter_for_model
from personae.tools.grants import effective_tool_names
from personae.tools.names import canonical_tool_name, mcp_tool_name

__all__ = ["FitHistory", "RunLimits", "count_model_messages", "persona_agent"]


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


@dataclass
class RunLimits(AbstractCapability[Any]):
    """``Agent(..., capabilities=[RunLimits(UsageLimits(request_limit=5))])``: usage limits
    checked before every model request of every run of the agent, as pydantic-ai checks
    the ``usage_limits`` given to one run (the same ``UsageLimitExceeded``); a run's own
    limits still apply beside them."""

    limits: UsageLimits

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Raise ``UsageLimitExceeded`` when the next request would go over the limits."""
        self.limits.check_before_request(ctx.usage)
        return request_context

    @classmethod
    def get_serialization_name(cls) -> str | None:
        """Not written into agent specs (it is built from a persona)."""
        return None


def persona_agent(
    persona: Persona,
    model: Model | str | None = None,
    *,
    toolsets: Sequence[AbstractToolset[Any]] = (),
    history_budget: int | None = None,
    mcp_servers: Mapping[str, Any] | None = None,
    use_persona_model: bool = True,
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

    What the persona file says about running, as a team run reads it:

    - ``model:`` its own model (``provider:name``, or ``sonnet``/``opus``/``haiku``),
      used instead of ``model``, which serves personas that name none or say
      ``inherit`` (``None``: pydantic-ai then wants one per run);
      ``use_persona_model=False`` always uses ``model``;
    - ``maxTurns:`` a :class:`RunLimits` with ``UsageLimits(request_limit=maxTurns)``:
      a run that would make one more request raises ``UsageLimitExceeded``;
    - its MCP servers (``mcpServers``, or the servers of ``mcp_servers``, the
      project's, e.g. ``cast.mcp_servers``, that its ``tools`` name) as pydantic-ai
      ``MCPToolset`` toolsets, started for each run and stopped after it, each tool named
      ``mcp__<server>__<tool>`` and offered only when the persona grants it.

    Raises ``ValueError`` naming the persona for a model or MCP server it cannot use.
    """

    def allowed(ctx: RunContext[Any], tool: ToolDefinition) -> bool:
        del ctx
        return canonical_tool_name(tool.name) in effective_tool_names(persona, [tool.name])

    narrowed: list[AbstractToolset[Any]] = [ts.filtered(allowed) for ts in toolsets]
    narrowed += [_mcp_toolset(persona, spec) for spec in server_specs(persona, mcp_servers)]
    own = _own_model(persona) if use_persona_model else None
    chosen = own if own is not None else model
    capabilities = list(agent_kwargs.pop("capabilities", None) or [])
    if persona.max_steps is not None:
        capabilities.append(RunLimits(UsageLimits(request_limit=persona.max_steps)))
    if history_budget is not None:
        name = chosen if isinstance(chosen, str) else getattr(chosen, "model_name", None)
        capabilities.append(ProcessHistory(FitHistory(history_budget, model=name)))
    return Agent(
        chosen,
        instructions=persona.system_prompt,
        name=persona.name,
        description=persona.description,
        toolsets=narrowed,
        capabilities=capabilities,
        **agent_kwargs,
    )


def _own_model(persona: Persona) -> Model | None:
    """The pydantic-ai model of the persona's own ``model:`` (``None``: it names none),
    built by personae's rules (base URLs and keys from the environment)."""
    spec = own_model_spec(persona)
    if spec is None:
        return None
    try:
        return cast(Model, ModelResolver(discover=False).model(str(spec)))
    except ConfigError as exc:
        raise ValueError(f"persona {persona.name!r}: model {persona.model!r}: {exc}") from exc


def _mcp_toolset(persona: Persona, spec: McpServerSpec) -> AbstractToolset[Any]:
    """One MCP server as a pydantic-ai ``MCPToolset``: the tools the persona grants,
    named ``mcp__<server>__<tool>`` (a stdio server gets only the variables its entry
    sets over the MCP SDK's safe base environment)."""
    # local import: fastmcp loads only when a persona has MCP servers
    from fastmcp.client.transports import SSETransport, StdioTransport, StreamableHttpTransport
    from pydantic_ai.mcp import MCPToolset

    transport: Any
    if spec.transport == "stdio":
        transport = StdioTransport(
            spec.command, list(spec.args), env=dict(spec.env), cwd=spec.cwd, keep_alive=False
        )
    elif spec.transport == "sse":
        transport = SSETransport(spec.url, headers=dict(spec.headers) or None)
    else:
        transport = StreamableHttpTransport(spec.url, headers=dict(spec.headers) or None)

    def granted(ctx: RunContext[Any], tool: ToolDefinition) -> bool:
        del ctx
        return tool_granted(persona, spec.name, tool.name)

    server = MCPToolset(transport, id=f"mcp_{spec.name}", init_timeout=DEFAULT_START_TIMEOUT)
    return server.filtered(granted).prefixed(mcp_tool_name(spec.name, "").removesuffix("_"))
