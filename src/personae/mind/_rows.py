"""Row writers for the mind tables (used inside the caller's write transaction)."""

from __future__ import annotations

import sqlite3

from personae.mind.memory import MemoryEntry

__all__ = ["delete_doc", "delete_names", "insert_doc", "insert_many"]


def delete_names(conn: sqlite3.Connection, key: str, names: list[str]) -> None:
    """Delete the memory rows of ``names`` in folder ``key`` (whatever their ids)."""
    for start in range(0, len(names), 500):
        chunk = names[start : start + 500]
        marks = ",".join("?" * len(chunk))
        ids = conn.execute(
            f"SELECT id FROM mind_docs WHERE dir = ? AND source = 'memory' AND name IN ({marks})",
            [key, *chunk],
        ).fetchall()
        for (doc_id,) in ids:
            delete_doc(conn, doc_id)


def delete_doc(conn: sqlite3.Connection, doc_id: int) -> None:
    """Delete one document with its FTS row and facets."""
    conn.execute("DELETE FROM mind_fts WHERE rowid = ?", (doc_id,))
    conn.execute("DELETE FROM mind_facets WHERE doc_id = ?", (doc_id,))
    conn.execute("DELETE FROM mind_docs WHERE id = ?", (doc_id,))


def insert_many(
    conn: sqlite3.Connection, key: str, parsed: list[tuple[MemoryEntry, tuple[int, int]]]
) -> None:
    """Insert many memory files in three executemany batches (ids assigned here)."""
    if not parsed:
        return
    start = int(conn.execute("SELECT coalesce(max(id), 0) FROM mind_docs").fetchone()[0]) + 1
    ids = range(start, start + len(parsed))
    conn.executemany(
        "INSERT INTO mind_docs(id, dir, source, name, mtime_ns, size, title, description,"
        " type, body) VALUES (?, ?, 'memory', ?, ?, ?, ?, ?, ?, ?)",
        [
            (i, key, e.name, st[0], st[1], e.title, e.description, e.type, e.body)
            for i, (e, st) in zip(ids, parsed, strict=True)
        ],
    )
    conn.executemany(
        "INSERT INTO mind_fts(rowid, title, description, body) VALUES (?, ?, ?, ?)",
        [(i, e.title, e.description, e.body) for i, (e, _) in zip(ids, parsed, strict=True)],
    )
    conn.executemany(
        "INSERT INTO mind_facets(doc_id, key, value) VALUES (?, ?, ?)",
        [(i, k, v) for i, (e, _) in zip(ids, parsed, strict=True) for k, v in e.facets],
    )


def insert_doc(  # noqa: PLR0917
    conn: sqlite3.Connection,
    key: str,
    source: str,
    entry: MemoryEntry,
    mtime_ns: int,
    size: int,
) -> int:
    """Insert one document (memory file or journal entry); returns its id."""
    cur = conn.execute(
        "INSERT INTO mind_docs(dir, source, name, mtime_ns, size, title, description,"
        " type, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
    )
    doc_id = int(cur.lastrowid or 0)
    conn.execute(
        "INSERT INTO mind_fts(rowid, title, description, body) VALUES (?, ?, ?, ?)",
        (doc_id, entry.title, entry.description, entry.body),
    )
    conn.executemany(
        "INSERT INTO mind_facets(doc_id, key, value) VALUES (?, ?, ?)",
        [(doc_id, k, v) for k, v in entry.facets],
    )
    return doc_id
