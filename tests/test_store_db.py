"""The SQLite store: WAL, migrations applied once, transactions all-or-nothing."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from personae.store import Store


def test_opens_in_wal_mode_and_records_migrations(tmp_path: Path) -> None:
    with Store(tmp_path / "state.db") as store:
        mode = store.conn.execute("PRAGMA journal_mode").fetchone()[0]
        assert mode == "wal"
        first = store.applied_migrations()
    with Store(tmp_path / "state.db") as again:
        assert again.applied_migrations() == first


def test_transaction_rolls_back_on_error(tmp_path: Path) -> None:
    with Store(tmp_path / "state.db") as store:
        with store.transaction() as conn:
            conn.execute("CREATE TABLE t (x INTEGER)")
        with pytest.raises(RuntimeError), store.transaction() as conn:
            conn.execute("INSERT INTO t VALUES (1)")
            raise RuntimeError("crash mid-write")
        assert store.conn.execute("SELECT count(*) FROM t").fetchone()[0] == 0


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
