"""How personae sees LangChain messages: the fit adapter and the token counters
shared by :func:`~personae.integrations.langchain.trim_messages` and
:class:`~personae.integrations.langchain.FitContextMiddleware`."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Sequence
from types import FunctionType
from typing import Any, Literal, cast

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from personae.context.fit_items import Fitted, fit_items
from personae.context.messages import ChatMessage, ChatToolCall
from personae.tokens import TokenCounter, counter_for_model

__all__ = [
    "Adapter",
    "ListCounter",
    "count_tokens_exactly",
    "counters",
    "fit_langchain",
    "list_counter",
    "per_message_counter",
]

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


class Adapter:
    """The fit's view of a LangChain message: one part, rebuilt with shortened content."""

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


def per_message_counter(token_counter: Any) -> Callable[[BaseMessage], int] | None:
    """``token_counter`` when it counts one message (its first parameter is annotated
    ``BaseMessage``, as LangChain reads it), else ``None``."""
    if not callable(token_counter) or hasattr(token_counter, "get_num_tokens_from_messages"):
        return None
    if _first_annotation(token_counter) in (BaseMessage, "BaseMessage"):
        return cast(Callable[[BaseMessage], int], token_counter)
    return None


def _first_annotation(fn: Any) -> Any:
    """The annotation of ``fn``'s first parameter, as ``inspect.signature`` reads it
    (read from the function itself when nothing can change it: a trim asks every call)."""
    if (
        type(fn) is FunctionType
        and not hasattr(fn, "__wrapped__")
        and (not hasattr(fn, "__signature__"))
    ):
        code = fn.__code__
        if code.co_argcount:
            return fn.__annotations__.get(code.co_varnames[0], inspect.Parameter.empty)
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature: a list counter
        return None
    return params[0].annotation if params else None


def list_counter(token_counter: Any, model: str | None = None) -> ListCounter:
    """LangChain's ``token_counter`` argument as a function of a message list.

    ``"approximate"`` counts exactly (:func:`count_tokens_exactly` for ``model``);
    a chat model counts with its ``get_num_tokens_from_messages``; a per-message
    function is summed. Anything else raises LangChain's own ``ValueError``.
    """
    return counters(token_counter, model)[0]


def counters(
    token_counter: Any, model: str | None = None
) -> tuple[ListCounter, Callable[[BaseMessage], int] | None]:
    """:func:`list_counter` of ``token_counter``, and the per-message counter it sums
    (``None`` unless ``token_counter`` counts one message)."""
    if isinstance(token_counter, str):
        if token_counter != "approximate":
            raise ValueError(
                f"Invalid token_counter shortcut '{token_counter}'. "
                "Available shortcuts: 'approximate'."
            )
        return (lambda ms: count_tokens_exactly(ms, model=model)), None
    if hasattr(token_counter, "get_num_tokens_from_messages"):
        return cast(ListCounter, token_counter.get_num_tokens_from_messages), None
    if not callable(token_counter):
        raise ValueError(
            "'token_counter' expected to be a model that implements "
            "'get_num_tokens_from_messages()' or a function. "
            f"Received object of type {type(token_counter)}."
        )
    per = per_message_counter(token_counter)
    if per is not None:
        return (lambda ms: sum(per(m) for m in ms)), per
    return cast(ListCounter, token_counter), None


def fit_langchain(
    messages: Sequence[BaseMessage],
    budget: int,
    *,
    token_counter: Any = "approximate",
    keep_system: bool = True,
    model: str | None = None,
) -> Fitted[BaseMessage]:
    """Fit ``messages`` to ``budget`` and report what happened (see :class:`Fitted`)."""
    count = list_counter(token_counter, model)
    return fit_items(list(messages), Adapter(), count, budget, keep_system=keep_system)
