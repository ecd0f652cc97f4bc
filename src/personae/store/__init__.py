"""The project store (SQLite or PostgreSQL): conversations, runs and events, handover
ledger, memory index.

Names load on first use (``personae.store.status``, read by the event types, does not
open a database driver).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from personae._lazy import lazy_front

if TYPE_CHECKING:
    from personae.store.db import Store, StoreError

__all__ = ["Store", "StoreError"]

__getattr__ = lazy_front(
    __name__, {"Store": "personae.store.db", "StoreError": "personae.store.db"}
)
