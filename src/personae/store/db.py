"""The project store: SQLite by default, PostgreSQL when a database URL is configured.

One :class:`Store` facade over two backends. SQLite (the default, no configuration): one
WAL database file per project. PostgreSQL: ``PERSONAE_DATABASE_URL=postgresql://...`` (or
``database_url`` in ``.personae/config.yaml``) puts the same tables in a shared server
through a psycopg 3 connection pool (``personae[postgres]``; imported only then, see
``store/_postgres.py``). Repositories (conversations, runs, ledger, mind) talk to the store
through :meth:`Store.read` and :meth:`Store.transaction`, which yield a connection with
``execute``/``executemany`` taking ``?`` placeholders on both backends.

Migrations are the files ``store/migrations/NNNN_name.sql``, applied in number order,
exactly once (recorded in ``schema_migrations``). One file serves both backends: it is
written in SQLite's SQL, and :func:`~personae.store._base.for_dialect` applies the few
PostgreSQL spellings (64-bit integers, identities, timestamp defaults) and keeps the lines
marked ``-- only sqlite`` / ``-- only postgres`` for their backend. Each part of personae
owns its own migration files.

Many processes may open a new database at the same moment (parallel CLI commands, a
chain's children). On SQLite every migration runs in a ``BEGIN IMMEDIATE`` transaction
that first checks, inside that transaction, whether another process applied it meanwhile,
and every ``CREATE`` says ``IF NOT EXISTS``; waits use a busy timeout. On PostgreSQL the
migrations run in one transaction holding an advisory lock. The SQLite database file and
its ``-wal``/``-shm`` companions are private to the user (0600) whatever the umask.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from personae.fsutil import read_regular
from personae.layout import DIR_NAME, MAX_CONFIG_BYTES, Layout
from personae.store import calibration
from personae.store._base import (
    Conn,
    Cursor,
    Dialect,
    StoreError,
    StoreIntegrityError,
    added_column,
    for_dialect,
    split_sql,
)

if TYPE_CHECKING:
    from personae.store._postgres import PostgresBackend

__all__ = [
    "DATABASE_URL_ENV",
    "INTEGRITY_ERRORS",
    "STORE_ERRORS",
    "Conn",
    "Cursor",
    "Dialect",
    "Store",
    "StoreError",
    "StoreIntegrityError",
    "database_url_for",
    "is_store_error",
    "store_present",
]

_MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
BUSY_TIMEOUT = 30.0
"""Seconds a connection waits for another process's write lock before failing."""
DB_MODE = 0o600
"""Permission bits of the database file and its ``-wal``/``-shm`` files."""
DATABASE_URL_ENV = "PERSONAE_DATABASE_URL"
"""Environment variable naming a PostgreSQL database (wins over the project config)."""

INTEGRITY_ERRORS: tuple[type[sqlite3.IntegrityError], type[StoreIntegrityError]] = (
    sqlite3.IntegrityError,
    StoreIntegrityError,
)
"""What a constraint violation raises on either backend."""


STORE_ERRORS: tuple[type[sqlite3.Error], type[StoreError]] = (sqlite3.Error, StoreError)
"""What a database failure raises on either backend (for best-effort callers)."""


