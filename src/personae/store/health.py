"""Can this project's store be written? (``personae doctor``'s store check.)"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from personae.store.db import STORE_ERRORS, Store, database_url_for

__all__ = ["database_url_for", "postgres_problem", "sqlite_write_problem"]


def sqlite_write_problem(db: Path) -> str | None:
    """Why the existing SQLite file ``db`` cannot take a write lock (``None``: it can).

    Takes and releases the write lock without migrating or changing anything.
    """
    try:
        conn = sqlite3.connect(f"file:{db}?mode=rw", uri=True, timeout=2.0)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return str(exc)
    return None


def postgres_problem(db: Path, url: str) -> str | None:
    """Why the PostgreSQL store cannot be opened and migrated (``None``: it can)."""
    try:
        Store(db, url=url).close()
    except STORE_ERRORS as exc:
        return str(exc)
    return None
