"""What both store backends share: errors, the connection protocol, migration parsing.

Imported by :mod:`personae.store.db` (the facade, SQLite) and
:mod:`personae.store._postgres` (PostgreSQL), which never import each other at module
level. Standard library only.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any, Literal, Protocol

from personae.errors import PersonaeError

__all__ = [
    "ADD_COLUMN",
    "Conn",
    "Cursor",
    "Dialect",
    "StoreError",
    "StoreIntegrityError",
    "added_column",
    "split_sql",
]

Dialect = Literal["sqlite", "postgres"]
"""Which SQL the store speaks."""


class StoreError(PersonaeError):
    """The store cannot be opened or migrated, or a statement failed on PostgreSQL."""


class StoreIntegrityError(StoreError):
    """A statement broke a constraint (unique key, check) on PostgreSQL."""


class Cursor(Protocol):
    """What a statement returns (``sqlite3.Cursor`` and psycopg's cursor fit)."""

    def fetchone(self) -> Any:
        """The next row, or ``None``."""
        ...

    def fetchall(self) -> list[Any]:
        """The remaining rows."""
        ...


class Conn(Protocol):
    """A connection inside :meth:`Store.read` or :meth:`Store.transaction`.

    Statements use ``?`` placeholders on both backends. Rows index by position and by
    column name (``row[0]``, ``row["id"]``) and convert with ``dict(row)``.
    """

    def execute(self, sql: str, params: Sequence[Any] = (), /) -> Cursor:
        """Run one statement."""
        ...

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]], /) -> object:
        """Run one statement for each row of parameters."""
        ...


def split_sql(sql: str) -> list[str]:
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


ADD_COLUMN = re.compile(r"^\s*ALTER\s+TABLE\s+(\w+)\s+ADD\s+(?:COLUMN\s+)?(\w+)", re.IGNORECASE)
"""An ``ALTER TABLE ... ADD COLUMN`` statement: groups table, column."""


def added_column(statement: str) -> tuple[str, str] | None:
    """``(table, column)`` when ``statement`` adds a column, else ``None``."""
    match = ADD_COLUMN.match(_strip_comments(statement))
    return None if match is None else (match.group(1), match.group(2))


def _strip_comments(statement: str) -> str:
    return "\n".join(line for line in statement.splitlines() if not line.lstrip().startswith("--"))
