"""The mind's tables (migration 0004, 0006): memory catalog cache, full-text index,
journal and recorded bootstraps. All of the mind's SQL lives here.

Memory files and journal entries share one full-text index: FTS5 ranked with bm25 on
SQLite, a weighted tsvector ranked with ``ts_rank`` on PostgreSQL (title and description
weigh more than the body on both). Scores are "higher is better" on both backends.

Catalog writes of one folder first bump that folder's generation row (``mind_dirs``): on
PostgreSQL the row lock serializes concurrent syncs of the same folder, as SQLite's write
lock does, so two processes syncing at once never leave duplicate rows.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from personae.store.db import Conn, Store

__all__ = ["DocLike", "JournalEntry", "MindTables", "SearchRow", "fts_query", "query_words"]

_WORD = re.compile(r"\w+", re.UNICODE)

_BM25 = "-bm25(mind_fts, 10.0, 5.0, 1.0)"  # negated: higher is better, as ts_rank
_TS_WEIGHTS = "'{0.1, 0.0, 0.5, 1.0}'"  # ts_rank weights of D, C, B, A (body, -, desc, title)
_COLS = "d.id, d.source, d.name, d.title, d.description, d.type, d.body, d.created_at"

SearchRow = tuple[int, str, str, str, str, str, str, str, float]
"""(id, source, name, title, description, type, body, created_at, score)."""


def query_words(query: str) -> list[str]:
    """The distinct lower-cased words of ``query`` (at most 32)."""
    return list(dict.fromkeys(w.lower() for w in _WORD.findall(query)))[:32]


def fts_query(query: str | Sequence[str]) -> str | None:
    """An FTS5 OR query of the words in ``query``, each quoted (``None`` when there are none)."""
    words = query_words(query) if isinstance(query, str) else query
    if not words:
        return None
    return " OR ".join(f'"{w}"' for w in words)


@dataclass(frozen=True)
class JournalEntry:
    """One journal entry to record verbatim: a tool call (with its arguments and result,
    secrets already redacted) or a non-tool signal such as a reflection (``text`` only)."""

    kind: str
    text: str
    tool_name: str | None = None
    args: str | None = None
    result: str | None = None


class DocLike(Protocol):
    """A document to index (``personae.mind.memory.MemoryEntry`` fits)."""

    @property
    def name(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def body(self) -> str: ...
    @property
    def facets(self) -> tuple[tuple[str, str], ...]: ...


class MindTables:
    """Typed access to the mind's tables of one :class:`Store`."""

    def __init__(self, store: Store) -> None:
        self.store = store

    # -- catalog ---------------------------------------------------------------------

    def memory_stats(self, key: str) -> tuple[int, dict[str, tuple[int, int]]]:
        """(generation, ``{name: (mtime_ns, size)}``) of folder ``key``'s catalog rows."""
        with self.store.read() as conn:
            row = conn.execute("SELECT generation FROM mind_dirs WHERE dir = ?", (key,)).fetchone()
            rows = conn.execute(
                "SELECT name, mtime_ns, size FROM mind_docs WHERE dir = ? AND source = 'memory'",
                (key,),
            ).fetchall()
        return (0 if row is None else int(row[0])), {r[0]: (r[1], r[2]) for r in rows}

    def generation(self, key: str) -> int:
        """How many catalog changes folder ``key`` has seen."""
        row = self.store.fetchone("SELECT generation FROM mind_dirs WHERE dir = ?", (key,))
        return 0 if row is None else int(row[0])

    def replace_memory(
        self, key: str, removed: Sequence[str], parsed: Sequence[tuple[DocLike, tuple[int, int]]]
    ) -> None:
        """In one transaction: drop ``removed`` names, (re)insert ``parsed`` files by name."""
        with self.store.transaction() as conn:
            _bump(conn, key)
            _delete_names(conn, key, [*removed, *(e.name for e, _ in parsed)])
            self._insert_many(conn, key, parsed)

    def upsert_memory(self, key: str, entry: DocLike, mtime_ns: int, size: int) -> None:
        """Index one freshly written memory file (replacing its old row)."""
        with self.store.transaction() as conn:
            _bump(conn, key)
            _delete_names(conn, key, [entry.name])
            _insert_doc(conn, key, "memory", entry, mtime_ns, size)

    def catalog(self, key: str, index_name: str) -> tuple[dict[str, int], bool]:
        """(counts by type, whether ``index_name`` is in the catalog) of folder ``key``."""
        with self.store.read() as conn:
            rows = conn.execute(
                "SELECT type, count(*) FROM mind_docs WHERE dir = ? AND source = 'memory'"
                " GROUP BY type ORDER BY count(*) DESC, type",
                (key,),
            ).fetchall()
            index = conn.execute(
                "SELECT 1 FROM mind_docs WHERE dir = ? AND source = 'memory' AND name = ?",
                (key, index_name),
            ).fetchone()
        return {str(r[0]): int(r[1]) for r in rows}, index is not None

    def files(
        self, key: str, *, type: str | None, offset: int, limit: int
    ) -> tuple[int, list[tuple[str, str, str, str]]]:
        """(matching count, [(name, title, description, type)]) sorted by name."""
        where = "dir = ? AND source = 'memory'"
        params: list[object] = [key]
        if type:
            where += " AND type = ?"
            params.append(type.lower())
        with self.store.read() as conn:
            total = conn.execute(f"SELECT count(*) FROM mind_docs WHERE {where}", params).fetchone()
            rows = conn.execute(
                f"SELECT name, title, description, type FROM mind_docs WHERE {where}"
                " ORDER BY name LIMIT ? OFFSET ?",
                [*params, limit, offset],
            ).fetchall()
        return int(total[0]), [(r[0], r[1], r[2], r[3]) for r in rows]

    def docs_by_name(self, key: str, names: Sequence[str]) -> dict[str, str]:
        """Bodies of the named memory files that are in the catalog."""
        if not names:
            return {}
        marks = ",".join("?" * len(names))
        rows = self.store.fetchall(
            f"SELECT name, body FROM mind_docs WHERE dir = ? AND source = 'memory'"
            f" AND name IN ({marks})",
            [key, *names],
        )
        return {r[0]: r[1] for r in rows}

    def docs_by_facet(self, key: str, facet: str, value: str) -> list[str]:
        """Bodies of memory files with frontmatter ``facet: value``, by name (at most 20)."""
        rows = self.store.fetchall(
            "SELECT d.body FROM mind_docs d JOIN mind_facets f ON f.doc_id = d.id"
            " WHERE d.dir = ? AND d.source = 'memory' AND f.key = ? AND f.value = ?"
            " ORDER BY d.name LIMIT 20",
            (key, facet, value),
        )
        return [r[0] for r in rows]

    # -- recall ----------------------------------------------------------------------

    def search(
        self,
        key: str,
        words: Sequence[str],
        *,
        k: int,
        facet: tuple[str, str] | None,
        exclude: int | None,
        skip_memory: str,
    ) -> list[SearchRow]:
        """Best ``k`` documents of folder ``key`` matching any of ``words`` (best first).

        No words: the newest ``k`` documents of ``facet`` (score 0). The memory file named
        ``skip_memory`` (the folder's index) and document ``exclude`` are never returned.
        """
        facet_sql = ""
        if facet is not None:
            facet_sql = " AND d.id IN (SELECT doc_id FROM mind_facets WHERE key = ? AND value = ?)"
        rest = f"{facet_sql} AND d.id != ? AND NOT (d.source = 'memory' AND d.name = ?)"
        params: list[object] = [key]
        if words and self.store.dialect == "postgres":
            query = " || ".join(["plainto_tsquery('simple', ?)"] * len(words))
            sql = (
                f"SELECT {_COLS}, ts_rank({_TS_WEIGHTS}, f.tsv, q.q) AS score"
                f" FROM (SELECT {query} AS q) q, mind_fts f JOIN mind_docs d ON d.id = f.rowid"
                f" WHERE f.tsv @@ q.q AND d.dir = ?{rest} ORDER BY score DESC, d.id LIMIT ?"
            )
            params = [*words, key]
        elif words:
            sql = (
                f"SELECT {_COLS}, {_BM25} AS score FROM mind_fts JOIN mind_docs d"
                " ON d.id = mind_fts.rowid WHERE mind_fts MATCH ? AND d.dir = ?"
                f"{rest} ORDER BY score DESC LIMIT ?"
            )
            params = [fts_query(words), key]
        elif facet is not None:
            sql = (
                f"SELECT {_COLS}, 0.0 AS score FROM mind_docs d WHERE d.dir = ?"
                f"{rest} ORDER BY d.id DESC LIMIT ?"
            )
        else:
            return []
        if facet is not None:
            params.extend(facet)
        params.extend([exclude if exclude is not None else -1, skip_memory, k])
        rows = self.store.fetchall(sql, params)
        return [(int(r[0]), r[1], r[2], r[3], r[4], r[5], r[6], r[7], float(r[8])) for r in rows]

    def doc_frequencies(self, words: Sequence[str]) -> tuple[int, dict[str, int]]:
        """(documents in the index, ``{word: documents holding it}``) over all folders."""
        with self.store.read() as conn:
            total = int(conn.execute("SELECT count(*) FROM mind_docs").fetchone()[0])
            if self.store.dialect == "postgres":
                rows = conn.execute(
                    "SELECT w, (SELECT count(*) FROM mind_fts"
                    " WHERE tsv @@ plainto_tsquery('simple', w)) FROM unnest(?::text[]) AS w",
                    (list(words),),
                ).fetchall()
            else:
                marks = ",".join("?" * len(words))
                rows = conn.execute(
                    f"SELECT term, doc FROM mind_fts_vocab WHERE term IN ({marks})", list(words)
                ).fetchall()
        return total, {str(r[0]): int(r[1]) for r in rows}

    # -- journal ---------------------------------------------------------------------

    def add_journal(
        self,
        key: str,
        entry: JournalEntry,
        *,
        entry_for: Callable[[int], DocLike],
    ) -> tuple[int, int]:
        """Record one entry verbatim and index ``entry_for(journal id)``; (journal, doc) ids."""
        with self.store.transaction() as conn:
            journal_id = int(
                conn.execute(
                    "INSERT INTO mind_journal(dir, kind, tool_name, args, result, text)"
                    " VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                    (key, entry.kind, entry.tool_name, entry.args, entry.result, entry.text),
                ).fetchall()[0][0]
            )
            doc_id = _insert_doc(conn, key, "journal", entry_for(journal_id), 0, len(entry.text))
            conn.execute("UPDATE mind_journal SET doc_id = ? WHERE id = ?", (doc_id, journal_id))
        return journal_id, doc_id

    def recent_journal(self, key: str, limit: int) -> list[tuple[int, str, str | None, str, str]]:
        """(id, kind, tool_name, text, created_at) of the latest entries, newest first."""
        rows = self.store.fetchall(
            "SELECT id, kind, tool_name, text, created_at FROM mind_journal WHERE dir = ?"
            " ORDER BY id DESC LIMIT ?",
            (key, limit),
        )
        return [(int(r[0]), r[1], r[2], r[3], r[4]) for r in rows]

    def tool_results(self, key: str, tool_name: str, limit: int) -> list[tuple[str, str]]:
        """(args, result) of the latest recorded results of ``tool_name``, newest first."""
        rows = self.store.fetchall(
            "SELECT args, result FROM mind_journal WHERE dir = ? AND tool_name = ?"
            " AND kind = 'tool_result' AND result IS NOT NULL ORDER BY id DESC LIMIT ?",
            (key, tool_name, limit),
        )
        return [(str(r[0] or ""), str(r[1])) for r in rows]

    def journal_entry(self, journal_id: int) -> dict[str, object] | None:
        """The verbatim journal row."""
        row = self.store.fetchone(
            "SELECT id, kind, tool_name, args, result, text, created_at FROM mind_journal"
            " WHERE id = ?",
            (journal_id,),
        )
        return None if row is None else dict(row)

    # -- bootstraps ------------------------------------------------------------------

    def record_bootstrap(
        self,
        session_id: str | None,
        contract_hash: str,
        host: tuple[int, int] | None,
        scope: str | None = None,
    ) -> None:
        """Record a successful bootstrap (``host``: pid and start time of the host process;
        ``scope``: the project, :func:`personae.store.bootstraps.bootstrap_scope`)."""
        host_pid, host_started = host if host is not None else (None, None)
        with self.store.transaction() as conn:
            conn.execute(
                "INSERT INTO mind_bootstraps(session_id, contract_hash, host_pid, host_started,"
                " scope) VALUES (?, ?, ?, ?, ?)",
                (session_id, contract_hash, host_pid, host_started, scope),
            )

    def claimed_session(self, scope: str, call_id: str) -> str | None:
        """The session the hook gate saw calling the unlock tool with host call id ``call_id``
        (the newest such claim of this project; claims older than a day are dropped)."""
        with self.store.transaction() as conn:
            conn.execute(
                "DELETE FROM mind_bootstrap_claims WHERE created_unix < ?",
                (time.time() - 86_400,),
            )
            row = conn.execute(
                "SELECT session_id FROM mind_bootstrap_claims WHERE scope = ? AND call_id = ?"
                " ORDER BY id DESC LIMIT 1",
                (scope, call_id),
            ).fetchone()
        return None if row is None else str(row[0])

    def last_bootstrap(self, session_id: str | None = None) -> str | None:
        """Time of the latest recorded bootstrap (of ``session_id`` when given)."""
        sql = "SELECT created_at FROM mind_bootstraps"
        params: tuple[object, ...] = ()
        if session_id is not None:
            sql += " WHERE session_id = ?"
            params = (session_id,)
        row = self.store.fetchone(sql + " ORDER BY id DESC LIMIT 1", params)
        return None if row is None else str(row[0])

    # -- rows ------------------------------------------------------------------------

    def _insert_many(
        self, conn: Conn, key: str, parsed: Sequence[tuple[DocLike, tuple[int, int]]]
    ) -> None:
        """Insert many memory files in three executemany batches (ids assigned here)."""
        if not parsed:
            return
        if self.store.dialect == "postgres":
            ids: Sequence[int] = [
                int(r[0])
                for r in conn.execute(
                    "SELECT nextval(pg_get_serial_sequence('mind_docs', 'id'))"
                    " FROM generate_series(1, ?)",
                    (len(parsed),),
                ).fetchall()
            ]
        else:  # under the write lock: nobody else takes ids meanwhile
            start = int(conn.execute("SELECT coalesce(max(id), 0) FROM mind_docs").fetchone()[0])
            ids = range(start + 1, start + 1 + len(parsed))
        pairs = list(zip(ids, parsed, strict=True))
        conn.executemany(
            "INSERT INTO mind_docs(id, dir, source, name, mtime_ns, size, title, description,"
            " type, body) VALUES (?, ?, 'memory', ?, ?, ?, ?, ?, ?, ?)",
            [
                (i, key, e.name, st[0], st[1], e.title, e.description, e.type, e.body)
                for i, (e, st) in pairs
            ],
        )
        conn.executemany(
            "INSERT INTO mind_fts(rowid, title, description, body) VALUES (?, ?, ?, ?)",
            [(i, e.title, e.description, e.body) for i, (e, _) in pairs],
        )
        conn.executemany(
            "INSERT INTO mind_facets(doc_id, key, value) VALUES (?, ?, ?)",
            [(i, k, v) for i, (e, _) in pairs for k, v in e.facets],
        )


