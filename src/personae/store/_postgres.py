"""The PostgreSQL backend of :class:`~personae.store.db.Store` (``personae[postgres]``).

Imported only when a database URL is configured: ``import personae`` and the hook gate
never import psycopg. A :class:`PostgresBackend` holds a psycopg 3 connection pool; each
:meth:`~PostgresBackend.connection` block is one transaction, committed when the block
ends and rolled back when it raises.

The dialect seam is small: statements keep SQLite's ``?`` placeholders and are rewritten
once (cached) to psycopg's ``%s``; rows index by position and by name like
``sqlite3.Row``; driver errors become :class:`~personae.store.db.StoreError`
(:class:`~personae.store.db.StoreIntegrityError` for constraint violations). Migrations
run in one transaction under an advisory lock, so processes opening a new database at
once apply each migration exactly once.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from personae.store._base import (
    Conn,
    Cursor,
    StoreError,
    StoreIntegrityError,
    added_column,
    split_sql,
)

try:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise StoreError(
        "a PostgreSQL database URL is configured but psycopg is not installed:"
        " pip install 'personae[postgres]'"
    ) from exc

__all__ = ["POOL_SIZE_ENV", "PostgresBackend", "describe_url", "translate"]

POOL_SIZE_ENV = "PERSONAE_DATABASE_POOL_SIZE"
"""Environment variable: most connections one open store keeps (default 4)."""
DEFAULT_POOL_SIZE = 4
CONNECT_TIMEOUT = 10.0
"""Seconds an open waits for its first connection before failing."""
MIGRATION_LOCK = 0x70657273  # advisory lock key ("pers") held while migrating


@functools.lru_cache(maxsize=512)
def translate(sql: str) -> str:
    """``sql`` with ``?`` placeholders as ``%s`` and literal ``%`` doubled (quotes respected)."""
    out: list[str] = []
    quote: str | None = None
    for ch in sql:
        if quote is not None:
            if ch == quote:
                quote = None
            out.append("%%" if ch == "%" else ch)
        elif ch in "'\"":
            quote = ch
            out.append(ch)
        elif ch == "?":
            out.append("%s")
        else:
            out.append("%%" if ch == "%" else ch)
    return "".join(out)


def describe_url(url: str) -> str:
    """Where ``url`` points, without its password (for messages)."""
    try:
        parts = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "an unparsable database URL"
    host = parts.get("host") or "local socket"
    port = f":{parts['port']}" if parts.get("port") else ""
    return f"postgresql database {parts.get('dbname') or '(default)'} on {host}{port}"


class _Row(tuple[Any, ...]):
    """A row indexable by position and by column name; ``dict(row)`` works."""

    _index: dict[str, int] = {}  # noqa: RUF012 - set per column list by _row_class

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._index[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        """Column names, in order."""
        return list(self._index)


@functools.lru_cache(maxsize=256)
def _row_class(names: tuple[str, ...]) -> type[_Row]:
    return type("Row", (_Row,), {"_index": {n: i for i, n in enumerate(names)}})


def _row_factory(cursor: Any) -> Any:
    names = tuple(col.name for col in cursor.description or ())
    cls = _row_class(names)
    return cls


def _store_error(exc: psycopg.Error) -> StoreError:
    message = _first_line(exc)
    if isinstance(exc, psycopg.IntegrityError):
        return StoreIntegrityError(message)
    return StoreError(f"PostgreSQL: {message}")


class PgConn:
    """A pooled connection speaking the store's ``?`` SQL (see :class:`Conn`)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def transaction(self) -> Any:
        """A transaction block on this connection (psycopg's)."""
        return self._conn.transaction()

    def execute(self, sql: str, params: Sequence[Any] = (), /) -> Cursor:
        """Run one statement."""
        try:
            return self._conn.execute(translate(sql), tuple(params))
        except psycopg.Error as exc:
            raise _store_error(exc) from exc

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]], /) -> object:
        """Run one statement for each row of parameters."""
        batch = [tuple(r) for r in rows]
        if not batch:
            return None
        try:
            with self._conn.cursor() as cur:
                cur.executemany(translate(sql), batch)
        except psycopg.Error as exc:
            raise _store_error(exc) from exc
        return None


class PostgresBackend:
    """A connection pool on one PostgreSQL database."""

    def __init__(self, url: str, migrations: list[tuple[int, str, str]]) -> None:
        """Connect once (a bad URL or a server that is down fails here, at once, with the
        driver's reason), apply missing ``migrations``, then open the pool."""
        self.url = url
        size = _pool_size()
        try:
            with psycopg.connect(url, connect_timeout=int(CONNECT_TIMEOUT)) as first:
                _migrate(PgConn(first), migrations)
        except psycopg.Error as exc:
            raise StoreError(f"cannot open {describe_url(url)}: {_first_line(exc)}") from exc
        self.pool: ConnectionPool[Any] = ConnectionPool(
            url,
            min_size=1,
            max_size=size,
            kwargs={"row_factory": _row_factory, "autocommit": False},
            open=False,
            name="personae-store",
        )
        try:
            self.pool.open(wait=True, timeout=CONNECT_TIMEOUT)
        except (PoolTimeout, psycopg.Error) as exc:
            self.pool.close()
            raise StoreError(f"cannot connect to {describe_url(url)}: {exc}") from exc

    @contextmanager
    def connection(self) -> Iterator[Conn]:
        """One transaction on a pooled connection (commit at the end, rollback on error)."""
        try:
            with self.pool.connection() as conn:
                yield PgConn(conn)
        except PoolTimeout as exc:
            raise StoreError(f"no free connection to {describe_url(self.url)}: {exc}") from exc
        except psycopg.Error as exc:  # the commit itself failed
            raise _store_error(exc) from exc

    def close(self) -> None:
        """Close the pool and its connections."""
        self.pool.close()


def _migrate(conn: PgConn, migrations: list[tuple[int, str, str]]) -> None:
    """Apply missing migrations in one transaction under an advisory lock.

    The usual open finds every migration recorded and takes no lock. Otherwise the lock
    makes concurrent first opens wait for each other; the recorded set is re-read under it.
    """
    wanted = {n for n, _, _ in migrations}
    with conn.transaction():
        if conn.execute("SELECT to_regclass('schema_migrations')").fetchone()[0]:
            done = {r[0] for r in conn.execute("SELECT number FROM schema_migrations").fetchall()}
            if done >= wanted:
                return
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(?)", (MIGRATION_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " number INTEGER PRIMARY KEY, name TEXT NOT NULL,"
            " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        done = {r[0] for r in conn.execute("SELECT number FROM schema_migrations").fetchall()}
        for number, name, sql in migrations:
            if number in done:
                continue
            for statement in split_sql(sql):
                if not _column_exists(conn, statement):
                    conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations(number, name) VALUES (?, ?)", (number, name)
            )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _column_exists(conn: Conn, statement: str) -> bool:
    """Whether ``statement`` adds a column that exists (makes re-runs idempotent)."""
    added = added_column(statement)
    if added is None:
        return False
    row = conn.execute(
        "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()"
        " AND table_name = ? AND column_name = ?",
        (added[0].lower(), added[1].lower()),
    ).fetchone()
    return row is not None


def _pool_size() -> int:
    raw = os.environ.get(POOL_SIZE_ENV, "").strip()
    if not raw:
        return DEFAULT_POOL_SIZE
    try:
        size = int(raw)
    except ValueError:
        size = 0
    if size < 1:
        raise StoreError(f"{POOL_SIZE_ENV}: must be a whole number of at least 1 (got {raw!r})")
    return size
