"""Exact token counts remembered on disk by content, for the next process.

A fresh process (a server assembling per request, a process per turn) would
otherwise count every message of a long history again: about 1.6 s of CPU for
10,000 messages with o200k_base. Counts of texts of at least
:data:`MIN_CHARS` characters made by an exact counter are kept in
``<data folder>/cache/token-counts.sqlite`` (``PERSONAE_HOME``, else
``~/.personae``), by the counter's name and a 16-byte BLAKE2b digest of the
text's UTF-8 bytes; the process's own memo (``_textcut.count_small``) asks
here before counting.

It is only a cache, never a correctness risk on its own: a file that cannot be
opened or read, or that is not a database, is deleted and made again (once per
process; after that the process counts without it); a lock held by another
process skips the write (the count is simply not remembered); a value that is
not a count is ignored. New counts are written in batches (and when the
process exits). At most :data:`MAX_ROWS` counts are kept: past that the older
half is deleted. ``PERSONAE_COUNT_CACHE=off`` turns it off.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

from personae.layout import user_data_dir

__all__ = ["MAX_ROWS", "MIN_CHARS", "cache_file", "flush", "lookup", "record"]

MIN_CHARS = 512
"""Shorter texts are counted again (encoding them costs about what a lookup does)."""
MAX_ROWS = 1_000_000
"""Counts kept at most (about 50 MB); past that the older half is deleted."""
_BATCH = 2048
"""New counts written together."""
_CHUNK = 500
"""Digests looked up in one query (under SQLite's limit on parameters)."""
_VERSION = "1"
"""Part of every key: counts of another layout of this file are never read."""
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS counts ("
    " seq INTEGER PRIMARY KEY, enc TEXT NOT NULL, key BLOB NOT NULL, n INTEGER NOT NULL,"
    " UNIQUE (enc, key))"
)


_WHERE: list[tuple[tuple[str | None, str | None], Path | None]] = []
"""The last answer of :func:`cache_file`, by the variables it depends on."""


def cache_file() -> Path | None:
    """Where counts are kept (``None``: turned off by ``PERSONAE_COUNT_CACHE=off``)."""
    env = os.environ
    given = (env.get("PERSONAE_HOME"), env.get("PERSONAE_COUNT_CACHE"))
    if _WHERE and _WHERE[0][0] == given:
        return _WHERE[0][1]
    off = (given[1] or "").strip().lower() in {"off", "0", "no", "false"}
    path = None if off else user_data_dir() / "cache" / "token-counts.sqlite"
    _WHERE[:] = [(given, path)]
    return path


class _Disk:
    """The process's connection (per file: tests and callers may change the data folder)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.path: Path | None = None
        self.conn: sqlite3.Connection | None = None
        self.pending: list[tuple[str, bytes, int]] = []
        self.remade = False
        self.broken = False

    def connection(self) -> sqlite3.Connection | None:
        path = cache_file()
        if path is None or self.broken:
            return None
        if self.conn is not None and path == self.path:
            return self.conn
        self._flush()
        self._close()
        self.path = path
        try:
            self.conn = self._open(path)
        except (sqlite3.Error, OSError):
            self.conn = self._remake(path)
        return self.conn

    @staticmethod
    def _open(path: Path) -> sqlite3.Connection:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, timeout=0.05, isolation_level=None, check_same_thread=False)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=OFF")
            conn.execute(_SCHEMA)
        except sqlite3.Error:
            conn.close()
            raise
        return conn

    def _remake(self, path: Path) -> sqlite3.Connection | None:
        """The file could not be used: delete it and make it again, once per process."""
        self._close()
        if self.remade:
            self.broken = True
            return None
        self.remade = True
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                Path(f"{path}{suffix}").unlink()
        try:
            return self._open(path)
        except (sqlite3.Error, OSError):
            self.broken = True
            return None

    def _close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self.conn.close()
        self.conn = None

    def _failed(self, exc: sqlite3.Error) -> None:
        """A query failed: a busy file is left alone; anything else remakes the file."""
        if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
            return
        if self.path is not None:
            self.conn = self._remake(self.path)

    def lookup(self, enc: str, keys: Sequence[bytes]) -> dict[bytes, int]:
        found: dict[bytes, int] = {}
        with self.lock:
            conn = self.connection()
            if conn is None:
                return found
            try:
                for at in range(0, len(keys), _CHUNK):
                    chunk = keys[at : at + _CHUNK]
                    marks = ",".join("?" * len(chunk))
                    found.update(
                        conn.execute(
                            f"SELECT key, n FROM counts WHERE enc = ? AND key IN ({marks})",
                            (enc, *chunk),
                        ).fetchall()
                    )
            except sqlite3.Error as exc:
                self._failed(exc)
                return {}
        return {
            k: n
            for k, n in found.items()
            if isinstance(k, bytes) and type(n) is int and n >= 0  # a count, or ignored
        }

    def record(self, enc: str, key: bytes, n: int) -> None:
        with self.lock:
            self.pending.append((enc, key, n))
            if len(self.pending) >= _BATCH:
                self._flush()

    def flush(self) -> None:
        with self.lock:
            self._flush()

    def _flush(self) -> None:
        rows, self.pending = self.pending, []
        if not rows:
            return
        conn = self.connection()  # counts are by content: right for any data folder
        if conn is None:
            return
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(
                    "INSERT OR IGNORE INTO counts (enc, key, n) VALUES (?, ?, ?)", rows
                )
                low, high = conn.execute("SELECT min(seq), max(seq) FROM counts").fetchone()
                if low is not None and high - low >= MAX_ROWS:
                    conn.execute("DELETE FROM counts WHERE seq < ?", (high - MAX_ROWS // 2,))
                conn.execute("COMMIT")
            except sqlite3.Error:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            self._failed(exc)


_DISK = _Disk()
atexit.register(_DISK.flush)


def lookup(counter_name: str, keys: Sequence[bytes]) -> dict[bytes, int]:
    """The counts remembered for the texts whose digests are ``keys`` (by digest)."""
    return _DISK.lookup(f"{counter_name}/{_VERSION}", keys) if keys else {}


def record(counter_name: str, key: bytes, count: int) -> None:
    """Remember a count (written with the next batch, or when the process exits)."""
    _DISK.record(f"{counter_name}/{_VERSION}", key, count)


def flush() -> None:
    """Write the counts not written yet."""
    _DISK.flush()
