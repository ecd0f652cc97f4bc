"""personae inside LangChain (``pip install 'personae[langchain]'``).

- :func:`trim_messages`: a drop-in for ``langchain_core.messages.trim_messages``
  (same call shape) that never returns a tool result without its call, always
  keeps the latest human turn, and counts exactly: ``token_counter="approximate"``
  is replaced by personae's exact tokenizer (:func:`count_tokens_exactly`).
- :class:`FitContextMiddleware`: LangChain v1 ``create_agent`` middleware that
  fits the model input (system message + messages) to a budget on every call.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Literal, cast

from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)
from langchain_core.messages.utils import MessageLikeRepresentation

from personae.context.fit_items import Fitted, fit_items
from personae.context.messages import ChatMessage, ChatToolCall
from personae.tokens import TokenCounter, counter_for_model

__all__ = ["FitContextMiddleware", "count_tokens_exactly", "fit_langchain", "trim_messages"]

ListCounter = Callable[[list[BaseMessage]], int]
_PER_MESSAGE = 3  # role and framing tokens per message, as chat APIs add them


def _role(message: BaseMessage) -> Literal["user", "assistant", "tool", "system"]:
    if isinstance(message, SystemMessage):
        return "system"
    if isinstance(message, AIMessage):
        return "assistant"
    if isinstance(message, ToolMessage):
        return "tool"
    if isinstance(message, HumanMessage):
        return "user"
    role = getattr(message, "role", message.type)
    return "assistant" if role in ("ai", "assistant") else "user"


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False, sort_keys=True, default=str)


class _Adapter:
    def parts(self, item: BaseMessage) -> list[ChatMessage]:
        calls: tuple[ChatToolCall, ...] = ()
        if isinstance(item, AIMessage):
            calls = tuple(
                ChatToolCall(
                    id=str(c.get("id") or ""),
                    name=c["name"],
                    arguments=json.dumps(c.get("args", {}), sort_keys=True),
                )
                for c in item.tool_calls
            )
        call_id = item.tool_call_id if isinstance(item, ToolMessage) else None
        return [ChatMessage(_role(item), _text(item), tool_calls=calls, tool_call_id=call_id)]

    def rebuild(self, item: BaseMessage, keep: list[int], texts: dict[int, str]) -> BaseMessage:
        return item.model_copy(update={"content": texts[0]}) if 0 in texts else item


def count_tokens_exactly(messages: Sequence[BaseMessage], *, model: str | None = None) -> int:
    """Exact tokens of ``messages`` with personae's counter for ``model`` (o200k_base by default).

    Counts each message's role, text, name and tool calls, plus 3 framing
    tokens per message; use it wherever ``"approximate"`` would under-count.
    """
    counter = counter_for_model(model)
    return sum(_message_tokens(m, counter) for m in messages)


def _message_tokens(message: BaseMessage, counter: TokenCounter) -> int:
    pieces = [message.type, _text(message)]
    if message.name:
        pieces.append(message.name)
    if isinstance(message, AIMessage) and message.tool_calls:
        pieces.append(json.dumps(message.tool_calls, sort_keys=True, default=str))
    if isinstance(message, ToolMessage):
        pieces.append(message.tool_call_id)
    return sum(counter.count(p) for p in pieces if p) + _PER_MESSAGE


def _list_counter(token_counter: Any, model: str | None) -> ListCounter:
    if isinstance(token_counter, str):
        if token_counter != "approximate":
            raise ValueError(
                f"invalid token_counter shortcut {token_counter!r}; available: 'approximate'"
            )
        return lambda ms: count_tokens_exactly(ms, model=model)
    if hasattr(token_counter, "get_num_tokens_from_messages"):
        return cast(ListCounter, token_counter.get_num_tokens_from_messages)
    if not callable(token_counter):
        raise ValueError("token_counter must be a model, a function or 'approximate'")
    first = next(iter(inspect.signature(token_counter).parameters.values()), None)
    if first is not None and first.annotation in (BaseMessage, "BaseMessage"):
        return lambda ms: sum(token_counter(m) for m in ms)
    return cast(ListCounter, token_counter)


def fit_langchain(
    messages: Sequence[BaseMessage],
    budget: int,
    *,
    token_counter: Any = "approximate",
    keep_system: bool = True,
    model: str | None = None,
) -> Fitted[BaseMessage]:
    """Fit ``messages`` to ``budget`` and report what happened (see :class:`Fitted`)."""
    count = _list_counter(token_counter, model)
    return fit_items(list(messages), _Adapter(), count, budget, keep_system=keep_system)


def _types(spec: Any) -> tuple[Any, ...]:
    if spec is None:
        return ()
    return tuple(spec) if isinstance(spec, list | tuple) else (spec,)


def _is(message: BaseMessage, spec: Any) -> bool:
    return any(
        (isinstance(t, str) and message.type == t)
        or (isinstance(t, type) and isinstance(message, t))
        for t in _types(spec)
    )


def trim_messages(
    messages: Iterable[MessageLikeRepresentation],
    *,
    max_tokens: int,
    token_counter: Any,
    strategy: Literal["first", "last"] = "last",
    allow_partial: bool = False,
    end_on: Any = None,
    start_on: Any = None,
    include_system: bool = False,
    text_splitter: Any = None,
) -> list[BaseMessage]:
    """A drop-in for LangChain's ``trim_messages`` that keeps histories valid.

    Same arguments. Differences, all on purpose: the result never holds a tool
    result without its call (or a call without its results); the latest human
    message and what follows it are always kept (when they alone are over
    ``max_tokens`` their tool outputs are shortened with a notice; the human
    message itself is never cut, so the result is over only when it alone is);
    ``token_counter="approximate"`` counts exactly with personae's tokenizer.
    ``start_on`` drops leading exchanges of other types (never the latest turn);
    ``end_on`` drops trailing messages first, as LangChain does. Only
    ``strategy="last"`` is supported (the chat-history case);
    ``allow_partial`` and ``text_splitter`` are accepted and not used: only the
    latest turn's tool outputs are ever shortened.
    """
    del allow_partial, text_splitter
    if strategy != "last":
        raise ValueError("personae's trim_messages keeps the latest turn: use strategy='last'")
    msgs = convert_to_messages(messages)
    if end_on is not None:
        while msgs and not _is(msgs[-1], end_on):
            msgs = msgs[:-1]
    fitted = fit_langchain(
        msgs, max_tokens, token_counter=token_counter, keep_system=include_system
    )
    out = fitted.items
    if start_on is not None:
        lead = 1 if include_system and out and isinstance(out[0], SystemMessage) else 0
        last_human = max((i for i, m in enumerate(out) if isinstance(m, HumanMessage)), default=0)
        cut = lead
        while cut < last_human and not _is(out[cut], start_on):
            cut += 1
        # never start inside an exchange: skip results of a call that was cut off
        while cut < last_human and isinstance(out[cut], ToolMessage):
            cut += 1
        out = out[:lead] + out[cut:]
    return out


class FitContextMiddleware(AgentMiddleware):  # type: ignore[type-arg]
    """``create_agent(..., middleware=[FitContextMiddleware(budget)])``: every model call
    gets its messages fitted so that system message + messages count at most ``budget``.

    ``token_counter`` is any LangChain counter (a function or a chat model);
    the default counts exactly with personae's tokenizer for ``model``.
    """

    def __init__(
        self, budget: int, *, token_counter: Any = "approximate", model: str | None = None
    ) -> None:
        super().__init__()
        self.budget = budget
        self.count = _list_counter(token_counter, model)
        self.last: Fitted[BaseMessage] | None = None
        """The most recent fit (for logging and tests)."""

    def _fit(self, request: ModelRequest) -> ModelRequest:  # type: ignore[type-arg]
        system = [request.system_message] if request.system_message is not None else []
        fitted = fit_items(
            [*system, *request.messages],
            _Adapter(),
            self.count,
            self.budget,
            keep_system=True,
        )
        self.last = fitted
        kept = fitted.items[len(system) :] if system else fitted.items
        return request.override(messages=cast(Any, kept))

    def wrap_model_call(
        self,
        request: ModelRequest,  # type: ignore[type-arg]
        handler: Callable[[ModelRequest], Any],  # type: ignore[type-arg]
    ) -> Any:
        """Fit the request's messages, then call the model."""
        return handler(self._fit(request))

    async def awrap_model_call(
        self,
        request: ModelRequest,  # type: ignore[type-arg]
        handler: Callable[[ModelRequest], Awaitable[Any]],  # type: ignore[type-arg]
    ) -> Any:
        """Async form of :meth:`wrap_model_call`."""
        return await handler(self._fit(request))
