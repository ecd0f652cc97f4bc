"""The store on both backends: migrations applied once, transactions all-or-nothing.

SQLite file semantics (WAL, file modes, FIFOs, POSIX locks, FTS5) are SQLite-only tests;
the rest run on SQLite and on a real PostgreSQL server (``tests/_pg.py``).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from personae.store import Store
from personae.store.db import _migrations


def test_opens_in_wal_mode(tmp_path: Path) -> None:
    with Store(tmp_path / "state.db") as store:
        mode = store.conn.execute("PRAGMA journal_mode").fetchone()[0]
        assert mode == "wal" and store.dialect == "sqlite"


def test_records_every_migration_once(open_store: Callable[[], Store]) -> None:
    with open_store() as store:
        first = store.applied_migrations()
    assert first == [name for _, name, _ in _migrations()]
    with open_store() as again:
        assert again.applied_migrations() == first
        with again.read() as conn:
            assert conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0] == len(
                first
            )


def test_transaction_rolls_back_on_error(open_store: Callable[[], Store]) -> None:
    with open_store() as store:
        with store.transaction() as conn:
            conn.execute("CREATE TABLE t (x INTEGER)")
        with pytest.raises(RuntimeError), store.transaction() as conn:
            conn.execute("INSERT INTO t VALUES (?)", (1,))
            raise RuntimeError("crash mid-write")
        with store.read() as conn:
            assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 0
        with store.transaction() as conn:
            conn.execute("INSERT INTO t VALUES (?)", (2,))
        with store.read() as conn:
            row = conn.execute("SELECT x AS value FROM t").fetchone()
        assert (row[0], row["value"], dict(row)) == (2, 2, {"value": 2})


def test_a_constraint_violation_is_one_error_type_on_both(open_store: Callable[[], Store]) -> None:
    from personae.store.db import INTEGRITY_ERRORS

    with open_store() as store:
        with store.transaction() as conn:
            conn.execute("INSERT INTO sessions(id, created) VALUES (?, ?)", ("s", "now"))
        with pytest.raises(INTEGRITY_ERRORS), store.transaction() as conn:
            conn.execute("INSERT INTO sessions(id, created) VALUES (?, ?)", ("s", "again"))
        with store.read() as conn:
            rows = conn.execute("SELECT created FROM sessions").fetchall()
        assert [r[0] for r in rows] == ["now"]


def test_store_has_fts5(tmp_path: Path) -> None:
    with Store(tmp_path / "state.db") as store, store.transaction() as conn:
        conn.execute("CREATE VIRTUAL TABLE f USING fts5(body)")
        conn.execute("INSERT INTO f VALUES ('hello world')")
        hit = conn.execute("SELECT bm25(f) FROM f WHERE f MATCH 'hello'").fetchone()
        assert hit is not None


def test_unopenable_path_is_a_store_error(tmp_path: Path) -> None:
    from personae.store import StoreError

    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises((StoreError, sqlite3.Error, OSError)):
        Store(blocker / "sub" / "state.db")


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_new_store_files_are_private_whatever_the_umask(tmp_path: Path) -> None:
    for umask in (0o000, 0o022, 0o277):
        db = tmp_path / f"u{umask:o}" / "state.db"
        db.parent.mkdir()
        old = os.umask(umask)
        try:
            store = Store(db)
            with store.transaction() as conn:
                conn.execute("INSERT INTO runs(id, task, model) VALUES ('r', 't', 'm')")
            modes = {p.name: _mode(p) for p in db.parent.iterdir()}
            store.close()
        finally:
            os.umask(old)
        assert modes == {"state.db": 0o600, "state.db-wal": 0o600, "state.db-shm": 0o600}, umask


def test_an_existing_readable_store_is_tightened(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    Store(db).close()
    db.chmod(0o644)
    with Store(db) as store:
        assert store.applied_migrations()
    assert _mode(db) == 0o600


def test_a_fifo_as_the_store_is_refused_without_hanging(tmp_path: Path) -> None:
    from personae.store import StoreError

    fifo = tmp_path / "state.db"
    os.mkfifo(fifo)
    with pytest.raises(StoreError, match="not a regular file"):
        Store(fifo)


@pytest.mark.process
def test_a_second_open_keeps_the_locks_this_process_holds(tmp_path: Path) -> None:
    # Closing any descriptor of a SQLite file drops every POSIX lock the process holds on
    # it: opening the store again (the ledger does) must never open and close its files.
    import subprocess
    import sys

    db = tmp_path / "state.db"
    holder = Store(db)
    probe = (
        "import sqlite3, sys\n"
        "conn = sqlite3.connect(sys.argv[1], timeout=0.2, isolation_level=None)\n"
        "conn.execute('BEGIN IMMEDIATE')\n"
    )
    try:
        with holder.transaction():
            Store(db).close()
            other = subprocess.run(
                [sys.executable, "-c", probe, str(db)],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
    finally:
        holder.close()
    assert other.returncode != 0 and "database is locked" in other.stderr