def is_store_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a database failure of either backend (for best-effort callers)."""
    return isinstance(exc, STORE_ERRORS)


def database_url_for(path: Path | str) -> str | None:
    """The PostgreSQL URL the store at ``path`` is redirected to, or ``None`` (SQLite).

    ``PERSONAE_DATABASE_URL`` wins; else ``database_url`` in the config of the project whose
    ``.personae/state.db`` ``path`` is. Only that one key is read here (with PyYAML, no
    validation): the hook gate calls this on every tool call. A config that cannot be read
    is an error, never a silent fallback to another database.
    """
    url = os.environ.get(DATABASE_URL_ENV, "").strip()
    if url:
        return url
    if str(path) == ":memory:":
        return None
    folder = Path(path).parent
    if folder.name != DIR_NAME:
        return None
    config = Layout(folder.parent).config_file
    return None if config is None else _config_url(config)


def store_present(path: Path | str) -> bool:
    """Whether the store at ``path`` may hold data: a database URL is configured for it, or
    its SQLite file exists (for "nothing stored yet" answers that must not create a file)."""
    return database_url_for(path) is not None or os.path.isfile(path)


def _config_url(config: Path) -> str | None:
    try:
        data = read_regular(config, max_bytes=MAX_CONFIG_BYTES)
    except OSError as exc:
        raise StoreError(f"{config}: cannot read database_url: {exc}") from None
    if b"database_url" not in data:
        return None  # the common case: no YAML parsed (the gate runs on every tool call)
    # local import: yaml loads only when the key is there (the gate runs on every tool call)
    import yaml

    try:
        raw = yaml.safe_load(data.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise StoreError(f"{config}: cannot read database_url: {exc}") from None
    value = raw.get("database_url") if isinstance(raw, dict) else None
    if value is None:
        return None
    if not isinstance(value, str):
        raise StoreError(f"{config}: database_url must be text")
    return value.strip() or None


def _migrations(dialect: Dialect = "sqlite") -> list[tuple[int, str, str]]:
    """``(number, name, sql)`` in number order, each file's SQL as ``dialect`` runs it."""
    folder = resources.files("personae.store") / "migrations"
    found: list[tuple[int, str, str]] = []
    for entry in folder.iterdir():
        match = _MIGRATION_NAME.match(entry.name)
        if match:
            sql = for_dialect(entry.read_text(encoding="utf-8"), dialect)
            found.append((int(match.group(1)), entry.name, sql))
    found.sort()
    numbers = [n for n, _, _ in found]
    if len(numbers) != len(set(numbers)):
        raise StoreError(f"duplicate migration numbers: {numbers}")
    return found


