"""The ``token_calibration`` table (migration 0001): token-estimate factors per model.

``personae.tokens.Calibration`` holds the arithmetic; it reaches this table through
:meth:`personae.store.db.Store.calibration_factors` and
:meth:`~personae.store.db.Store.update_calibration` (``tokens`` never imports ``store``).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Protocol

from personae.store._base import Conn

__all__ = ["factors", "update"]


class _Queryable(Protocol):
    """What these queries use of :class:`personae.store.db.Store` (which imports this
    module, so it is not named here)."""

    def read(self) -> AbstractContextManager[Conn]:
        """A connection for reads."""
        ...

    def transaction(self) -> AbstractContextManager[Conn]:
        """A write transaction."""
        ...

    def for_update(self) -> str:
        """The row-lock clause of the backend (empty on SQLite)."""
        ...


def factors(store: _Queryable) -> dict[str, tuple[float, int]]:
    """``{model key: (factor, samples)}`` of every calibrated model."""
    with store.read() as conn:
        rows = conn.execute("SELECT model, factor, samples FROM token_calibration").fetchall()
    return {str(r[0]): (float(r[1]), int(r[2])) for r in rows}


def update(
    store: _Queryable, key: str, move: Callable[[float, int], float | None]
) -> tuple[float, int] | None:
    """Re-read ``key``'s row inside a write transaction and store ``move(factor, samples)``.

    ``move`` returns the new factor, or ``None`` to leave the row alone. Returns the stored
    ``(factor, samples)``, or ``None`` when nothing changed. The row is locked for the
    transaction (SQLite: the write lock; PostgreSQL: ``FOR UPDATE``), so processes
    calibrating at once each count.
    """
    with store.transaction() as conn:
        row = conn.execute(
            "SELECT factor, samples FROM token_calibration WHERE model = ?" + store.for_update(),
            (key,),
        ).fetchone()
        current, samples = (float(row[0]), int(row[1])) if row else (1.0, 0)
        new = move(current, samples)
        if new is None:
            return None
        now = datetime.now(UTC).isoformat(timespec="milliseconds")
        conn.execute(
            "INSERT INTO token_calibration(model, factor, samples, updated)"
            " VALUES (?, ?, ?, ?) ON CONFLICT(model) DO UPDATE SET"
            " factor = excluded.factor, samples = excluded.samples,"
            " updated = excluded.updated",
            (key, new, samples + 1, now),
        )
    return new, samples + 1
