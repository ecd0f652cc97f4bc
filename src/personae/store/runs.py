"""Runs, their events and model calls in the project store (migrations 0002, 0005, 0007, 0010,
0012).

A run row is written before its id is shown anywhere (:meth:`RunStore.create`), with the
process that runs it; that process refreshes a heartbeat until :meth:`RunStore.finish`.
:meth:`RunStore.reconcile` marks ``running`` rows whose process is gone as ``crashed``.
Secrets in what is written (task, answer, errors, events, the context sent) are redacted
before it is stored, so every reader (``runs show``, the viewer, OTel export) gets clean data.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple, NotRequired, TypedDict, TypeVar, Unpack

from pydantic import BaseModel, ConfigDict, Field

from personae.errors import UnknownNameError, UsageError
from personae.security.policy import redact_secrets
from personae.store._liveness import Heartbeat, process_alive, this_process
from personae.store.answers import ModelAnswer
from personae.store.db import Conn, Store
from personae.store.status import CallRole, RunStatus

__all__ = [
    "STALE_SECONDS",
    "CallRole",
    "CallUsage",
    "EventRow",
    "ModelCallRecord",
    "ModelCallRow",
    "NewRun",
    "RunRecord",
    "RunStatus",
    "RunStore",
    "StoredEvent",
]


_R = TypeVar("_R", bound=BaseModel)


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
    """Model label (``scripted:...`` for the scripted replay server)."""
    status: RunStatus
    """running, done, partial, failed, cancelled, crashed (its process ended mid-run)."""
    started_at: str
    """Start time (UTC)."""
    finished_at: str | None
    """End time (UTC)."""
    final_text: str | None
    """The synthesized answer."""
    usage: dict[str, Any] = Field(default_factory=dict)
    """Total usage (requests, tokens)."""
    error: str | None = None
    """Why the run failed, was cancelled or crashed (``None``: no reason recorded)."""
    pid: int | None = None
    """Process that ran it."""
    host: str | None = None
    """Host name of that process."""
    heartbeat_at: str | None = None
    """When the process last said it was alive (UTC)."""
    parent_run_id: str | None = None
    """The run that started this one in another process (``None``: a user started it)."""
    trace_id: str | None = None
    """The W3C trace the run belongs to (shared by its whole tree)."""
    span_id: str | None = None
    """The run's own span id (its children's parent span)."""
    parent_span_id: str | None = None
    """The span the run's spans go under (its parent run's span)."""
    budget: dict[str, Any] | None = None
    """The caps the run ran under (``tokens``, ``cost``, ``calls``; ``None``: not recorded)."""
    replay_of: str | None = None
    """The run this run replays (``personae runs replay``; ``None``: not a replay)."""


class NewRun(TypedDict):
    """The columns a run starts with."""

    task: str
    """The user's task."""
    model: str
    """Model label."""
    persona: NotRequired[str | None]
    """Persona the run uses."""
    session_id: NotRequired[str | None]
    """Conversation session, if any."""


STALE_SECONDS = 600.0
"""A running row of another host (or without a pid) is crashed after this long without a
heartbeat."""


class StoredEvent(BaseModel):
    """An event as stored."""

    model_config = ConfigDict(frozen=True)

    seq: int
    kind: str
    at: str
    subtask: int | None
    message: str
    data: dict[str, Any]


class CallUsage(NamedTuple):
    """The usage of one stored model call, as the usage tree sums it."""

    run_id: str
    role: str
    persona: str | None
    model: str
    input_tokens: int
    """Input tokens the provider reported."""
    output_tokens: int
    """Output tokens the provider reported."""
    counted_input_tokens: int | None
    """Input tokens personae counted itself for the whole request (``None``: not counted)."""


class ModelCallRow(BaseModel):
    """A model call as written to ``model_calls``: who called, with which assembled context
    and budget report, and what came back."""

    model_config = ConfigDict(frozen=True)

    role: CallRole
    persona: str | None = None
    subtask: int | None = None
    model: str
    context_text: str
    budget: dict[str, Any]
    usage: dict[str, Any]
    at: str = Field(default_factory=_now)
    answer: ModelAnswer | None = None
    """What the model answered (``None``: stored before answers were kept)."""


class ModelCallRecord(ModelCallRow):
    """One stored model call: a :class:`ModelCallRow` with its number in the run."""

    seq: int


