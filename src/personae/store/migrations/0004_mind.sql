-- Mind server: memory catalog cache, full-text index, journal, recorded bootstraps.

-- One row per memory file (source 'memory') or journal entry (source 'journal').
-- Memory rows are keyed by (dir, name) and re-read only when (mtime_ns, size) change.
CREATE TABLE IF NOT EXISTS mind_docs (
  id INTEGER PRIMARY KEY,
  dir TEXT NOT NULL,
  source TEXT NOT NULL CHECK (source IN ('memory', 'journal')),
  name TEXT NOT NULL,
  mtime_ns INTEGER NOT NULL DEFAULT 0,
  size INTEGER NOT NULL DEFAULT 0,
  title TEXT NOT NULL DEFAULT '',
  description TEXT NOT NULL DEFAULT '',
  type TEXT NOT NULL DEFAULT 'unknown',
  body TEXT NOT NULL DEFAULT '',
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  UNIQUE (dir, source, name)
);

CREATE INDEX IF NOT EXISTS mind_docs_type ON mind_docs (dir, source, type);
-- Covering index for the catalog sync (stat comparison without reading bodies).
CREATE INDEX IF NOT EXISTS mind_docs_stat ON mind_docs (dir, source, name, mtime_ns, size);

-- Bumped on every catalog change of a folder: lets a server keep the catalog's
-- stat map in memory and notice when another process changed the table.
CREATE TABLE IF NOT EXISTS mind_dirs (
  dir TEXT PRIMARY KEY,
  generation INTEGER NOT NULL DEFAULT 0
);

-- Facets (frontmatter key/value pairs, lower-cased) for filters such as type:user.
CREATE TABLE IF NOT EXISTS mind_facets (
  doc_id INTEGER NOT NULL REFERENCES mind_docs (id) ON DELETE CASCADE,
  key TEXT NOT NULL,
  value TEXT NOT NULL
);

CREATE INDEX IF NOT EXISTS mind_facets_kv ON mind_facets (key, value, doc_id);
CREATE INDEX IF NOT EXISTS mind_facets_doc ON mind_facets (doc_id);

-- only sqlite
-- Full-text index; rowid = mind_docs.id.
CREATE VIRTUAL TABLE IF NOT EXISTS mind_fts USING fts5 (title, description, body, tokenize = 'unicode61');

-- Document frequency per term: recall drops near-universal words from OR queries.
CREATE VIRTUAL TABLE IF NOT EXISTS mind_fts_vocab USING fts5vocab (mind_fts, 'row');
-- only postgres
-- Full-text index; rowid = mind_docs.id. A weighted tsvector (title A, description B, body D)
-- with a GIN index, ranked with ts_rank where SQLite uses bm25; document frequencies come
-- from the index itself (no fts5vocab table).
CREATE TABLE IF NOT EXISTS mind_fts (
  rowid BIGINT PRIMARY KEY,
  title TEXT NOT NULL DEFAULT '',
  description TEXT NOT NULL DEFAULT '',
  body TEXT NOT NULL DEFAULT '',
  tsv tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('simple', title), 'A')
    || setweight(to_tsvector('simple', description), 'B')
    || setweight(to_tsvector('simple', body), 'D')
  ) STORED
);

CREATE INDEX IF NOT EXISTS mind_fts_tsv ON mind_fts USING gin (tsv);
-- end only

-- Verbatim record of observe/reflect calls.
CREATE TABLE IF NOT EXISTS mind_journal (
  id INTEGER PRIMARY KEY,
  dir TEXT NOT NULL,
  kind TEXT NOT NULL,
  tool_name TEXT,
  args TEXT,
  result TEXT,
  text TEXT NOT NULL,
  doc_id INTEGER REFERENCES mind_docs (id) ON DELETE SET NULL,
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

-- Successful bootstraps: the second source the hook gate checks.
CREATE TABLE IF NOT EXISTS mind_bootstraps (
  id INTEGER PRIMARY KEY,
  session_id TEXT,
  contract_hash TEXT NOT NULL,
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  created_unix REAL NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0)
);

CREATE INDEX IF NOT EXISTS mind_bootstraps_session ON mind_bootstraps (session_id);
