"""personae inside the OpenAI Agents SDK (``pip install 'personae[openai-agents]'``).

- :class:`PersonaeSession`: the SDK's ``Session`` protocol backed by personae's
  conversation store (SQLite). ``get_items`` returns the history fitted to a
  token budget (and to ``limit`` items) with personae's exchange rules: a
  ``function_call`` is kept or dropped with its ``function_call_output``, the
  latest user message is always kept, counts are the store's exact counts.
- :func:`cast_agents`: the personas of a cast as ``agents.Agent``\\s, prompts
  verbatim, tools narrowed to each persona's, with handoffs between them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from typing import Any

from agents import Agent, Tool
from agents.memory import SessionABC, SessionSettings

from personae.context.fit_items import fit_items
from personae.context.messages import ChatMessage, ChatToolCall
from personae.errors import UnknownNameError
from personae.persona import Cast
from personae.store.conversations import ConversationStore, Message, Role, ToolCall, token_text
from personae.tools.grants import effective_tool_names
from personae.tools.names import canonical_tool_name

__all__ = ["PersonaeSession", "cast_agents", "items_to_messages", "messages_to_items"]

_RAW = "[openai-agents item]\n"  # content prefix of items stored verbatim as JSON
_PER_MESSAGE = 3


def _raw(role: Role, item: Any, **fields: Any) -> Message:
    text = _RAW + json.dumps(item, sort_keys=True, ensure_ascii=False, default=str)
    return Message(role=role, content=text, **fields)


def _plain_text_message(item: dict[str, Any]) -> bool:
    """``{"role": ..., "content": "<text>"}`` (what the SDK makes of a user string)."""
    return set(item) == {"role", "content"} and isinstance(item["content"], str)


def items_to_messages(items: Iterable[Any]) -> list[Message]:
    """SDK input items as personae messages, losslessly (see :func:`messages_to_items`).

    A ``function_call`` becomes a tool call of an assistant message (consecutive
    calls share one, as a parallel call does), its ``function_call_output`` a
    tool message, a plain ``{"role", "content"}`` message a message of that role;
    every other item (assistant output messages with their ids, reasoning,
    images ...) is kept verbatim as JSON in a message of the matching role.
    """
    out: list[Message] = []
    for item in items:
        data = dict(item)
        kind = data.get("type", "message")
        role = data.get("role")
        if kind == "function_call":
            call = ToolCall(id=str(data["call_id"]), name=str(data["name"]), args=data)
            prev = out[-1] if out else None
            if (
                prev is not None
                and prev.role == "assistant"
                and (prev.tool_calls or prev.content.startswith(_RAW))
            ):
                out[-1] = dataclasses.replace(prev, tool_calls=(*prev.tool_calls, call))
            else:
                out.append(Message(role="assistant", tool_calls=(call,)))
        elif kind == "function_call_output":
            call_id = str(data["call_id"])
            if set(data) == {"type", "call_id", "output"} and isinstance(data["output"], str):
                out.append(Message(role="tool", content=data["output"], tool_call_id=call_id))
            else:
                out.append(_raw("tool", data, tool_call_id=call_id))
        elif role in ("user", "system", "developer") and _plain_text_message(data):
            out.append(
                Message(role="user" if role == "user" else "system", content=data["content"])
            )
        elif role == "developer" or (role == "system" and not _plain_text_message(data)):
            out.append(_raw("system", data))
        elif role == "user":
            out.append(_raw("user", data))
        else:
            out.append(_raw("assistant", data))
    return out


def messages_to_items(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """The inverse of :func:`items_to_messages`: the items exactly as they were added."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.content.startswith(_RAW):
            out.append(json.loads(m.content[len(_RAW) :]))
        elif m.role == "tool":
            out.append(
                {"type": "function_call_output", "call_id": m.tool_call_id, "output": m.content}
            )
        elif m.role != "assistant" or m.content:
            out.append({"role": m.role, "content": m.content})
        out += [dict(c.args) for c in m.tool_calls]
    return out


def _visible_text(content: str) -> str:
    """The text of an item kept verbatim (its JSON when it has none), else ``content``."""
    if not content.startswith(_RAW):
        return content
    data = json.loads(content[len(_RAW) :])
    body = data.get("content") if isinstance(data, dict) else None
    if isinstance(body, str):
        return body
    if isinstance(body, list):
        texts = [p["text"] for p in body if isinstance(p, dict) and isinstance(p.get("text"), str)]
        if texts:
            return "\n".join(texts)
    return content[len(_RAW) :]


class _Adapter:
    def parts(self, item: Message) -> list[ChatMessage]:
        calls = tuple(
            ChatToolCall(id=c.id, name=c.name, arguments=json.dumps(dict(c.args)))
            for c in item.tool_calls
        )
        return [
            ChatMessage(
                item.role, _visible_text(item.content), tool_calls=calls,
                tool_call_id=item.tool_call_id,
            )
        ]  # fmt: skip

    def rebuild(self, item: Message, keep: list[int], texts: dict[int, str]) -> Message:
        if 0 not in texts:
            return item
        if item.content.startswith(_RAW):
            # An item kept verbatim, shortened: its text now stands for it as a plain
            # message of its role (a cut JSON document would not load back).
            return Message(
                role=item.role, content=texts[0], tool_call_id=item.tool_call_id,
                tool_calls=item.tool_calls,
            )  # fmt: skip
        return dataclasses.replace(item, content=texts[0], tokens=None)


