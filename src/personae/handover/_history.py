"""``context.history`` from the conversation store: one summary per persona."""

from __future__ import annotations

import contextlib
from pathlib import Path

from personae.context.pinned import clip_summary
from personae.errors import PersonaeError
from personae.handover.schema import HistoryEntry
from personae.store.conversations import ConversationStore, Session
from personae.store.db import STORE_ERRORS, Store, database_url_for
from personae.tokens.registry import counter_for_model

__all__ = ["history_for", "history_from_conversations"]

MAX_SUMMARY = 2000
"""Characters of a summary a history entry carries (its pinned items are kept whole)."""
MAX_WITH_PINNED = 20_000
"""Characters an entry may take to keep a summary's pinned items (the schema's bound)."""


def history_from_conversations(
    conversations: ConversationStore, session_id: str | None = None, *, limit: int = 20
) -> list[HistoryEntry]:
    """Per-persona entries, oldest first: each persona's newest session with a persona.

    The summary is the session's latest stored summary, or else its last
    assistant message (clipped). ``session_id`` is always included when it
    has a persona.
    """
    sessions = conversations.sessions(limit=limit)
    if session_id is not None and all(s.id != session_id for s in sessions):
        with contextlib.suppress(PersonaeError):
            sessions.insert(0, conversations.session(session_id))
    newest: dict[str, Session] = {}
    for s in sessions:  # newest first
        if s.persona and s.persona not in newest:
            newest[s.persona] = s
    entries: list[HistoryEntry] = []
    for persona, s in reversed(newest.items()):  # oldest first: ties keep that order
        sid = s.id
        summary = conversations.latest_summary(sid)
        if summary is not None:
            text, when = summary.text, summary.created
        else:
            last = next(
                (m for m in conversations.iter_backward(sid) if m.role == "assistant"), None
            )
            if last is None:
                continue
            text, when = last.content, last.created or s.created
        title = s.title or ""
        clipped = clip_summary(text, MAX_SUMMARY, hard=MAX_WITH_PINNED)
        try:
            entries.append(
                HistoryEntry(persona=persona, task=title, summary=clipped, timestamp=when)
            )
        except ValueError:
            continue  # a persona name or timestamp the handover schema cannot carry
    entries.sort(key=lambda e: e.timestamp)
    return entries


def history_for(db: Path, session_id: str | None = None) -> list[HistoryEntry]:
    """History from the project store at ``db`` (empty when there is no store yet)."""
    try:
        if not db.exists() and database_url_for(db) is None:
            return []
        store = Store(db)
    except (*STORE_ERRORS, PersonaeError):
        return []
    try:
        conversations = ConversationStore(store, counter_for_model(None))
        return history_from_conversations(conversations, session_id)
    finally:
        store.close()
