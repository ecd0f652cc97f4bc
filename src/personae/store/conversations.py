"""The conversation store: sessions, messages counted once, running summaries.

Every message is counted once, when it is appended, with the store's counter;
the count is stored with the counter's name. Reads under another counter
recount lazily and cache the result per (message, counter) in
``message_tokens``, so each message is counted at most once per counter.

Newest-first reads (:meth:`ConversationStore.iter_backward`,
:meth:`~ConversationStore.within_budget`, :meth:`~ConversationStore.recent`)
walk the ``(session_id, seq)`` index backward in small pages and stop as soon
as they have enough: their cost grows with what they return, not with the
length of the history.

Appends are transactional: a message (or a batch) is stored whole together
with the session's counters, or not at all.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, TypedDict, Unpack

from personae.errors import UnknownNameError
from personae.limits import cut_strings
from personae.security.redact import redact_text, redact_value
from personae.store._conversation_model import (
    ROLES,
    ConversationError,
    Message,
    Role,
    Session,
    Summary,
    ToolCall,
    check_tool_results,
    stored_message,
    token_text,
    tool_calls_from_json,
)
from personae.store.db import INTEGRITY_ERRORS, Conn, Store
from personae.tokens.base import TokenCounter

__all__ = [
    "ROLES",
    "ConversationError",
    "ConversationStore",
    "Message",
    "ReadWindow",
    "Role",
    "Session",
    "Summary",
    "ToolCall",
    "token_text",
]

_COLUMNS = "id, seq, role, content, tool_calls, tool_call_id, tokens, counter, created"
_SESSION = "id, created, title, persona, message_count, last_seq, token_total"
_END = 2**62
"""A seq above every stored one (open upper bounds)."""
_PAGE = 16
_MAX_PAGE = 256


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class ReadWindow(TypedDict, total=False):
    """Where a newest-first read starts and how its messages are counted."""

    before_seq: int | None
    """Only messages before this seq (``None``: from the newest)."""
    counter: TokenCounter | None
    """Count ``tokens`` with this counter (``None``: the counts stored at append time)."""


class ConversationStore:
    """Conversation sessions and messages in a personae :class:`Store`."""

    def __init__(self, store: Store, counter: TokenCounter) -> None:
        self.store = store
        self._counter = counter
        self._summary_counts: dict[tuple[str, int, str], int] = {}

    @property
    def counter(self) -> TokenCounter:
        """The counter messages are counted with when appended."""
        return self._counter

    @contextmanager
    def _reader(self) -> Iterator[Conn]:
        """A read connection; on SQLite a cursor of plain tuples (faster than ``sqlite3.Row``)."""
        with self.store.read() as conn:
            if isinstance(conn, sqlite3.Connection):
                cursor = conn.cursor()
                cursor.row_factory = None
                yield cursor
            else:
                yield conn

    # -- sessions -----------------------------------------------------------------

    def create_session(
        self,
        *,
        title: str | None = None,
        persona: str | None = None,
        session_id: str | None = None,
    ) -> str:
        """Create a session and return its id (a new random id unless given)."""
        sid = session_id if session_id is not None else uuid.uuid4().hex
        if not sid.strip():
            raise ConversationError("session id must not be empty", field="session")
        try:
            with self.store.transaction() as conn:
                conn.execute(
                    "INSERT INTO sessions(id, created, title, persona) VALUES (?, ?, ?, ?)",
                    (sid, _now(), None if title is None else redact_text(title), persona),
                )
        except INTEGRITY_ERRORS as exc:
            raise ConversationError(f"session {sid!r} already exists", field="session") from exc
        return sid

    def session(self, session_id: str) -> Session:
        """The session ``session_id`` (``UnknownNameError`` if there is none)."""
        return Session(*self._session_row(_SESSION, session_id))

    def position(self, session_id: str) -> tuple[int, int]:
        """``(message_count, last_seq)`` of ``session_id``: a cheap check for appended
        messages (``UnknownNameError`` if there is no such session)."""
        count, last = self._session_row("message_count, last_seq", session_id)
        return int(count), int(last)

    def _session_row(self, columns: str, session_id: str) -> tuple[Any, ...]:
        """``columns`` of the session's row (``UnknownNameError`` if there is none)."""
        row = self.store.fetchone(f"SELECT {columns} FROM sessions WHERE id = ?", (session_id,))
        if row is None:
            raise self._unknown(session_id)
        return tuple(row)

    def sessions(self, *, limit: int | None = None) -> list[Session]:
        """Sessions, newest first."""
        sql = f"SELECT {_SESSION} FROM sessions ORDER BY created DESC, rowid DESC"
        params: tuple[int, ...] = ()
        if limit is not None:
            sql += " LIMIT ?"
            params = (limit,)
        return [Session(*row) for row in self.store.fetchall(sql, params)]

    def count(self, session_id: str) -> int:
        """Number of messages stored in the session."""
        return self.session(session_id).message_count

    def _unknown(self, session_id: str) -> UnknownNameError:
        recent = [s.id for s in self.sessions(limit=10)]
        return UnknownNameError("session", session_id, recent, field="session")

    # -- appending ----------------------------------------------------------------

    def append(self, session_id: str, message: Message) -> int:
        """Store ``message`` at the end of the session and return its seq.

        The message is counted here, once, with the store's counter.
        """
        return self.append_many(session_id, [message])[0]

    def append_many(self, session_id: str, messages: Iterable[Message]) -> list[int]:
        """Store several messages in one transaction (all or none); return their seqs."""
        batch = list(messages)
        if not batch:
            return []
        # Everything that can fail on bad input happens before the transaction.
        prepared = []
        name = self._counter.name
        for given in batch:
            if not isinstance(given, Message):
                raise ConversationError(f"expected a Message, got {type(given).__name__}")
            message = _stored_form(given)
            calls = message.tool_calls_json()
            tokens = self._counter.count(token_text(message))
            prepared.append((message, calls, tokens))
        created = _now()
        with self.store.transaction() as conn:
            row = conn.execute(
                "SELECT last_seq FROM sessions WHERE id = ?" + self.store.for_update(),
                (session_id,),
            ).fetchone()
            if row is None:
                raise self._unknown(session_id)
            seq = int(row[0])
            check_tool_results(conn, session_id, seq, batch)
            first = seq + 1
            rows = [
                (session_id, first + i, message.role, message.content, calls,
                 message.tool_call_id, tokens, name, created)
                for i, (message, calls, tokens) in enumerate(prepared)
            ]  # fmt: skip
            conn.executemany(  # one round trip on PostgreSQL (a pipeline), not one per row
                "INSERT INTO messages(session_id, seq, role, content, tool_calls,"
                " tool_call_id, tokens, counter, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            total = sum(tokens for _, _, tokens in prepared)
            conn.execute(
                "UPDATE sessions SET last_seq = ?, message_count = message_count + ?,"
                " token_total = token_total + ? WHERE id = ?",
                (seq + len(batch), len(batch), total, session_id),
            )
        return list(range(first, first + len(batch)))

    # -- reading ------------------------------------------------------------------

    def iter_backward(
        self, session_id: str, *, page: int = _PAGE, **window: Unpack[ReadWindow]
    ) -> Iterator[Message]:
        """Messages newest first (before ``before_seq``), read lazily a page at a time.

        With ``counter`` (other than the store's), ``tokens`` are that
        counter's counts: computed once per message and cached.
        """
        cursor = window.get("before_seq")
        counter = window.get("counter")
        size = max(1, page)
        first = True
        while True:
            rows = self._messages(
                session_id,
                "seq < ? ORDER BY seq DESC LIMIT ?",
                (_END if cursor is None else cursor, size),
            )
            if not rows:
                if first:
                    self.session(session_id)  # raises for an unknown session
                return
            first = False
            yield from self._materialize(rows, counter)
            if len(rows) < size:
                return
            cursor = int(rows[-1][1])
            size = min(size * 2, _MAX_PAGE)

    def recent(
        self, session_id: str, limit: int = 6, **window: Unpack[ReadWindow]
    ) -> list[Message]:
        """The newest ``limit`` messages, oldest first."""
        if limit <= 0:
            return []
        out: list[Message] = []
        for message in self.iter_backward(session_id, page=limit, **window):
            out.append(message)
            if len(out) >= limit:
                break
        out.reverse()
        return out

    def within_budget(
        self,
        session_id: str,
        budget: int,
        *,
        max_messages: int | None = None,
        **window: Unpack[ReadWindow],
    ) -> list[Message]:
        """The newest messages whose token counts sum to at most ``budget``, oldest first.

        Stops at the first (going backward) message that would not fit, so the
        result is always a contiguous tail of the history.
        """
        out: list[Message] = []
        used = 0
        for message in self.iter_backward(session_id, **window):
            tokens = message.tokens or 0
            if used + tokens > budget or (max_messages is not None and len(out) >= max_messages):
                break
            used += tokens
            out.append(message)
        out.reverse()
        return out

    def between(
        self, session_id: str, *, after_seq: int = 0, upto_seq: int | None = None
    ) -> list[Message]:
        """Messages with ``after_seq < seq <= upto_seq``, oldest first (for summarizers)."""
        upper = upto_seq if upto_seq is not None else _END
        rows = self._messages(session_id, "seq > ? AND seq <= ? ORDER BY seq", (after_seq, upper))
        if not rows:
            self.session(session_id)  # raises for an unknown session
        return list(self._materialize(rows, None))

    def _messages(
        self, session_id: str, condition: str, params: Sequence[Any]
    ) -> list[tuple[Any, ...]]:
        """Rows (:data:`_COLUMNS`) of the session's messages that meet ``condition``."""
        with self._reader() as reader:
            return reader.execute(
                f"SELECT {_COLUMNS} FROM messages WHERE session_id = ? AND {condition}",
                (session_id, *params),
            ).fetchall()

    def _materialize(
        self, rows: Sequence[tuple[Any, ...]], counter: TokenCounter | None
    ) -> Iterator[Message]:
        """Messages for ``rows``, built lazily (only the ones a caller consumes)."""
        wanted = counter.name if counter is not None else None
        recount: dict[int, int] = {}
        if counter is not None and wanted is not None:
            foreign = [int(row[0]) for row in rows if row[7] != wanted]
            if foreign:
                recount = self._counts_for(counter, foreign, rows)
        for row in rows:
            mid = row[0]
            if mid in recount:
                yield stored_message(row, recount[mid], wanted or row[7])
            else:
                yield stored_message(row, row[6], row[7])

    def _counts_for(
        self, counter: TokenCounter, ids: list[int], rows: Sequence[tuple[Any, ...]]
    ) -> dict[int, int]:
        """Counts by ``counter`` for message ``ids``: cached ones read, others counted once."""
        marks = ",".join("?" * len(ids))
        cached = dict(
            self.store.fetchall(
                f"SELECT message_id, tokens FROM message_tokens"
                f" WHERE counter = ? AND message_id IN ({marks})",
                (counter.name, *ids),
            )
        )
        needed = set(ids).difference(cached)
        missing = [row for row in rows if row[0] in needed]
        if missing:
            fresh = []
            for row in missing:
                message = Message(row[2], row[3], tool_calls_from_json(row[4]), row[5])
                fresh.append((int(row[0]), counter.name, counter.count(token_text(message))))
            with self.store.transaction() as conn:
                conn.executemany(
                    "INSERT INTO message_tokens(message_id, counter, tokens)"
                    " VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                    fresh,
                )
            cached.update({mid: tokens for mid, _, tokens in fresh})
        return cached

    # -- summaries ----------------------------------------------------------------

    def save_summary(self, session_id: str, covers_seq: int, text: str) -> Summary:
        """Store a running summary of the messages with ``seq <= covers_seq``."""
        session = self.session(session_id)
        if covers_seq < 0 or covers_seq > session.last_seq:
            raise ConversationError(
                f"summary covers seq {covers_seq} but the session has {session.last_seq}",
                field="covers_seq",
            )
        if not isinstance(text, str):
            raise ConversationError("summary text must be text", field="text")
        tokens = self._counter.count(text)
        created = _now()
        with self.store.transaction() as conn:
            conn.execute(
                "INSERT INTO summaries(session_id, covers_seq, text, tokens, counter, created)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (session_id, covers_seq, text, tokens, self._counter.name, created),
            )
        return Summary(session_id, covers_seq, text, tokens, self._counter.name, created)

    def latest_summary(
        self, session_id: str, *, counter: TokenCounter | None = None
    ) -> Summary | None:
        """The summary covering the most messages (newest on ties), or ``None``."""
        row = self.store.fetchone(
            "SELECT id, covers_seq, text, tokens, counter, created FROM summaries"
            " WHERE session_id = ? ORDER BY covers_seq DESC, id DESC LIMIT 1",
            (session_id,),
        )
        if row is None:
            self.session(session_id)
            return None
        sid, covers, text, tokens, name, created = row
        if counter is not None and counter.name != name:
            key = (session_id, int(sid), counter.name)
            if key not in self._summary_counts:
                self._summary_counts[key] = counter.count(text)
            tokens, name = self._summary_counts[key], counter.name
        return Summary(session_id, covers, text, tokens, name, created)


def _stored_form(message: Message) -> Message:
    """``message`` as stored: secrets redacted as in the run tables
    (:mod:`personae.security.redact`), tool-call argument strings cut
    (:func:`personae.limits.cut_strings`)."""
    calls = [
        ToolCall(id=call.id, name=call.name, args=cut_strings(redact_value(dict(call.args))))
        for call in message.tool_calls
    ]
    return dataclasses.replace(message, content=redact_text(message.content), tool_calls=calls)