class RunStore:
    """Table access for runs, run events and model calls."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._call_seq: dict[str, int] = {}
        self._beats: dict[str, Heartbeat] = {}

    def create(
        self,
        *,
        run_id: str | None = None,
        events: Sequence[EventRow] = (),
        heartbeat: bool = True,
        **run: Unpack[NewRun],
    ) -> str:
        """Start a run (this process runs it) with the columns ``run``; returns its id.

        ``run_id`` names a run stored earlier (by ``personae run`` before it showed the
        id): its row is updated, keeping its start time and events. ``events`` are stored
        in the same transaction. With ``heartbeat``, a thread refreshes the run's
        heartbeat until :meth:`finish`.
        """
        run_id = run_id or f"run-{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"
        me = this_process()
        now = _now()
        with self.store.transaction() as conn:
            conn.execute(
                "INSERT INTO runs(id, session_id, task, persona, model, started_at, pid,"
                " pid_started, host, heartbeat_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT(id) DO UPDATE SET session_id=excluded.session_id,"
                " task=excluded.task, persona=excluded.persona, model=excluded.model,"
                " pid=excluded.pid, pid_started=excluded.pid_started, host=excluded.host,"
                " heartbeat_at=excluded.heartbeat_at",
                (
                    run_id,
                    run.get("session_id"),
                    redact_secrets(run["task"]),
                    run.get("persona"),
                    run["model"],
                    now,
                    me.pid,
                    me.started,
                    me.host,
                    now,
                ),
            )
            _insert_events(conn, run_id, events)
        if heartbeat and run_id not in self._beats:
            self._beats[run_id] = Heartbeat(lambda at: self._beat(run_id, at)).start()
        return run_id

    def _beat(self, run_id: str, at: str) -> None:
        with self.store.transaction() as conn:
            conn.execute(
                "UPDATE runs SET heartbeat_at=? WHERE id=? AND status='running'", (at, run_id)
            )

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

    def add_model_call(self, run_id: str, **fields: Any) -> None:
        """Store one model call: ``fields`` are :class:`ModelCallRow`'s (``at``: now)."""
        self.write_batch(run_id, events=(), calls=[ModelCallRow(**fields)])

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
                " context_text, budget_json, usage_json, at, answer_json)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                [
                    (run_id, first + i, c.role, c.persona, c.subtask, c.model,
                     redact_secrets(c.context_text),
                     json.dumps(redact_secrets(c.budget), default=str), json.dumps(c.usage), c.at,
                     None if c.answer is None else c.answer.model_dump_json())
                    for i, c in enumerate(calls)
                ],
            )  # fmt: skip
        self._call_seq[run_id] = first + len(calls) - 1

    def finish(
        self,
        run_id: str,
        *,
        status: RunStatus,
        final_text: str,
        usage: dict[str, Any],
        error: str | None = None,
    ) -> None:
        """Mark a run finished (``error``: why it failed or was cancelled)."""
        self._stop_beat(run_id)
        with self.store.transaction() as conn:
            conn.execute(
                "UPDATE runs SET status=?, final_text=?, usage_json=?, finished_at=?,"
                " error=COALESCE(?, error) WHERE id=?",
                (
                    status,
                    redact_secrets(final_text),
                    json.dumps(usage),
                    _now(),
                    redact_secrets(error),
                    run_id,
                ),
            )

    def _stop_beat(self, run_id: str) -> None:
        beat = self._beats.pop(run_id, None)
        if beat is not None:
            beat.stop()

    def settle(self, run_id: str, *, status: RunStatus, error: str) -> None:
        """Record why a run ended early: sets ``status`` if still running, ``error`` if unset.

        For the process edge (the CLI), after whatever finished the run has had its say.
        """
        self._stop_beat(run_id)
        with self.store.transaction() as conn:
            conn.execute(
                "UPDATE runs SET status=CASE WHEN status='running' THEN ? ELSE status END,"
                " finished_at=COALESCE(finished_at, ?), error=COALESCE(error, ?) WHERE id=?",
                (status, _now(), redact_secrets(error), run_id),
            )

    def reconcile(self, *, now: datetime | None = None) -> list[str]:
        """Mark ``running`` runs whose process is gone as ``crashed``; returns their ids.

        On this host a run's process is checked by pid (and its start time, so a reused pid
        does not count); for rows of another host, or without a pid, a heartbeat older than
        :data:`STALE_SECONDS` means crashed.
        """
        me = this_process()
        moment = now or datetime.now(UTC)
        rows = self.store.fetchall(
            "SELECT id, pid, pid_started, host, heartbeat_at, started_at FROM runs"
            " WHERE status='running'"
        )
        crashed: list[tuple[str, str, str]] = []
        for row in rows:
            last = row["heartbeat_at"] or row["started_at"]
            if row["pid"] is not None and row["host"] == me.host:
                if process_alive(row["pid"], row["pid_started"]):
                    continue
                why = f"process {row['pid']} ended without finishing the run"
            else:
                age = (moment - datetime.fromisoformat(last)).total_seconds()
                if age < STALE_SECONDS:
                    continue
                why = f"no heartbeat for {int(age)} s"
            crashed.append((f"crashed: {why} (last heartbeat {last})", last, row["id"]))
        if crashed:
            with self.store.transaction() as conn:
                conn.executemany(
                    "UPDATE runs SET status='crashed', error=COALESCE(error, ?),"
                    " finished_at=COALESCE(finished_at, ?) WHERE id=? AND status='running'",
                    crashed,
                )
        return [c[2] for c in crashed]

    def list_runs(self, *, limit: int = 20, session_id: str | None = None) -> list[RunRecord]:
        """Most recent runs first."""
        sql = "SELECT * FROM runs"
        params: tuple[Any, ...] = ()
        if session_id is not None:
            sql += " WHERE session_id = ?"
            params = (session_id,)
        sql += " ORDER BY started_at DESC, rowid DESC LIMIT ?"
        return [
            RunRecord.model_validate(_fields(r)) for r in self.store.fetchall(sql, (*params, limit))
        ]

    def get(self, run_id: str) -> RunRecord:
        """One run (a unique id prefix works); UnknownNameError lists recent ids."""
        rows = self.store.fetchall(
            "SELECT * FROM runs WHERE id = ? OR id LIKE ? ORDER BY started_at DESC",
            (run_id, f"{run_id}%"),
        )
        exact = [r for r in rows if r["id"] == run_id]
        if exact or len(rows) == 1:
            return RunRecord.model_validate(_fields((exact or rows)[0]))
        if len(rows) > 1:
            ids = ", ".join(r["id"] for r in rows[:10])
            raise UsageError(
                f"run id prefix {run_id!r} is ambiguous: {len(rows)} runs match ({ids})"
            )
        raise UnknownNameError("run", run_id, [r.id for r in self.list_runs(limit=10)])

    def link(
        self, run_id: str, *, trace_id: str, span_id: str, parent_run_id: str | None = None,
        parent_span_id: str | None = None, budget: dict[str, Any] | None = None,
    ) -> None:  # fmt: skip
        """Record where the run sits in its tree: its parent run, trace, spans and caps."""
        with self.store.transaction() as conn:
            conn.execute(
                "UPDATE runs SET parent_run_id=?, trace_id=?, span_id=?, parent_span_id=?,"
                " budget_json=? WHERE id=?",
                (parent_run_id, trace_id, span_id, parent_span_id,
                 None if budget is None else json.dumps(budget), run_id),
            )  # fmt: skip

    def descendants(self, run_id: str) -> list[RunRecord]:
        """Every run below ``run_id`` (children, their children ...), oldest first."""
        rows = self.store.fetchall(
            "WITH RECURSIVE tree(id, depth) AS (SELECT id, 1 FROM runs WHERE parent_run_id = ?"
            " UNION ALL SELECT r.id, t.depth + 1 FROM runs r JOIN tree t"
            " ON r.parent_run_id = t.id WHERE t.depth < 64)"
            " SELECT runs.* FROM runs JOIN tree ON runs.id = tree.id"
            " ORDER BY runs.started_at, runs.id",
            (run_id,),
        )
        return [RunRecord.model_validate(_fields(r)) for r in rows]

    def call_usage(self, run_ids: Sequence[str]) -> list[CallUsage]:
        """The usage of every model call of the runs ``run_ids``, in order."""
        out: list[CallUsage] = []
        ids = list(dict.fromkeys(run_ids))
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ", ".join("?" for _ in chunk)
            rows = self.store.fetchall(
                "SELECT run_id, role, persona, model, usage_json FROM model_calls"
                f" WHERE run_id IN ({marks}) ORDER BY run_id, seq",
                tuple(chunk),
            )
            for row in rows:
                usage = json.loads(row["usage_json"] or "{}")
                counted = usage.get("counted_input_tokens")
                out.append(CallUsage(
                    row["run_id"], row["role"], row["persona"], row["model"],
                    _int(usage.get("input_tokens")), _int(usage.get("output_tokens")),
                    counted if isinstance(counted, int) else None,
                ))  # fmt: skip
        return out

    def events(self, run_id: str) -> list[StoredEvent]:
        """The run's events in order."""
        return self._of_run(StoredEvent, "run_events", run_id)

    def model_calls(self, run_id: str) -> list[ModelCallRecord]:
        """The run's model calls in order."""
        return self._of_run(ModelCallRecord, "model_calls", run_id)

    def _of_run(self, model: type[_R], table: str, run_id: str) -> list[_R]:
        """The rows of ``table`` (run_events, model_calls) of one run, by seq."""
        rows = self.store.fetchall(
            f"SELECT * FROM {table} WHERE run_id = ? ORDER BY seq", (run_id,)
        )
        return [model.model_validate(_fields(r)) for r in rows]


class EventRow(NamedTuple):
    """An event as written to ``run_events``."""

    seq: int
    kind: str
    at: str
    message: str
    subtask: int | None
    data: dict[str, Any]


def _insert_events(conn: Conn, run_id: str, rows: Sequence[EventRow]) -> None:
    # DO NOTHING: the start event `personae run` stored with the run comes again from its bus.
    conn.executemany(
        "INSERT INTO run_events(run_id, seq, kind, at, subtask, message, data_json)"
        " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        [
            (
                run_id,
                r.seq,
                r.kind,
                r.at,
                r.subtask,
                redact_secrets(r.message),
                json.dumps(redact_secrets(r.data), default=str),
            )
            for r in rows
        ],
    )


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _fields(row: Any) -> dict[str, Any]:
    """A stored row as model fields: each ``x_json`` column decoded into field ``x``
    (``NULL`` stays ``None``); columns the model has no field for are ignored by it."""
    fields = dict(row)
    for column in [c for c in fields if c.endswith("_json")]:
        text = fields.pop(column)
        fields[column.removesuffix("_json")] = None if text is None else json.loads(text)
    return fields
