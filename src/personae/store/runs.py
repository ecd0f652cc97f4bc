"""Runs, their events and model calls in the project store (migration 0002)."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from personae.errors import UnknownNameError, UsageError
from personae.store.db import Store

__all__ = ["EventRow", "ModelCallRecord", "ModelCallRow", "RunRecord", "RunStore", "StoredEvent"]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class RunRecord(BaseModel):
    """One stored run."""

    model_config = ConfigDict(frozen=True)

    id: str
    """Run id."""
    session_id: str | None
    """Conversation session, if any."""
    task: str
    """The user's task."""
    persona: str | None
    """Persona the run used."""
    model: str
    """Model label (``scripted:...`` for the scripted model)."""
    status: str
    """running, done, partial, failed."""
    started_at: str
    """Start time (UTC)."""
    finished_at: str | None
    """End time (UTC)."""
    final_text: str | None
    """The synthesized answer."""
    usage: dict[str, Any] = Field(default_factory=dict)
    """Total usage (requests, tokens)."""


class StoredEvent(BaseModel):
    """An event as stored."""

    model_config = ConfigDict(frozen=True)

    seq: int
    kind: str
    at: str
    subtask: int | None
    message: str
    data: dict[str, Any]


class ModelCallRecord(BaseModel):
    """One model call: who called, with which assembled context and budget report."""

    model_config = ConfigDict(frozen=True)

    seq: int
    role: str
    persona: str | None
    subtask: int | None
    model: str
    context_text: str
    budget: dict[str, Any]
    usage: dict[str, Any]
    at: str


