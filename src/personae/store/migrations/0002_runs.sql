-- Runs of the team and their typed events; every model call with its assembled context.
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    session_id TEXT,
    task TEXT NOT NULL,
    persona TEXT,
    model TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'running',
    started_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
    finished_at TEXT,
    final_text TEXT,
    usage_json TEXT NOT NULL DEFAULT '{}'
);
-- only postgres: SQLite's implicit rowid as a column (queries order by insertion)
ALTER TABLE runs ADD COLUMN rowid BIGINT GENERATED ALWAYS AS IDENTITY;
-- end only
CREATE INDEX IF NOT EXISTS runs_session ON runs(session_id, started_at);

CREATE TABLE IF NOT EXISTS run_events (
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    at TEXT NOT NULL,
    subtask INTEGER,
    message TEXT NOT NULL DEFAULT '',
    data_json TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE IF NOT EXISTS model_calls (
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    role TEXT NOT NULL,
    persona TEXT,
    subtask INTEGER,
    model TEXT NOT NULL,
    context_text TEXT NOT NULL,
    budget_json TEXT NOT NULL DEFAULT '{}',
    usage_json TEXT NOT NULL DEFAULT '{}',
    at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
    PRIMARY KEY (run_id, seq)
);
