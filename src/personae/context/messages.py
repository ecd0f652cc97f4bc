"""Conversation messages as the context engine sees them, and exchange grouping.

The engine keeps its own small message type so it does not depend on how the
store represents rows; :func:`from_stored` adapts anything shaped like the
store's ``Message`` (role, content, tool_calls, tool_call_id, tokens, id).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from personae.store.conversations import ROLES, Role

__all__ = [
    "CUT_ORIGIN_EVERY",
    "ChatMessage",
    "ChatToolCall",
    "Role",
    "Unit",
    "from_stored",
    "group_units",
    "group_units_at",
    "latest_turn_start",
]


CUT_ORIGIN_EVERY = 128
"""A from-scratch build measures its cut grid's token positions from the first
exchange at or after a multiple of this many message positions (the last such
multiple before the earliest exchange that fits): positions that do not depend on
how much older history was read, and that move only every this many messages."""


@dataclass(frozen=True, slots=True)
class ChatToolCall:
    """One tool call requested by an assistant message."""

    id: str
    """Call id; the matching tool result carries it as ``tool_call_id``."""
    name: str
    """Tool name."""
    arguments: str = ""
    """Arguments as canonical JSON text."""


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One conversation message (user, assistant, tool result or system)."""

    role: Role
    """Who spoke."""
    content: str
    """Message text (for a tool message: the tool output)."""
    tool_calls: tuple[ChatToolCall, ...] = ()
    """Tool calls of an assistant message."""
    tool_call_id: str | None = None
    """For a tool message: the call it answers."""
    tokens: int | None = None
    """Token count of ``content`` as stored (``None``: not counted yet)."""
    seq: int = 0
    """Position in the session (store id); orders messages and anchors eviction."""
    counter: str | None = None
    """Name of the counter that produced ``tokens``."""


@dataclass(frozen=True, slots=True)
class Unit:
    """An exchange: kept or dropped as a whole.

    A user or system message alone, an assistant message without tool calls
    alone, or an assistant message with tool calls together with all of its
    tool results.
    """

    messages: tuple[ChatMessage, ...] = field(default_factory=tuple)

    @property
    def head(self) -> ChatMessage:
        """The first message of the exchange."""
        return self.messages[0]


def _call_from(raw: Any) -> ChatToolCall:
    if isinstance(raw, ChatToolCall):
        return raw
    if type(raw) is dict or isinstance(raw, Mapping):
        get = raw.get
        fn = get("function")
        name = get("name") or (fn.get("name") if isinstance(fn, Mapping) else None) or ""
        args: Any = get("arguments", get("args", get("input")))
        if args is None and isinstance(fn, Mapping):
            args = fn.get("arguments")
        call_id = get("id") or get("tool_call_id") or ""
    else:
        name = getattr(raw, "name", "") or getattr(raw, "tool_name", "")
        args = getattr(raw, "arguments", getattr(raw, "args", None))
        call_id = getattr(raw, "id", None) or getattr(raw, "tool_call_id", "") or ""
    if args is None:
        text = ""
    elif isinstance(args, str):
        text = args
    else:
        text = json.dumps(args, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return ChatToolCall(str(call_id), str(name), text)  # positional: cheaper than keywords


def from_stored(message: Any, *, counter: str | None = None) -> ChatMessage:
    """Adapt a stored message (any object or mapping with the store's fields)."""
    if type(message) is dict:  # the common case first: a decoded request's messages
        return _from_fields(message.get, counter)
    if isinstance(message, ChatMessage):
        return message
    if not isinstance(message, Mapping) and hasattr(message, "tool_call_id"):
        calls = tuple(_call_from(c) for c in message.tool_calls) if message.tool_calls else ()
        return ChatMessage(  # positional: cheaper than keywords
            message.role,
            message.content or "",
            calls,
            message.tool_call_id,
            message.tokens if not calls else None,
            int(message.seq or 0),
            getattr(message, "counter", None) or counter,
        )
    get = message.get if isinstance(message, Mapping) else lambda k, d=None: getattr(message, k, d)
    return _from_fields(get, counter)


def _from_fields(get: Any, counter: str | None) -> ChatMessage:
    """A message from ``get(field, default)`` (a mapping's or an object's fields)."""
    role = str(get("role", "user"))
    if role not in ROLES:
        role = "system"
    raw = get("tool_calls", None)
    calls = tuple(map(_call_from, raw)) if raw else ()
    seq = get("seq", None)
    if seq is None:
        seq = get("id", 0)
    tokens = get("tokens", None)
    return ChatMessage(  # positional: cheaper than keywords
        role,  # type: ignore[arg-type]
        str(get("content", "") or ""),
        calls,
        get("tool_call_id", None),
        int(tokens) if tokens is not None else None,
        int(seq or 0),
        get("counter", None) or counter,
    )


def group_units(messages: Sequence[ChatMessage]) -> tuple[list[Unit], int]:
    """Group messages into whole exchanges; returns ``(units, dropped)``.

    Tool results without their call in the same exchange (for example the
    leading results of a window cut in the middle of an exchange) and tool
    calls whose results are missing are not kept: ``dropped`` counts the
    messages left out so that no orphan or dangling call is ever rendered.
    A tool call whose result never arrived is kept only when it is the very
    last exchange (the call is still running); its call list is kept as is.
    """
    units, dropped, _, _ = group_units_at(messages)
    return units, dropped


def group_units_at(
    messages: Sequence[ChatMessage],
) -> tuple[list[Unit], int, list[int], list[int]]:
    """:func:`group_units` plus, per unit, the index of its head in ``messages`` and the
    messages dropped before it (lets a caller regroup only from the last unit on)."""
    units: list[Unit] = []
    starts: list[int] = []
    before: list[int] = []
    dropped = 0
    i = 0
    n = len(messages)
    while i < n:
        msg = messages[i]
        if msg.role == "tool":
            dropped += 1  # orphan: its call is not in this window
            i += 1
            continue
        starts.append(i)
        before.append(dropped)
        if msg.role != "assistant" or not msg.tool_calls:
            units.append(Unit((msg,)))
            i += 1
            continue
        wanted = {c.id for c in msg.tool_calls}
        j = i + 1
        results: list[ChatMessage] = []
        while j < n and messages[j].role == "tool":
            if messages[j].tool_call_id in wanted:
                results.append(messages[j])
            else:
                dropped += 1
            j += 1
        answered = {r.tool_call_id for r in results}
        if answered >= wanted:
            units.append(Unit((msg, *results)))
        elif j >= n:
            # Last exchange, calls still running: keep the answered calls only.
            kept_calls = tuple(c for c in msg.tool_calls if c.id in answered)
            trimmed = ChatMessage(
                role="assistant",
                content=msg.content,
                tool_calls=kept_calls,
                tokens=msg.tokens,
                seq=msg.seq,
                counter=msg.counter,
            )
            if kept_calls or msg.content:
                units.append(Unit((trimmed, *results)))
            else:
                dropped += 1 + len(results)
                starts.pop()
                before.pop()
        else:
            dropped += 1 + len(results)  # dangling call in the middle: drop the exchange
            starts.pop()
            before.pop()
        i = j
    return units, dropped, starts, before


def latest_turn_start(units: Sequence[Unit]) -> int:
    """Index of the unit holding the latest user message (0 when there is none)."""
    for k in range(len(units) - 1, -1, -1):
        if units[k].head.role == "user":
            return k
    return 0


def messages_of(units: Iterable[Unit]) -> list[ChatMessage]:
    """Flatten units back to messages."""
    return [m for u in units for m in u.messages]