class RunStore:
    """Table access for runs, run events and model calls."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._call_seq: dict[str, int] = {}

    def create(
        self,
        *,
        task: str,
        model: str,
        persona: str | None = None,
        session_id: str | None = None,
        run_id: str | None = None,
    ) -> str:
        """Start a run; returns its id (``run_id`` when given: one announced earlier)."""
        run_id = run_id or f"run-{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"
        with self.store.transaction() as conn:
            conn.execute(
                "INSERT INTO runs(id, session_id, task, persona, model, started_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (run_id, session_id, task, persona, model, _now()),
            )
        return run_id

    def add_event(
        self,
        run_id: str,
        *,
        seq: int,
        kind: str,
        at: str,
        message: str,
        subtask: int | None,
        data: dict[str, Any],
    ) -> None:
        """Store one event."""
        self.add_events(run_id, [EventRow(seq, kind, at, message, subtask, data)])

    def add_events(self, run_id: str, rows: Sequence[EventRow]) -> None:
        """Store several events in one transaction."""
        if not rows:
            return
        with self.store.transaction() as conn:
            _insert_events(conn, run_id, rows)

    def add_model_call(
        self,
        run_id: str,
        *,
        role: str,
        model: str,
        context_text: str,
        budget: dict[str, Any],
        usage: dict[str, Any],
        persona: str | None = None,
        subtask: int | None = None,
    ) -> None:
        """Store one model call's assembled context and budget report."""
        row = ModelCallRow(role, persona, subtask, model, context_text, budget, usage, _now())
        self.write_batch(run_id, events=(), calls=[row])

    def write_batch(
        self, run_id: str, *, events: Sequence[EventRow], calls: Sequence[ModelCallRow]
    ) -> None:
        """Store events and model calls in one transaction (calls numbered in order)."""
        if not events and not calls:
            return
        first = self._call_seq.get(run_id, 0) + 1
        with self.store.transaction() as conn:
            _insert_events(conn, run_id, events)
            conn.executemany(
                "INSERT INTO model_calls(run_id, seq, role, persona, subtask, model,"
                " context_text, budget_json, usage_json, at) VALUES (?,?,?,?,?,?,?,?,?,?)",
                [
                    (run_id, first + i, c.role, c.persona, c.subtask, c.model, c.context_text,
                     json.dumps(c.budget, default=str), json.dumps(c.usage), c.at)
                    for i, c in enumerate(calls)
                ],
            )  # fmt: skip
        self._call_seq[run_id] = first + len(calls) - 1

    def finish(self, run_id: str, *, status: str, final_text: str, usage: dict[str, Any]) -> None:
        """Mark a run finished."""
        with self.store.transaction() as conn:
            conn.execute(
                "UPDATE runs SET status=?, final_text=?, usage_json=?, finished_at=? WHERE id=?",
                (status, final_text, json.dumps(usage), _now(), run_id),
            )

    def list_runs(self, *, limit: int = 20, session_id: str | None = None) -> list[RunRecord]:
        """Most recent runs first."""
        sql = "SELECT * FROM runs"
        params: tuple[Any, ...] = ()
        if session_id is not None:
            sql += " WHERE session_id = ?"
            params = (session_id,)
        sql += " ORDER BY started_at DESC, rowid DESC LIMIT ?"
        with self.store.lock:
            rows = self.store.conn.execute(sql, (*params, limit)).fetchall()
        return [_run(row) for row in rows]

    def get(self, run_id: str) -> RunRecord:
        """One run (a unique id prefix works); UnknownNameError lists recent ids."""
        with self.store.lock:
            rows = self.store.conn.execute(
                "SELECT * FROM runs WHERE id = ? OR id LIKE ? ORDER BY started_at DESC",
                (run_id, f"{run_id}%"),
            ).fetchall()
        exact = [r for r in rows if r["id"] == run_id]
        if exact or len(rows) == 1:
            return _run((exact or rows)[0])
        if len(rows) > 1:
            ids = ", ".join(r["id"] for r in rows[:10])
            raise UsageError(
                f"run id prefix {run_id!r} is ambiguous: {len(rows)} runs match ({ids})"
            )
        raise UnknownNameError("run", run_id, [r.id for r in self.list_runs(limit=10)])

    def events(self, run_id: str) -> list[StoredEvent]:
        """The run's events in order."""
        with self.store.lock:
            rows = self.store.conn.execute(
                "SELECT * FROM run_events WHERE run_id = ? ORDER BY seq", (run_id,)
            ).fetchall()
        return [
            StoredEvent(
                seq=r["seq"],
                kind=r["kind"],
                at=r["at"],
                subtask=r["subtask"],
                message=r["message"],
                data=json.loads(r["data_json"]),
            )
            for r in rows
        ]

    def model_calls(self, run_id: str) -> list[ModelCallRecord]:
        """The run's model calls in order."""
        with self.store.lock:
            rows = self.store.conn.execute(
                "SELECT * FROM model_calls WHERE run_id = ? ORDER BY seq", (run_id,)
            ).fetchall()
        return [
            ModelCallRecord(
                seq=r["seq"],
                role=r["role"],
                persona=r["persona"],
                subtask=r["subtask"],
                model=r["model"],
                context_text=r["context_text"],
                budget=json.loads(r["budget_json"]),
                usage=json.loads(r["usage_json"]),
                at=r["at"],
            )
            for r in rows
        ]


class ModelCallRow(NamedTuple):
    """A model call as written to ``model_calls``."""

    role: str
    persona: str | None
    subtask: int | None
    model: str
    context_text: str
    budget: dict[str, Any]
    usage: dict[str, Any]
    at: str


class EventRow(NamedTuple):
    """An event as written to ``run_events``."""

    seq: int
    kind: str
    at: str
    message: str
    subtask: int | None
    data: dict[str, Any]


def _insert_events(conn: sqlite3.Connection, run_id: str, rows: Sequence[EventRow]) -> None:
    conn.executemany(
        "INSERT INTO run_events(run_id, seq, kind, at, subtask, message, data_json)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        [
            (run_id, r.seq, r.kind, r.at, r.subtask, r.message, json.dumps(r.data, default=str))
            for r in rows
        ],
    )


def _run(row: Any) -> RunRecord:
    return RunRecord(
        id=row["id"],
        session_id=row["session_id"],
        task=row["task"],
        persona=row["persona"],
        model=row["model"],
        status=row["status"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        final_text=row["final_text"],
        usage=json.loads(row["usage_json"]),
    )
