"""The handover ledger: an audit trail of handovers that outlives their files.

Every create and every result is recorded with the file's sha256, source and
target persona, status and times, so a handover can be found and audited even
after its file is deleted.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypedDict, Unpack

from personae.store.db import Conn, Store

__all__ = [
    "EventFacts",
    "EventNotes",
    "HandoverLedger",
    "LedgerEntry",
    "LedgerEvent",
    "NewHandover",
]

_TERMINAL = ("success", "failure", "partial")
_COLUMNS = (
    "handover_id, path, file_hash, source_persona, target_persona, task, status, error,"
    " created_at, updated_at, finished_at"
)


def _times() -> tuple[str, str]:
    """``(created_at, updated_at)`` of a new row: now, twice."""
    now = _now()
    return now, now


def _now() -> str:
    """UTC now as the ledger stores times (``2026-01-01T12:00:00.000Z``)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class NewHandover(TypedDict):
    """The columns a handover's ledger row starts with."""

    handover_id: str
    """The handover id."""
    path: Path
    """Where its file was written."""
    file_hash: str
    """sha256 of the file."""
    source_persona: str
    """Who hands over."""
    target_persona: str
    """Who receives."""
    task: str
    """The task."""


class EventNotes(TypedDict, total=False):
    """What an event may note besides its name and the file's path (all optional)."""

    status: str | None
    """The handover's status from now on (also updates the ledger row)."""
    file_hash: str | None
    """The file's hash at that point."""
    detail: str | None
    """Free text (error, attempt number ...); a failure's detail is the row's error."""


class EventFacts(EventNotes, total=False):
    """What an event may record besides its name (all optional)."""

    path: Path | None
    """The file's path at that point."""


@dataclass(frozen=True, kw_only=True)
class LedgerEntry:
    """One handover's current ledger row."""

    handover_id: str
    """The handover id."""
    path: str
    """Where its file was last written."""
    file_hash: str
    """sha256 of the file as last written."""
    source_persona: str
    """Who handed over."""
    target_persona: str
    """Who received."""
    task: str
    """The task."""
    status: str
    """created, running, success, failure or partial."""
    error: str | None
    """Last error, if any."""
    created_at: str
    """When it was created."""
    updated_at: str
    """When the row last changed."""
    finished_at: str | None
    """When a result was recorded."""


@dataclass(frozen=True, kw_only=True)
class LedgerEvent:
    """One event in a handover's audit trail."""

    handover_id: str
    """The handover id."""
    event: str
    """created, started, attempt, result ..."""
    status: str | None
    """Status at that point."""
    file_hash: str | None
    """File hash at that point."""
    path: str | None
    """File path at that point."""
    detail: str | None
    """Free text (error, attempt number ...)."""
    at: str
    """When."""


class HandoverLedger:
    """Ledger access on a :class:`~personae.store.db.Store`."""

    def __init__(self, store: Store) -> None:
        self.store = store

    @classmethod
    def open(cls, db_path: Path) -> HandoverLedger:
        """Open (and migrate) the store at ``db_path``."""
        return cls(Store(db_path))

    def close(self) -> None:
        """Close the underlying store."""
        self.store.close()

    def record_created(self, **row: Unpack[NewHandover]) -> None:
        """Record a new handover (or re-creation of the same id)."""
        with self.store.transaction() as conn:
            _insert(
                conn,
                row,
                "(handover_id) DO UPDATE SET path=excluded.path,"
                " file_hash=excluded.file_hash, updated_at=excluded.updated_at",
            )
            _event(
                conn,
                row["handover_id"],
                "created",
                {"status": "created", "file_hash": row["file_hash"], "path": row["path"]},
            )

    def record_event(self, handover_id: str, event: str, **facts: Unpack[EventFacts]) -> None:
        """Append an event; a status also updates the ledger row (terminal ones set finished_at)."""
        status = facts.get("status")
        path = facts.get("path")
        with self.store.transaction() as conn:
            _event(conn, handover_id, event, facts)
            if status is None:
                return
            finished = status in _TERMINAL
            now = _now()
            conn.execute(
                "UPDATE handover_ledger SET status=?,"
                " file_hash=COALESCE(?, file_hash), path=COALESCE(?, path),"
                " error=CASE WHEN ? THEN ? ELSE error END, updated_at=?,"
                " finished_at=CASE WHEN ? THEN ? ELSE finished_at END WHERE handover_id=?",
                (
                    status,
                    facts.get("file_hash"),
                    str(path) if path else None,
                    finished,
                    facts.get("detail") if status == "failure" else None,
                    now,
                    finished,
                    now,
                    handover_id,
                ),
            )

    def ensure(self, **row: Unpack[NewHandover]) -> None:
        """Insert a row for a handover created elsewhere (another project's ledger)."""
        with self.store.transaction() as conn:
            _insert(conn, row, "DO NOTHING")

    def get(self, handover_id: str) -> LedgerEntry | None:
        """The ledger row for ``handover_id`` (a unique prefix works too)."""
        rows = self.store.fetchall(
            f"SELECT {_COLUMNS} FROM handover_ledger WHERE handover_id LIKE ? ESCAPE '\\'"
            " ORDER BY created_at",
            (handover_id.replace("%", "").replace("_", "\\_") + "%",),
        )
        exact = [r for r in rows if r["handover_id"] == handover_id]
        chosen = exact or (rows if len(rows) == 1 else [])
        return LedgerEntry(**dict(chosen[0])) if chosen else None

    def recent(self, *, status: str | None = None, limit: int = 100) -> list[LedgerEntry]:
        """Most recent handovers first."""
        sql = f"SELECT {_COLUMNS} FROM handover_ledger"
        args: tuple[object, ...] = ()
        if status:
            sql += " WHERE status=?"
            args = (status,)
        sql += " ORDER BY created_at DESC, rowid DESC LIMIT ?"
        return [LedgerEntry(**dict(r)) for r in self.store.fetchall(sql, (*args, limit))]

    def events(self, handover_id: str) -> list[LedgerEvent]:
        """The audit trail of one handover, oldest first."""
        rows = self.store.fetchall(
            "SELECT handover_id, event, status, file_hash, path, detail, at"
            " FROM handover_events WHERE handover_id=? ORDER BY id",
            (handover_id,),
        )
        return [LedgerEvent(**dict(r)) for r in rows]


def _insert(conn: Conn, row: NewHandover, on_conflict: str) -> None:
    """Insert a ledger row (created and updated now), ``ON CONFLICT`` ``on_conflict``."""
    conn.execute(
        "INSERT INTO handover_ledger(handover_id, path, file_hash, source_persona,"
        " target_persona, task, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
        f" ON CONFLICT {on_conflict}",
        (
            row["handover_id"],
            str(row["path"]),
            row["file_hash"],
            row["source_persona"],
            row["target_persona"],
            row["task"],
            *_times(),
        ),
    )


def _event(conn: Conn, handover_id: str, event: str, facts: EventFacts) -> None:
    """Append one row to ``handover_events``."""
    path = facts.get("path")
    conn.execute(
        "INSERT INTO handover_events(handover_id, event, status, file_hash, path, detail, at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            handover_id,
            event,
            facts.get("status"),
            facts.get("file_hash"),
            str(path) if path else None,
            facts.get("detail"),
            _now(),
        ),
    )