def _bump(conn: Conn, key: str) -> None:
    """Count a catalog change of ``key`` (and, on PostgreSQL, lock its row until commit)."""
    conn.execute(
        "INSERT INTO mind_dirs(dir, generation) VALUES (?, 1)"
        " ON CONFLICT(dir) DO UPDATE SET generation = mind_dirs.generation + 1",
        (key,),
    )


def _delete_names(conn: Conn, key: str, names: list[str]) -> None:
    """Delete the memory rows of ``names`` in folder ``key`` (whatever their ids)."""
    for start in range(0, len(names), 500):
        chunk = names[start : start + 500]
        marks = ",".join("?" * len(chunk))
        ids = conn.execute(
            f"SELECT id FROM mind_docs WHERE dir = ? AND source = 'memory' AND name IN ({marks})",
            [key, *chunk],
        ).fetchall()
        for row in ids:
            _delete_doc(conn, int(row[0]))


def _delete_doc(conn: Conn, doc_id: int) -> None:
    """Delete one document with its full-text row and facets."""
    conn.execute("DELETE FROM mind_fts WHERE rowid = ?", (doc_id,))
    conn.execute("DELETE FROM mind_facets WHERE doc_id = ?", (doc_id,))
    conn.execute("DELETE FROM mind_docs WHERE id = ?", (doc_id,))


def _insert_doc(  # noqa: PLR0917
    conn: Conn, key: str, source: str, entry: DocLike, mtime_ns: int, size: int
) -> int:
    """Insert one document (memory file or journal entry); returns its id."""
    row: Any = conn.execute(
        "INSERT INTO mind_docs(dir, source, name, mtime_ns, size, title, description,"
        " type, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (
            key,
            source,
            entry.name,
            mtime_ns,
            size,
            entry.title,
            entry.description,
            entry.type,
            entry.body,
        ),
    ).fetchall()[0]  # fmt: skip (fetchall: a RETURNING statement is stepped to its end)
    doc_id = int(row[0])
    conn.execute(
        "INSERT INTO mind_fts(rowid, title, description, body) VALUES (?, ?, ?, ?)",
        (doc_id, entry.title, entry.description, entry.body),
    )
    conn.executemany(
        "INSERT INTO mind_facets(doc_id, key, value) VALUES (?, ?, ?)",
        [(doc_id, k, v) for k, v in entry.facets],
    )
    return doc_id