class PersonaeSession(SessionABC):
    """An Agents SDK session stored in personae's conversation store.

    ``budget`` (tokens, counted with the store's counter plus 3 per message)
    and ``session_settings.limit`` (items) bound what :meth:`get_items`
    returns; both keep whole tool exchanges and the latest user message. The
    store is append-only: :meth:`clear_session` and :meth:`pop_item` start a
    new generation of the session (``<id>~1``, ``<id>~2`` ...) holding what
    remains; older generations stay on disk.
    """

    def __init__(
        self,
        session_id: str,
        conversations: ConversationStore,
        *,
        budget: int | None = None,
        session_settings: SessionSettings | None = None,
    ) -> None:
        self.session_id = session_id
        self.session_settings = session_settings
        self.conversations = conversations
        self.budget = budget
        self._current = self._find_current()

    def _name(self, generation: int) -> str:
        return self.session_id if generation == 0 else f"{self.session_id}~{generation}"

    def _find_current(self) -> int:
        generation = 0
        while True:
            try:
                self.conversations.session(self._name(generation + 1))
            except UnknownNameError:
                break
            generation += 1
        try:
            self.conversations.session(self._name(generation))
        except UnknownNameError:
            self.conversations.create_session(session_id=self._name(generation))
        return generation

    @property
    def store_session_id(self) -> str:
        """The personae session id holding the current generation."""
        return self._name(self._current)

    def _all(self) -> list[Message]:
        return self.conversations.between(self.store_session_id)

    def _count(self, messages: list[Message], limit: int | None) -> int:
        counter = self.conversations.counter
        tokens = sum(
            (m.tokens if m.tokens is not None else counter.count(token_text(m))) + _PER_MESSAGE
            for m in messages
        )
        if limit is not None and len(messages_to_items(messages)) > limit:
            return (self.budget or tokens) + 1 + tokens  # over any budget: evict more
        return tokens

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The history as SDK input items, fitted to the budget and ``limit``."""
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        messages = self._all()
        if self.budget is None and limit is None:
            return messages_to_items(messages)
        budget = self.budget if self.budget is not None else self._count(messages, None)
        fitted = fit_items(
            messages,
            _Adapter(),
            lambda ms: self._count(ms, limit),
            budget,
            text_counter=self.conversations.counter,
        )
        return messages_to_items(fitted.items)

    async def add_items(self, items: list[Any]) -> None:
        """Append ``items`` (one transaction)."""
        self.conversations.append_many(self.store_session_id, items_to_messages(items))

    async def pop_item(self) -> Any | None:
        """Remove and return the newest item (a new generation holds the rest)."""
        items = messages_to_items(self._all())
        if not items:
            return None
        last = items.pop()
        await self._restart(items)
        return last

    async def clear_session(self) -> None:
        """Start an empty generation of this session."""
        await self._restart([])

    async def _restart(self, items: list[Any]) -> None:
        self._current += 1
        self.conversations.create_session(session_id=self.store_session_id)
        if items:
            await self.add_items(items)


MAX_TOOLS = 128
"""Tools (handoffs included) one request may offer (the OpenAI API's limit)."""


def cast_agents(
    cast: Cast,
    model: Any,
    *,
    tools: Sequence[Tool] = (),
    names: Sequence[str] | None = None,
    **agent_kwargs: Any,
) -> dict[str, Agent[Any]]:
    """``agents.Agent`` for each persona of ``cast`` (default: all), by name.

    Instructions are the persona's prompt verbatim; ``handoff_description`` is
    its description; its tools are those of ``tools`` it may use (narrow only:
    the persona's list intersected with ``tools``, minus its disallowed tools);
    each agent hands off to the others of the set it may spawn, as the team
    runtime reads it (:meth:`Cast.spawnable`: only with the agent tool, narrowed by
    its spawn list). More than :data:`MAX_TOOLS` tools and handoffs on one agent
    raise ``ValueError`` naming the persona.
    """
    chosen = list(names) if names is not None else sorted(cast.personas)
    available = [t.name for t in tools]
    agents_by_name: dict[str, Agent[Any]] = {}
    for name in chosen:
        persona = cast.get(name)
        allowed = set(effective_tool_names(persona, available))
        agents_by_name[name] = Agent(
            name=name,
            instructions=persona.system_prompt,
            handoff_description=persona.description,
            tools=[t for t in tools if canonical_tool_name(t.name) in allowed],
            model=model,
            **agent_kwargs,
        )
    for name, agent in agents_by_name.items():
        # Spawn rights as the team runtime reads them (Cast.spawnable): the agent tool,
        # narrowed by the spawn list; a persona without the agent tool hands off to none.
        agent.handoffs = [agents_by_name[o] for o in cast.spawnable(name) if o in agents_by_name]
        offered = len(agent.tools) + len(agent.handoffs)
        if offered > MAX_TOOLS:
            raise ValueError(
                f"persona {name!r} would offer {offered} tools and handoffs; the API takes at "
                f"most {MAX_TOOLS}: give it a spawn list (subagents, or Agent(a, b) in tools) "
                "or fewer tools"
            )
    return agents_by_name
