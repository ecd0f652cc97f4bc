"""The mind's tables in the personae store: catalog cache, FTS5 index, journal, bootstraps.

The catalog of a memory directory is cached keyed by (file, mtime, size):
:meth:`MindIndex.sync` re-reads only files whose stat changed. Memory files
and journal entries share one FTS5 table searched with bm25 (title and
description weigh more than the body).
"""

from __future__ import annotations

import errno
import os
import re
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from stat import S_ISREG

from personae.fsutil import NotRegularFileError
from personae.mind._rows import delete_doc, delete_names, insert_doc, insert_many
from personae.mind.memory import INDEX_NAME, MemoryDir, MemoryEntry, parse_memory
from personae.store.db import Store

__all__ = ["Hit", "JournalRow", "MindIndex", "SyncStats", "fts_query"]

_WORD = re.compile(r"\w+", re.UNICODE)
_BM25 = "bm25(mind_fts, 10.0, 5.0, 1.0)"
# MEMORY.md repeats every title and description: a catalog, not a memory to recall.
_NOT_INDEX = f" AND NOT (d.source = 'memory' AND d.name = '{INDEX_NAME}')"


@dataclass(frozen=True)
class SyncStats:
    """What one catalog sync did."""

    added: int
    updated: int
    removed: int
    unchanged: int


@dataclass(frozen=True)
class Hit:
    """One recall hit."""

    id: int
    source: str
    name: str
    title: str
    description: str
    type: str
    body: str
    score: float
    created_at: str


@dataclass(frozen=True)
class JournalRow:
    """One journal entry."""

    id: int
    kind: str
    tool_name: str | None
    text: str
    created_at: str


def query_words(query: str) -> list[str]:
    """The distinct lower-cased words of ``query`` (at most 32)."""
    return list(dict.fromkeys(w.lower() for w in _WORD.findall(query)))[:32]


def fts_query(query: str | list[str]) -> str | None:
    """An FTS5 OR query of the words in ``query`` (None when there are none)."""
    words = query_words(query) if isinstance(query, str) else query
    if not words:
        return None
    return " OR ".join(f'"{w}"' for w in words)


def _read_file(path: str, size: int, dir_fd: int | None = None) -> bytes:
    # O_NONBLOCK + fstat: a file swapped for a FIFO after the scan is skipped, not waited on.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        if not S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFileError(errno.EINVAL, "not a regular file", path)
        data = os.read(fd, size + 1)
        if len(data) != size:  # changed since stat: read to the end
            parts = [data]
            while chunk := os.read(fd, 1 << 16):
                parts.append(chunk)
            data = b"".join(parts)
        return data
    finally:
        os.close(fd)


_OPEN_AT = os.open in os.supports_dir_fd