class Store:
    """A personae database: SQLite (WAL, migrated on open) or PostgreSQL (pooled).

    ``path`` is the SQLite file; ``url`` (default: :func:`database_url_for` of ``path``)
    redirects the store to PostgreSQL. Safe to share between threads: SQLite statements
    run under one lock, PostgreSQL ones on pooled connections.
    """

    def __init__(self, path: Path | str, *, url: str | None = None) -> None:
        self.path = Path(path)
        self.url = url if url is not None else database_url_for(path)
        self.lock = threading.RLock()
        self._pg: PostgresBackend | None = None
        if self.url:
            # local import: optional extra personae[postgres]
            from personae.store._postgres import PostgresBackend  # optional extra

            self._pg = PostgresBackend(self.url, _migrations("postgres"))
            return
        self._open_sqlite(path)

    @property
    def dialect(self) -> Dialect:
        """``"sqlite"`` or ``"postgres"``."""
        return "sqlite" if self._pg is None else "postgres"

    @property
    def conn(self) -> sqlite3.Connection:
        """The SQLite connection (SQLite only; repositories use :meth:`read`)."""
        if self._pg is not None:
            raise StoreError("a PostgreSQL store has no single connection: use read()")
        return self._conn

    def _open_sqlite(self, path: Path | str) -> None:
        try:
            if str(path) != ":memory:":
                self.path.parent.mkdir(parents=True, exist_ok=True)
                _prepare_private_file(self.path)
            self._conn = sqlite3.connect(
                str(path), isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT
            )
        except (OSError, sqlite3.Error) as exc:
            reason: object = exc
            if isinstance(exc, OSError) and exc.strerror:
                reason = exc.strerror
                if exc.filename is not None and str(exc.filename) != str(path):
                    reason = f"{exc.filename}: {exc.strerror}"
            raise StoreError(f"{path}: cannot open store: {reason}") from exc
        self._conn.row_factory = sqlite3.Row
        try:
            self._conn.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT * 1000)}")
            _set_wal(self._conn)
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except sqlite3.DatabaseError as exc:  # not a database, corrupt, read-only, locked
            self._conn.close()
            raise StoreError(f"{path}: cannot open store: {exc}") from exc

    def _migrate(self) -> None:
        """Apply missing migrations; each checks and applies inside one write transaction."""
        pending = _migrations()
        with self.lock:
            if _recorded(self._conn) >= {n for n, _, _ in pending}:
                return  # the usual open: everything applied, no write lock taken
        with self.transaction() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " number INTEGER PRIMARY KEY, name TEXT NOT NULL,"
                " applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')))"
            )
        for number, name, sql in pending:
            with self.transaction() as conn:
                # Checked under the write lock: another process may have applied it meanwhile.
                if conn.execute(
                    "SELECT 1 FROM schema_migrations WHERE number = ?", (number,)
                ).fetchone():
                    continue
                for statement in split_sql(sql):
                    if not _column_exists(self._conn, statement):
                        conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_migrations(number, name) VALUES (?, ?)", (number, name)
                )

    @contextmanager
    def read(self) -> Iterator[Conn]:
        """A connection for reads (SQLite: under the store's lock; PostgreSQL: pooled)."""
        if self._pg is not None:
            with self._pg.connection() as pg:
                yield pg
            return
        with self.lock:
            yield self._conn

    @contextmanager
    def transaction(self) -> Iterator[Conn]:
        """A write transaction, all or nothing (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: a
        pooled connection commits when the block ends, rolls back when it raises)."""
        with self.read() as conn:
            if self._pg is not None:
                yield conn
                return
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def fetchone(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """The first row of one read statement (``None`` when there is none)."""
        with self.read() as conn:
            return conn.execute(sql, params).fetchone()

    def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """All rows of one read statement."""
        with self.read() as conn:
            return conn.execute(sql, params).fetchall()

    def for_update(self) -> str:
        """`` FOR UPDATE`` on PostgreSQL (row lock for read-modify-write), empty on SQLite.

        SQLite's ``BEGIN IMMEDIATE`` already serializes every writer of the file.
        """
        return "" if self._pg is None else " FOR UPDATE"

    def calibration_factors(self) -> dict[str, tuple[float, int]]:
        """Token-estimate factors per model (``personae.tokens.Calibration`` reads these)."""
        return calibration.factors(self)

    def update_calibration(
        self, key: str, move: Callable[[float, int], float | None]
    ) -> tuple[float, int] | None:
        """Store ``move(factor, samples)`` as ``key``'s factor (see ``store.calibration``)."""
        return calibration.update(self, key, move)

    def applied_migrations(self) -> list[str]:
        """Names of the applied migrations, in order."""
        rows = self.fetchall("SELECT name FROM schema_migrations ORDER BY number")
        return [row[0] for row in rows]

    def close(self) -> None:
        """Close the connection (PostgreSQL: the pool)."""
        if self._pg is not None:
            self._pg.close()
            return
        with self.lock:
            self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _column_exists(conn: sqlite3.Connection, statement: str) -> bool:
    """Whether ``statement`` is an ``ALTER TABLE ... ADD COLUMN`` whose column exists.

    SQLite has no ``ADD COLUMN IF NOT EXISTS``; this makes such a migration
    idempotent like the ``CREATE ... IF NOT EXISTS`` ones.
    """
    added = added_column(statement)
    if added is None:
        return False
    table, column = added
    return any(row[1] == column for row in conn.execute(f"PRAGMA table_info({table})"))


def _recorded(conn: sqlite3.Connection) -> set[int]:
    """Numbers of the applied migrations (empty on a new database)."""
    try:
        return {row[0] for row in conn.execute("SELECT number FROM schema_migrations")}
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return set()
        raise


def _set_wal(conn: sqlite3.Connection) -> None:
    """Switch to WAL; a new file being switched by another process at once is waited for.

    Changing the journal mode needs an exclusive lock, and SQLite reports a
    busy database here without always calling the busy handler, so this
    retries within the busy timeout.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT
    delay = 0.005
    while True:
        try:
            mode = str(conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]).lower()
            # A busy database can also answer with its old mode instead of an error.
            if mode in {"wal", "memory"} or time.monotonic() > deadline:
                return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            if time.monotonic() > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def _prepare_private_file(path: Path) -> None:
    """Create the database file 0600 (any umask); take group/other bits off an existing one.

    An existing database is never opened here, only stat'ed and chmod'ed by
    path: closing any descriptor of a database file drops the POSIX locks
    every SQLite connection of this process holds on it (a corruption hazard
    documented by SQLite). A new file is created ``O_EXCL``, so no connection
    can hold a lock on it yet. Anything that is not a regular file (a FIFO,
    a device) is refused without being opened. The ``-wal`` and ``-shm``
    files SQLite creates take the database file's mode; existing ones are
    tightened too.
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, DB_MODE)
    except FileExistsError:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path)) from None
        _tighten(path, info)
    else:
        try:
            os.fchmod(fd, DB_MODE)  # the umask may have taken owner bits away
        finally:
            os.close(fd)
    for suffix in ("-wal", "-shm"):
        side = Path(f"{path}{suffix}")
        with contextlib.suppress(OSError):
            info = side.lstat()
            if stat.S_ISREG(info.st_mode):
                _tighten(side, info)


def _tighten(path: Path, info: os.stat_result) -> None:
    """Drop group and other permission bits from a file we own (by path, never opened)."""
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077 and info.st_uid == os.geteuid():
        os.chmod(path, mode & 0o700)
