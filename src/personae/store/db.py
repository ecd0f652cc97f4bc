"""The SQLite store: one WAL database per project, numbered SQL migrations.

Migrations are the files ``store/migrations/NNNN_name.sql``, applied in
number order, each in its own transaction, exactly once (recorded in
``schema_migrations``). Each part of personae owns its own migration files.

Many processes may open a new database at the same moment (parallel CLI
commands, a chain's children): every migration runs in a ``BEGIN IMMEDIATE``
transaction that first checks, inside that transaction, whether another
process applied it meanwhile, and every ``CREATE`` says ``IF NOT EXISTS``;
waits use a busy timeout. The database file and its ``-wal``/``-shm``
companions are private to the user (0600) whatever the umask.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import stat
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from personae.errors import PersonaeError

__all__ = ["Store", "StoreError"]

_MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
BUSY_TIMEOUT = 30.0
"""Seconds a connection waits for another process's write lock before failing."""
DB_MODE = 0o600
"""Permission bits of the database file and its ``-wal``/``-shm`` files."""


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
                _prepare_private_file(self.path)
            self.conn = sqlite3.connect(
                str(path), isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT
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
            self.conn.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT * 1000)}")
            _set_wal(self.conn)
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except sqlite3.DatabaseError as exc:  # not a database, corrupt, read-only, locked
            self.conn.close()
            raise StoreError(f"{path}: cannot open store: {exc}") from exc

    def _migrate(self) -> None:
        """Apply missing migrations; each checks and applies inside one write transaction."""
        pending = _migrations()
        with self.lock:
            if _recorded(self.conn) >= {n for n, _, _ in pending}:
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
            conn.execute("PRAGMA journal_mode=WAL")
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

    The open does not block on a FIFO (``O_NONBLOCK``), and anything that is
    not a regular file is refused. The ``-wal`` and ``-shm`` files SQLite
    creates take the database file's mode; existing ones are tightened too.
    An existing file is never opened here: closing any descriptor of a file
    drops every POSIX lock this process holds on it, including the locks of
    other open connections (SQLite's "how to corrupt a database"), so existing
    files are checked with ``stat`` and tightened with ``chmod``.
    """
    flags = os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags | os.O_RDWR | os.O_CREAT | os.O_EXCL, DB_MODE)
    except FileExistsError:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(0, "not a regular file", str(path)) from None
        _tighten(str(path), info)
    else:
        try:
            os.fchmod(fd, DB_MODE)  # the umask may have taken owner bits away
        finally:
            os.close(fd)
    for suffix in ("-wal", "-shm"):
        side = f"{path}{suffix}"
        with contextlib.suppress(OSError):
            info = os.lstat(side)
            if stat.S_ISREG(info.st_mode):
                _tighten(side, info)


def _tighten(path: str, info: os.stat_result) -> None:
    """Drop group and other permission bits from a file we own."""
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077 and info.st_uid == os.geteuid():
        os.chmod(path, mode & 0o700)