def _read_all(
    base: str, names: Sequence[str], on_disk: dict[str, tuple[int, int]]
) -> list[tuple[MemoryEntry, tuple[int, int]]]:
    """Read and parse ``names`` in folder ``base`` (unreadable files are skipped).

    os.open/os.read are several times cheaper than open() for small files, and
    opening relative to the folder's descriptor resolves one name, not the path.
    """
    parsed: list[tuple[MemoryEntry, tuple[int, int]]] = []
    dir_fd: int | None = None
    if _OPEN_AT:
        try:
            dir_fd = os.open(base, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        except OSError:
            dir_fd = None
    try:
        for name in names:
            stat = on_disk[name]
            try:
                if dir_fd is None:
                    data = _read_file(os.path.join(base, name), stat[1])
                else:
                    data = _read_file(name, stat[1], dir_fd)
            except OSError:
                continue
            parsed.append((parse_memory(name, data.decode("utf-8", errors="replace")), stat))
    finally:
        if dir_fd is not None:
            os.close(dir_fd)
    return parsed


class MindIndex:
    """Access to the mind tables of one store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        # dir -> (generation, {name: (mtime_ns, size)}) of the last sync.
        self._memo: dict[str, tuple[int, dict[str, tuple[int, int]]]] = {}
        self._sync_lock = threading.Lock()

    def _generation(self, key: str) -> int:
        row = self.store.conn.execute(
            "SELECT generation FROM mind_dirs WHERE dir = ?", (key,)
        ).fetchone()
        return 0 if row is None else int(row[0])

    @staticmethod
    def _bump(conn: sqlite3.Connection, key: str) -> int:
        conn.execute(
            "INSERT INTO mind_dirs(dir, generation) VALUES (?, 1)"
            " ON CONFLICT(dir) DO UPDATE SET generation = generation + 1",
            (key,),
        )
        return int(
            conn.execute("SELECT generation FROM mind_dirs WHERE dir = ?", (key,)).fetchone()[0]
        )

    def _cached(self, key: str) -> dict[str, tuple[int, int]]:
        """``{name: (mtime_ns, size)}`` of the folder's catalog rows (as ``scan`` gives)."""
        with self.store.lock:
            generation = self._generation(key)
            memo = self._memo.get(key)
            if memo is not None and memo[0] == generation:
                return memo[1]
            rows = self.store.conn.execute(
                "SELECT name, mtime_ns, size FROM mind_docs WHERE dir = ? AND source = 'memory'",
                (key,),
            ).fetchall()
        cached = {row[0]: (row[1], row[2]) for row in rows}
        self._memo[key] = (generation, cached)
        return cached

    # -- catalog ---------------------------------------------------------------------

    def sync(self, memory: MemoryDir) -> SyncStats:
        """Bring the cached catalog of ``memory`` up to date with the folder.

        Safe under concurrency: rows are replaced by name inside one write
        transaction, so two threads or processes syncing at once never leave
        duplicates.
        """
        with self._sync_lock:
            return self._sync(memory)

    def _sync(self, memory: MemoryDir) -> SyncStats:
        on_disk = memory.scan()
        cached = self._cached(memory.key)
        if on_disk == cached:  # one C-level comparison in the common, unchanged case
            return SyncStats(0, 0, 0, len(on_disk))
        changed = [n for n, st in on_disk.items() if cached.get(n) != st]
        removed = [n for n in cached if n not in on_disk]
        if not changed and not removed:
            return SyncStats(0, 0, 0, len(on_disk))
        changed.sort()  # deterministic ids; the name indexes grow at their end
        parsed = _read_all(str(memory.root), changed, on_disk)
        with self.store.transaction() as conn:
            delete_names(conn, memory.key, [*removed, *(e.name for e, _ in parsed)])
            insert_many(conn, memory.key, parsed)
            self._bump(conn, memory.key)
        self._memo.pop(memory.key, None)
        added = sum(1 for n in changed if n not in cached)
        return SyncStats(added, len(changed) - added, len(removed), len(on_disk) - len(changed))

    def upsert(self, memory: MemoryDir, entry: MemoryEntry) -> None:
        """Index one freshly written memory file now."""
        path = memory.root / entry.name
        st = path.stat()
        with self.store.transaction() as conn:
            row = conn.execute(
                "SELECT id FROM mind_docs WHERE dir = ? AND source = 'memory' AND name = ?",
                (memory.key, entry.name),
            ).fetchone()
            if row is not None:
                delete_doc(conn, row[0])
            insert_doc(conn, memory.key, "memory", entry, st.st_mtime_ns, st.st_size)
            self._bump(conn, memory.key)
        self._memo.pop(memory.key, None)

    def catalog(self, memory: MemoryDir) -> tuple[int, dict[str, int], bool]:
        """(total files, counts by frontmatter type, MEMORY.md present)."""
        with self.store.lock:
            rows = self.store.conn.execute(
                "SELECT type, count(*) FROM mind_docs WHERE dir = ? AND source = 'memory'"
                " GROUP BY type ORDER BY count(*) DESC, type",
                (memory.key,),
            ).fetchall()
            index = self.store.conn.execute(
                "SELECT 1 FROM mind_docs WHERE dir = ? AND source = 'memory' AND name = ?",
                (memory.key, INDEX_NAME),
            ).fetchone()
        counts = {str(r[0]): int(r[1]) for r in rows}
        return sum(counts.values()), counts, index is not None

    def files(
        self, memory: MemoryDir, *, type: str | None, offset: int, limit: int
    ) -> tuple[int, list[tuple[str, str, str, str]]]:
        """(matching count, [(name, title, description, type)]) sorted by name."""
        where = "dir = ? AND source = 'memory'"
        params: list[object] = [memory.key]
        if type:
            where += " AND type = ?"
            params.append(type.lower())
        with self.store.lock:
            total = self.store.conn.execute(
                f"SELECT count(*) FROM mind_docs WHERE {where}", params
            ).fetchone()[0]
            rows = self.store.conn.execute(
                f"SELECT name, title, description, type FROM mind_docs WHERE {where}"
                " ORDER BY name LIMIT ? OFFSET ?",
                [*params, limit, offset],
            ).fetchall()
        return int(total), [(r[0], r[1], r[2], r[3]) for r in rows]

    def docs_by_name(self, memory: MemoryDir, names: Sequence[str]) -> dict[str, str]:
        """Bodies of the named memory files that are in the catalog."""
        if not names:
            return {}
        marks = ",".join("?" * len(names))
        with self.store.lock:
            rows = self.store.conn.execute(
                f"SELECT name, body FROM mind_docs WHERE dir = ? AND source = 'memory'"
                f" AND name IN ({marks})",
                [memory.key, *names],
            ).fetchall()
        return {r[0]: r[1] for r in rows}

    def docs_by_facet(self, memory: MemoryDir, key: str, value: str) -> list[str]:
        """Bodies of memory files with frontmatter ``key: value``, by name."""
        with self.store.lock:
            rows = self.store.conn.execute(
                "SELECT d.body FROM mind_docs d JOIN mind_facets f ON f.doc_id = d.id"
                " WHERE d.dir = ? AND d.source = 'memory' AND f.key = ? AND f.value = ?"
                " ORDER BY d.name LIMIT 20",
                (memory.key, key, value),
            ).fetchall()
        return [r[0] for r in rows]

    # -- recall ----------------------------------------------------------------------

    def search(
        self,
        memory: MemoryDir,
        query: str,
        *,
        k: int,
        facet: tuple[str, str] | None = None,
        exclude: int | None = None,
    ) -> list[Hit]:
        """Best ``k`` hits for ``query`` (OR of its words), optionally within a facet."""
        match = fts_query(self._informative(query_words(query)))
        params: list[object] = []
        cols = "d.id, d.source, d.name, d.title, d.description, d.type, d.body, d.created_at"
        facet_sql = ""
        if facet is not None:
            facet_sql = " AND d.id IN (SELECT doc_id FROM mind_facets WHERE key = ? AND value = ?)"
        if match is not None:
            sql = (
                f"SELECT {cols}, {_BM25} AS score FROM mind_fts JOIN mind_docs d"
                " ON d.id = mind_fts.rowid WHERE mind_fts MATCH ? AND d.dir = ?"
                f"{facet_sql} AND d.id != ?{_NOT_INDEX} ORDER BY score LIMIT ?"
            )
            params = [match, memory.key]
        elif facet is not None:
            sql = (
                f"SELECT {cols}, 0.0 AS score FROM mind_docs d WHERE d.dir = ?"
                f"{facet_sql} AND d.id != ?{_NOT_INDEX} ORDER BY d.id DESC LIMIT ?"
            )
            params = [memory.key]
        else:
            return []
        if facet is not None:
            params.extend(facet)
        params.extend([exclude if exclude is not None else -1, k])
        with self.store.lock:
            rows = self.store.conn.execute(sql, params).fetchall()
        return [
            Hit(int(r[0]), r[1], r[2], r[3], r[4], r[5], r[6], float(-r[8]), r[7]) for r in rows
        ]

    def _informative(self, words: list[str]) -> list[str]:
        """Drop words found in over 40% of all documents (they barely move bm25 but cost
        a scan of nearly every row), keeping at least the rarest word."""
        if len(words) < 2:
            return words
        marks = ",".join("?" * len(words))
        with self.store.lock:
            total = self.store.conn.execute("SELECT count(*) FROM mind_docs").fetchone()[0]
            freq = dict(
                self.store.conn.execute(
                    f"SELECT term, doc FROM mind_fts_vocab WHERE term IN ({marks})", words
                ).fetchall()
            )
        if total < 50:
            return words
        kept = [w for w in words if freq.get(w, 0) <= 0.4 * total]
        return kept or [min(words, key=lambda w: freq.get(w, 0))]

    # -- journal ---------------------------------------------------------------------

    def add_journal(
        self,
        memory: MemoryDir,
        *,
        kind: str,
        text: str,
        tool_name: str | None = None,
        args: str | None = None,
        result: str | None = None,
    ) -> tuple[int, int]:
        """Record one entry verbatim and index it; returns (journal id, doc id)."""
        with self.store.transaction() as conn:
            cur = conn.execute(
                "INSERT INTO mind_journal(dir, kind, tool_name, args, result, text)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (memory.key, kind, tool_name, args, result, text),
            )
            journal_id = int(cur.lastrowid or 0)
            facets = [("type", "journal"), ("kind", kind)]
            if tool_name:
                facets.append(("tool", tool_name.lower()))
            title = f"{kind}: {tool_name}" if tool_name else kind
            entry = MemoryEntry(f"journal/{journal_id}", title, "", "journal", text, tuple(facets))
            doc_id = insert_doc(conn, memory.key, "journal", entry, 0, len(text))
            conn.execute("UPDATE mind_journal SET doc_id = ? WHERE id = ?", (doc_id, journal_id))
        return journal_id, doc_id

    def recent_journal(self, memory: MemoryDir, limit: int) -> list[JournalRow]:
        """The latest journal entries, newest first."""
        with self.store.lock:
            rows = self.store.conn.execute(
                "SELECT id, kind, tool_name, text, created_at FROM mind_journal WHERE dir = ?"
                " ORDER BY id DESC LIMIT ?",
                (memory.key, limit),
            ).fetchall()
        return [JournalRow(int(r[0]), r[1], r[2], r[3], r[4]) for r in rows]

    def journal_entry(self, journal_id: int) -> dict[str, object] | None:
        """The verbatim journal row (for tests and audits)."""
        with self.store.lock:
            row = self.store.conn.execute(
                "SELECT id, kind, tool_name, args, result, text, created_at FROM mind_journal"
                " WHERE id = ?",
                (journal_id,),
            ).fetchone()
        return None if row is None else dict(row)

    # -- bootstraps ------------------------------------------------------------------

    def record_bootstrap(
        self,
        session_id: str | None,
        contract_hash: str,
        host: tuple[int, int] | None = None,
    ) -> None:
        """Record a successful bootstrap (``host``: pid and start time of the host process)."""
        host_pid, host_started = host if host is not None else (None, None)
        with self.store.transaction() as conn:
            conn.execute(
                "INSERT INTO mind_bootstraps(session_id, contract_hash, host_pid, host_started)"
                " VALUES (?, ?, ?, ?)",
                (session_id, contract_hash, host_pid, host_started),
            )

    def last_bootstrap(self, session_id: str | None = None) -> str | None:
        """Time of the latest recorded bootstrap (of ``session_id`` when given)."""
        sql = "SELECT created_at FROM mind_bootstraps"
        params: tuple[object, ...] = ()
        if session_id is not None:
            sql += " WHERE session_id = ?"
            params = (session_id,)
        with self.store.lock:
            row = self.store.conn.execute(sql + " ORDER BY id DESC LIMIT 1", params).fetchone()
        return None if row is None else str(row[0])
