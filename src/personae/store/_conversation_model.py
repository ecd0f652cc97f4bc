"""Value types of the conversation store (private; re-exported by ``conversations``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from personae.errors import UsageError
from personae.store.db import Conn

__all__: list[str] = []

Role = Literal["user", "assistant", "tool", "system"]
ROLES: tuple[Role, ...] = ("user", "assistant", "tool", "system")


class ConversationError(UsageError):
    """A message or session the conversation store refuses (one clear line)."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call made by an assistant message."""

    id: str
    """Call id; the tool result message carries it as ``tool_call_id``."""
    name: str
    """Tool name."""
    args: Mapping[str, Any] = field(default_factory=dict)
    """Arguments (JSON-serializable)."""

    def to_json(self) -> dict[str, Any]:
        """``{"id", "name", "args"}``."""
        return {"id": self.id, "name": self.name, "args": dict(self.args)}


def _tool_call(value: ToolCall | Mapping[str, Any]) -> ToolCall:
    if isinstance(value, ToolCall):
        return value
    if not isinstance(value, Mapping):
        raise ConversationError(f"tool call must be an object, got {type(value).__name__}")
    missing = [key for key in ("id", "name") if not value.get(key)]
    if missing:
        raise ConversationError(f"tool call is missing {', '.join(missing)}", field="tool_calls")
    args = value.get("args", value.get("arguments", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError as exc:
            raise ConversationError(f"tool call args are not JSON: {exc}") from exc
    if not isinstance(args, Mapping):
        raise ConversationError("tool call args must be an object", field="tool_calls")
    return ToolCall(id=str(value["id"]), name=str(value["name"]), args=dict(args))


@dataclass(frozen=True, slots=True)
class Message:
    """One conversation message.

    ``tokens``, ``counter``, ``seq`` and ``created`` are filled in by the store;
    values given on append are ignored (the store counts each message once).
    """

    role: Role
    """``user``, ``assistant``, ``tool`` or ``system``."""
    content: str = ""
    """Text content (a tool message holds the tool's output)."""
    tool_calls: Sequence[ToolCall] = ()
    """Tool calls made by an assistant message (dicts are accepted and converted)."""
    tool_call_id: str | None = None
    """For ``tool`` messages: the id of the call this result answers."""
    tokens: int | None = None
    """Token count of :func:`token_text` by ``counter``."""
    counter: str | None = None
    """Name of the counter that produced ``tokens``."""
    seq: int | None = None
    """Position in the session (1, 2, ...)."""
    created: str | None = None
    """UTC timestamp (ISO 8601) of the append."""

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ConversationError(
                f"role must be one of {', '.join(ROLES)}, got {self.role!r}", field="role"
            )
        if not isinstance(self.content, str):
            raise ConversationError("content must be text", field="content")
        calls = tuple(_tool_call(call) for call in self.tool_calls)
        object.__setattr__(self, "tool_calls", calls)
        if calls and self.role != "assistant":
            raise ConversationError(
                f"only assistant messages make tool calls, not {self.role}", field="tool_calls"
            )
        ids = [call.id for call in calls]
        if len(ids) != len(set(ids)):
            raise ConversationError("tool call ids repeat within a message", field="tool_calls")
        if self.role == "tool" and not self.tool_call_id:
            raise ConversationError("a tool message needs a tool_call_id", field="tool_call_id")
        if self.role != "tool" and self.tool_call_id is not None:
            raise ConversationError("only tool messages carry a tool_call_id", field="tool_call_id")

    def tool_calls_json(self) -> str | None:
        """The tool calls as canonical JSON (``None`` when there are none)."""
        if not self.tool_calls:
            return None
        try:
            return json.dumps(
                [call.to_json() for call in self.tool_calls],
                ensure_ascii=False,
                sort_keys=True,
                separators=(",", ":"),
            )
        except (TypeError, ValueError) as exc:
            raise ConversationError(
                f"tool call args are not JSON-serializable: {exc}", field="tool_calls"
            ) from exc


def stored_message(row: Sequence[Any], tokens: int, counter: str) -> Message:
    """A message from a stored row ``(id, seq, role, content, tool_calls, tool_call_id, ...)``.

    Rows were validated on append, so no checks run here (reads stay cheap).
    """
    message = object.__new__(Message)
    put = object.__setattr__
    put(message, "role", row[2])
    put(message, "content", row[3])
    put(message, "tool_calls", tool_calls_from_json(row[4]) if row[4] else ())
    put(message, "tool_call_id", row[5])
    put(message, "tokens", tokens)
    put(message, "counter", counter)
    put(message, "seq", row[1])
    put(message, "created", row[8])
    return message


def token_text(message: Message) -> str:
    """The text a message's token count is taken over: content, then tool calls as JSON."""
    calls = message.tool_calls_json()
    if calls is None:
        return message.content
    return f"{message.content}\n{calls}" if message.content else calls


def tool_calls_from_json(text: str | None) -> tuple[ToolCall, ...]:
    """Inverse of :meth:`Message.tool_calls_json`."""
    if not text:
        return ()
    data = cast(list[dict[str, Any]], json.loads(text))
    return tuple(ToolCall(id=d["id"], name=d["name"], args=d.get("args", {})) for d in data)


@dataclass(frozen=True, slots=True)
class Session:
    """One conversation."""

    id: str
    """Session id."""
    created: str
    """UTC timestamp (ISO 8601)."""
    title: str | None
    """Optional title."""
    persona: str | None
    """Persona the session talks to, if any."""
    message_count: int
    """Number of stored messages."""
    last_seq: int
    """Seq of the newest message (0 when empty)."""
    token_total: int
    """Sum of the stored message counts (each by its append-time counter)."""


@dataclass(frozen=True, slots=True)
class Summary:
    """A running summary of a session's messages up to ``covers_seq``."""

    session_id: str
    """Session the summary belongs to."""
    covers_seq: int
    """The summary covers messages with ``seq <= covers_seq``."""
    text: str
    """Summary text."""
    tokens: int
    """Token count of ``text`` by ``counter``."""
    counter: str
    """Counter name."""
    created: str
    """UTC timestamp (ISO 8601)."""


def check_tool_results(
    conn: Conn, session_id: str, last_seq: int, batch: Sequence[Message]
) -> None:
    """A tool result must answer an open call of the assistant message just before it."""
    if not any(m.role == "tool" for m in batch):
        return
    open_calls: set[str] | None = None  # None: no assistant turn to answer
    if batch[0].role == "tool":
        answered: set[str] = set()
        cursor = last_seq
        while cursor > 0:
            row = conn.execute(
                "SELECT role, tool_calls, tool_call_id FROM messages"
                " WHERE session_id = ? AND seq = ?",
                (session_id, cursor),
            ).fetchone()
            if row is None or row[0] != "tool":
                if row is not None and row[0] == "assistant":
                    made = {call.id for call in tool_calls_from_json(row[1])}
                    open_calls = made - answered
                break
            answered.add(row[2])
            cursor -= 1
    for message in batch:
        if message.role == "assistant":
            open_calls = {call.id for call in message.tool_calls}
        elif message.role == "tool":
            if open_calls is None or message.tool_call_id not in open_calls:
                raise ConversationError(
                    f"tool result {message.tool_call_id!r} does not answer an open tool call"
                    " of the assistant message before it",
                    field="tool_call_id",
                )
            open_calls.discard(message.tool_call_id)
        else:
            open_calls = None
