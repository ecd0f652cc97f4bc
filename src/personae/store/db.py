"""The SQLite store: one WAL database per project, numbered SQL migrations.

Migrations are the files ``store/migrations/NNNN_name.sql``, applied in
number order, each in its own transaction, exactly once (recorded in
``schema_migrations``). Each part of personae owns its own migration files.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from personae.errors import PersonaeError

__all__ = ["Store", "StoreError"]

_MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


class StoreError(PersonaeError):
    """The store cannot be opened or migrated."""


def _migrations() -> list[tuple[int, str, str]]:
    folder = resources.files("personae.store") / "migrations"
    found: list[tuple[int, str, str]] = []
    for entry in folder.iterdir():
        match = _MIGRATION_NAME.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    found.sort()
    numbers = [n for n, _, _ in found]
    if len(numbers) != len(set(numbers)):
        raise StoreError(f"duplicate migration numbers: {numbers}")
    return found


class Store:
    """A connection to a personae SQLite database (WAL mode, migrated on open).

    Safe to share between threads: statements run under one lock.
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        try:
            if str(path) != ":memory:":
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(
                str(path), isolation_level=None, check_same_thread=False, timeout=30.0
            )
        except (OSError, sqlite3.Error) as exc:
            reason: object = exc
            if isinstance(exc, OSError) and exc.strerror:
                reason = exc.strerror
                if exc.filename is not None and str(exc.filename) != str(path):
                    reason = f"{exc.filename}: {exc.strerror}"
            raise StoreError(f"{path}: cannot open store: {reason}") from exc
        self.conn.row_factory = sqlite3.Row
        self.lock = threading.RLock()
        try:
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except sqlite3.DatabaseError as exc:  # not a database, corrupt, read-only, locked
            self.conn.close()
            raise StoreError(f"{path}: cannot open store: {exc}") from exc

    def _migrate(self) -> None:
        with self.transaction() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " number INTEGER PRIMARY KEY, name TEXT NOT NULL,"
                " applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')))"
            )
            done = {row[0] for row in conn.execute("SELECT number FROM schema_migrations")}
        for number, name, sql in _migrations():
            if number in done:
                continue
            with self.transaction() as conn:
                for statement in _split_sql(sql):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_migrations(number, name) VALUES (?, ?)", (number, name)
                )

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``): all or nothing."""
        with self.lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")

    def applied_migrations(self) -> list[str]:
        """Names of the applied migrations, in order."""
        with self.lock:
            rows = self.conn.execute("SELECT name FROM schema_migrations ORDER BY number")
            return [row[0] for row in rows]

    def close(self) -> None:
        """Close the connection."""
        with self.lock:
            self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _split_sql(sql: str) -> list[str]:
    """Split a migration into statements (``sqlite3.complete_statement`` aware)."""
    statements: list[str] = []
    buffer = ""
    for line in sql.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        statements.append(buffer.strip())
    return statements
