"""The mind's index in the personae store: catalog cache, full-text recall, journal, bootstraps.

The catalog of a memory directory is cached keyed by (file, mtime, size):
:meth:`MindIndex.sync` re-reads only files whose stat changed. Memory files
and journal entries share one full-text index (FTS5 with bm25 on SQLite, a
weighted tsvector with ts_rank on PostgreSQL; title and description weigh more
than the body). The SQL lives in :mod:`personae.store.mind`.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from stat import S_ISREG

from personae.fsutil import NotRegularFileError
from personae.mind.memory import INDEX_NAME, MemoryDir, MemoryEntry, parse_memory
from personae.store.db import Store
from personae.store.mind import JournalEntry, MindTables, fts_query, query_words

__all__ = ["Hit", "JournalRow", "MindIndex", "SyncStats", "fts_query"]


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
        self.tables = MindTables(store)
        # dir -> (generation, {name: (mtime_ns, size)}) of the last sync.
        self._memo: dict[str, tuple[int, dict[str, tuple[int, int]]]] = {}
        self._sync_lock = threading.Lock()

    def _cached(self, key: str) -> dict[str, tuple[int, int]]:
        """``{name: (mtime_ns, size)}`` of the folder's catalog rows (as ``scan`` gives)."""
        memo = self._memo.get(key)
        if memo is not None and memo[0] == self.tables.generation(key):
            return memo[1]
        generation, cached = self.tables.memory_stats(key)
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
        self.tables.replace_memory(memory.key, removed, parsed)
        self._memo.pop(memory.key, None)
        added = sum(1 for n in changed if n not in cached)
        return SyncStats(added, len(changed) - added, len(removed), len(on_disk) - len(changed))

    def upsert(self, memory: MemoryDir, entry: MemoryEntry) -> None:
        """Index one freshly written memory file now."""
        st = (memory.root / entry.name).stat()
        self.tables.upsert_memory(memory.key, entry, st.st_mtime_ns, st.st_size)
        self._memo.pop(memory.key, None)

    def catalog(self, memory: MemoryDir) -> tuple[int, dict[str, int], bool]:
        """(total files, counts by frontmatter type, MEMORY.md present)."""
        counts, has_index = self.tables.catalog(memory.key, INDEX_NAME)
        return sum(counts.values()), counts, has_index

    def files(
        self, memory: MemoryDir, *, type: str | None, offset: int, limit: int
    ) -> tuple[int, list[tuple[str, str, str, str]]]:
        """(matching count, [(name, title, description, type)]) sorted by name."""
        return self.tables.files(memory.key, type=type, offset=offset, limit=limit)

    def docs_by_name(self, memory: MemoryDir, names: Sequence[str]) -> dict[str, str]:
        """Bodies of the named memory files that are in the catalog."""
        return self.tables.docs_by_name(memory.key, names)

    def docs_by_facet(self, memory: MemoryDir, key: str, value: str) -> list[str]:
        """Bodies of memory files with frontmatter ``key: value``, by name."""
        return self.tables.docs_by_facet(memory.key, key, value)

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
        # MEMORY.md repeats every title and description: a catalog, not a memory to recall.
        rows = self.tables.search(
            memory.key,
            self._informative(query_words(query)),
            k=k,
            facet=facet,
            exclude=exclude,
            skip_memory=INDEX_NAME,
        )
        return [Hit(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[8], r[7]) for r in rows]

    def _informative(self, words: list[str]) -> list[str]:
        """Drop words found in over 40% of all documents (they barely move the rank but
        cost a scan of nearly every row), keeping at least the rarest word."""
        if len(words) < 2:
            return words
        total, freq = self.tables.doc_frequencies(words)
        if total < 50:
            return words
        kept = [w for w in words if freq.get(w, 0) <= 0.4 * total]
        return kept or [min(words, key=lambda w: freq.get(w, 0))]

    # -- journal ---------------------------------------------------------------------

    def add_journal(self, memory: MemoryDir, entry: JournalEntry) -> tuple[int, int]:
        """Record one entry verbatim and index it; returns (journal id, doc id)."""
        facets = [("type", "journal"), ("kind", entry.kind)]
        if entry.tool_name:
            facets.append(("tool", entry.tool_name.lower()))
        title = f"{entry.kind}: {entry.tool_name}" if entry.tool_name else entry.kind

        def entry_for(journal_id: int) -> MemoryEntry:
            return MemoryEntry(
                f"journal/{journal_id}", title, "", "journal", entry.text, tuple(facets)
            )

        return self.tables.add_journal(memory.key, entry, entry_for=entry_for)

    def recent_journal(self, memory: MemoryDir, limit: int) -> list[JournalRow]:
        """The latest journal entries, newest first."""
        return [JournalRow(*r) for r in self.tables.recent_journal(memory.key, limit)]

    def tool_results(self, memory: MemoryDir, tool_name: str, limit: int) -> list[tuple[str, str]]:
        """(args, result) of the latest recorded results of ``tool_name``, newest first."""
        return self.tables.tool_results(memory.key, tool_name, limit)

    def journal_entry(self, journal_id: int) -> dict[str, object] | None:
        """The verbatim journal row (for tests and audits)."""
        return self.tables.journal_entry(journal_id)

    # -- bootstraps ------------------------------------------------------------------

    def record_bootstrap(
        self,
        session_id: str | None,
        contract_hash: str,
        host: tuple[int, int] | None = None,
        scope: str | None = None,
    ) -> None:
        """Record a successful bootstrap (``host``: pid and start time of the host process;
        ``scope``: the project, :func:`personae.store.bootstraps.bootstrap_scope`)."""
        self.tables.record_bootstrap(session_id, contract_hash, host, scope)

    def claimed_session(self, scope: str, call_id: str) -> str | None:
        """The host session the hook gate saw making the unlock call ``call_id``."""
        return self.tables.claimed_session(scope, call_id)

    def last_bootstrap(self, session_id: str | None = None) -> str | None:
        """Time of the latest recorded bootstrap (of ``session_id`` when given)."""
        return self.tables.last_bootstrap(session_id)
