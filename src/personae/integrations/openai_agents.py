"""personae inside the OpenAI Agents SDK (``pip install 'personae[openai-agents]'``).

- :class:`PersonaeSession`: the SDK's ``Session`` protocol backed by personae's
  conversation store (SQLite). ``get_items`` returns the history fitted to a
  token budget (and to ``limit`` items) with personae's exchange rules: a
  ``function_call`` is kept or dropped with its ``function_call_output``, the
  latest user message is always kept, counts are the store's exact counts.
- :func:`cast_agents`: the personas of a cast as ``agents.Agent``\\s, prompts
  verbatim, tools narrowed to each persona's, with handoffs between them, each
  with its persona's model, ``maxTurns`` and MCP servers (:func:`mcp_servers`
  lists the servers to connect).
"""

from __future__ import annotations

import dataclasses
import json
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agents import Agent, AgentHooks, MaxTurnsExceeded, Tool
from agents.memory import SessionABC, SessionSettings

from personae.context.fit_items import fit_items
from personae.context.messages import ChatMessage, ChatToolCall
from personae.errors import UnknownNameError
from personae.integrations._persona_parts import own_model_spec, server_specs
from personae.models.resolve import _OPENAI_URL, endpoint_for
from personae.persona import Cast, Persona
from personae.persona.mcp_config import McpServerSpec, tool_granted
from personae.store.conversations import ConversationStore, Message, Role, ToolCall, token_text
from personae.team.mcp_servers import DEFAULT_START_TIMEOUT
from personae.tools.grants import effective_tool_names
from personae.tools.names import canonical_tool_name

__all__ = [
    "PersonaAgent",
    "PersonaeSession",
    "cast_agents",
    "items_to_messages",
    "mcp_servers",
    "messages_to_items",
]

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


@dataclass(repr=False)
class PersonaAgent(Agent[Any]):
    """An ``agents.Agent`` made from a persona; printed with its handoffs by name.

    The SDK prints an agent as a dataclass, each handoff in full with its own
    handoffs: on a cast where agents hand off to each other the printed form grows
    with every agent it reaches (hundreds of megabytes at nine). This one prints the
    same fields, handoffs as ``<handoff to 'name'>``.
    """

    def __repr__(self) -> str:
        shown = []
        for f in dataclasses.fields(self):
            if not f.repr:
                continue
            value = getattr(self, f.name)
            if f.name == "handoffs":
                names = [getattr(h, "name", None) or getattr(h, "agent_name", "?") for h in value]
                shown.append("handoffs=[" + ", ".join(f"<handoff to {n!r}>" for n in names) + "]")
            else:
                shown.append(f"{f.name}={value!r}")
        return f"{type(self).__name__}({', '.join(shown)})"

    __str__ = __repr__


class _TurnLimit(AgentHooks[Any]):
    """The persona's ``maxTurns``: at most ``limit`` model calls each time the run hands
    the conversation to this agent (the SDK's ``MaxTurnsExceeded`` past it); other hook
    calls go to ``inner``, the hooks the caller gave."""

    def __init__(self, persona: str, limit: int, inner: AgentHooks[Any] | None) -> None:
        self.persona = persona
        self.limit = limit
        self.inner = inner
        self.started: dict[int, int] = {}  # by the run's usage object: requests at start

    async def on_start(self, context: Any, agent: Any) -> None:
        usage = context.usage  # one per run, shared by its contexts (not hashable)
        if id(usage) not in self.started:
            weakref.finalize(usage, self.started.pop, id(usage), None)
        self.started[id(usage)] = usage.requests
        if self.inner is not None:
            await self.inner.on_start(context, agent)

    async def on_llm_start(self, context: Any, agent: Any, *args: Any, **kwargs: Any) -> None:
        made = context.usage.requests - self.started.get(id(context.usage), 0)
        if made >= self.limit:
            raise MaxTurnsExceeded(
                f"Max turns ({self.limit}) exceeded: persona {self.persona!r} has maxTurns: "
                f"{self.limit}"
            )
        if self.inner is not None:
            await self.inner.on_llm_start(context, agent, *args, **kwargs)

    async def on_llm_end(self, *args: Any, **kwargs: Any) -> None:
        if self.inner is not None:
            await self.inner.on_llm_end(*args, **kwargs)

    async def on_end(self, *args: Any, **kwargs: Any) -> None:
        if self.inner is not None:
            await self.inner.on_end(*args, **kwargs)

    async def on_handoff(self, *args: Any, **kwargs: Any) -> None:
        if self.inner is not None:
            await self.inner.on_handoff(*args, **kwargs)

    async def on_tool_start(self, *args: Any, **kwargs: Any) -> None:
        if self.inner is not None:
            await self.inner.on_tool_start(*args, **kwargs)

    async def on_tool_end(self, *args: Any, **kwargs: Any) -> None:
        if self.inner is not None:
            await self.inner.on_tool_end(*args, **kwargs)


