"""The SQLite store: WAL, migrations applied once, transactions all-or-nothing."""

from __future__ import annotations

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