def cast_agents(
    cast: Cast,
    model: Any = None,
    *,
    tools: Sequence[Tool] = (),
    names: Sequence[str] | None = None,
    use_persona_model: bool = True,
    **agent_kwargs: Any,
) -> dict[str, Agent[Any]]:
    """``agents.Agent`` for each persona of ``cast`` (default: all), by name.

    Instructions are the persona's prompt verbatim; ``handoff_description`` is
    its description; its tools are those of ``tools`` it may use (narrow only:
    the persona's list intersected with ``tools``, minus its disallowed tools);
    each agent hands off to the others of the set it may spawn, as the team
    runtime reads it (:meth:`Cast.spawnable`: only with the agent tool, narrowed by
    its spawn list). More than :data:`MAX_TOOLS` tools and handoffs on one agent
    raise ``ValueError`` naming the persona. Agents print their handoffs by name
    (:class:`PersonaAgent`).

    From the persona file, as a team run reads it:

    - ``model:`` its own model (``provider:name``, or ``sonnet``/``opus``/``haiku``)
      instead of ``model``, which serves personas that name none or say ``inherit``
      (``use_persona_model=False``: always ``model``); ``openai:`` without a base URL
      is the SDK's own model name, any other as chat completions on its server
      (``OPENAI_BASE_URL``, Ollama, Anthropic's OpenAI-compatible endpoint);
    - ``maxTurns:`` at most that many model calls each time the run hands it the
      conversation (``MaxTurnsExceeded``, as the SDK's ``max_turns`` raises for a run);
    - its MCP servers (its ``mcpServers``, or the project's ``cast.mcp_servers`` its
      ``tools`` name) as the SDK's ``MCPServerStdio``/``MCPServerStreamableHttp``/
      ``MCPServerSse``, one per server shared by the personas using it, each
      persona seeing only the tools it grants; connect them before running
      (``async with MCPServerManager(mcp_servers(agents), strict=True)``).

    A model or server a persona cannot use is a ``ValueError`` naming it.
    """
    chosen = list(names) if names is not None else sorted(cast.personas)
    available = [t.name for t in tools]
    models = _Models()
    servers = _Servers()
    user_hooks = agent_kwargs.pop("hooks", None)
    agents_by_name: dict[str, Agent[Any]] = {}
    for name in chosen:
        persona = cast.get(name)
        allowed = set(effective_tool_names(persona, available))
        own = models.of(persona) if use_persona_model else None
        hooks = user_hooks
        if persona.max_steps is not None:
            hooks = _TurnLimit(name, persona.max_steps, user_hooks)
        agents_by_name[name] = PersonaAgent(
            name=name,
            instructions=persona.system_prompt,
            handoff_description=persona.description,
            tools=[t for t in tools if canonical_tool_name(t.name) in allowed],
            model=own if own is not None else model,
            mcp_servers=[
                servers.of(persona, spec) for spec in server_specs(persona, cast.mcp_servers)
            ],
            hooks=hooks,
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


def mcp_servers(agents: Mapping[str, Agent[Any]] | Iterable[Agent[Any]]) -> list[Any]:
    """The MCP servers of ``agents`` (as :func:`cast_agents` returns them), each once,
    to connect before a run (``MCPServerManager(mcp_servers(agents), strict=True)``)."""
    listed = agents.values() if isinstance(agents, Mapping) else agents
    unique: dict[int, Any] = {}
    for agent in listed:
        for server in agent.mcp_servers:
            unique.setdefault(id(server), server)
    return list(unique.values())


class _Models:
    """Persona models for the SDK, one chat-completions client per server."""

    def __init__(self) -> None:
        self.clients: dict[tuple[str, str], Any] = {}

    def of(self, persona: Persona) -> Any:
        spec = own_model_spec(persona)
        if spec is None:
            return None
        endpoint = endpoint_for(spec)
        key = endpoint.key
        if spec.provider == "openai" and endpoint.base_url == _OPENAI_URL:
            return spec.name  # the SDK's own default provider (OPENAI_API_KEY)
        if endpoint.base_url is None:
            raise ValueError(
                f"persona {persona.name!r}: model {persona.model!r} needs a base URL: set "
                "OPENAI_BASE_URL"
            )
        if key is None and (endpoint.key_required or spec.provider == "anthropic"):
            raise ValueError(
                f"persona {persona.name!r}: model {persona.model!r}: set {endpoint.key_env}"
            )
        # local import: the OpenAI client loads only when a persona names a model
        from agents import OpenAIChatCompletionsModel
        from openai import AsyncOpenAI

        slot = (endpoint.base_url, key or "not-needed")
        if slot not in self.clients:
            self.clients[slot] = AsyncOpenAI(base_url=slot[0], api_key=slot[1])
        return OpenAIChatCompletionsModel(model=spec.name, openai_client=self.clients[slot])


class _Servers:
    """One SDK MCP server per server entry, shared by the personas that use it; each
    agent sees only the tools its persona grants (a filter by the asking agent)."""

    def __init__(self) -> None:
        self.by_entry: dict[str, Any] = {}
        self.personas: dict[str, dict[str, Persona]] = {}

    def of(self, persona: Persona, spec: McpServerSpec) -> Any:
        self.personas.setdefault(spec.name, {})[persona.name] = persona
        key = json.dumps(dataclasses.asdict(spec), sort_keys=True)
        if key not in self.by_entry:
            self.by_entry[key] = self._make(spec)
        return self.by_entry[key]

    def _make(self, spec: McpServerSpec) -> Any:
        # local import: the MCP client loads only when a persona has MCP servers
        from agents.mcp import MCPServerSse, MCPServerStdio, MCPServerStreamableHttp

        users = self.personas[spec.name]

        def granted(context: Any, tool: Any) -> bool:
            persona = users.get(context.agent.name)
            return persona is not None and tool_granted(persona, spec.name, tool.name)

        common: dict[str, Any] = {
            "name": spec.name, "cache_tools_list": True, "tool_filter": granted,
            "client_session_timeout_seconds": DEFAULT_START_TIMEOUT,
        }  # fmt: skip
        if spec.transport == "stdio":
            params: dict[str, Any] = {"command": spec.command, "args": list(spec.args)}
            if spec.env:
                params["env"] = dict(spec.env)  # merged over the MCP SDK's safe base set
            if spec.cwd:
                params["cwd"] = spec.cwd
            return MCPServerStdio(params, **common)  # type: ignore[arg-type]
        remote = {"url": spec.url, "headers": dict(spec.headers)}
        if spec.transport == "sse":
            return MCPServerSse(remote, **common)  # type: ignore[arg-type]
        return MCPServerStreamableHttp(remote, **common)  # type: ignore[arg-type]
