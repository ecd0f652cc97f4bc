-- Handover ledger: every handover created and every result written, kept even
-- when the handover file itself is deleted.
CREATE TABLE IF NOT EXISTS handover_ledger (
    handover_id    TEXT PRIMARY KEY,
    path           TEXT NOT NULL,
    file_hash      TEXT NOT NULL,
    source_persona TEXT NOT NULL,
    target_persona TEXT NOT NULL,
    task           TEXT NOT NULL DEFAULT '',
    status         TEXT NOT NULL DEFAULT 'created',
    error          TEXT,
    created_at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
    updated_at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
    finished_at    TEXT
);
-- only postgres: SQLite's implicit rowid as a column (queries order by insertion)
ALTER TABLE handover_ledger ADD COLUMN rowid BIGINT GENERATED ALWAYS AS IDENTITY;
-- end only

CREATE INDEX IF NOT EXISTS handover_ledger_status ON handover_ledger(status);

CREATE TABLE IF NOT EXISTS handover_events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    handover_id TEXT NOT NULL,
    event       TEXT NOT NULL,
    status      TEXT,
    file_hash   TEXT,
    path        TEXT,
    detail      TEXT,
    at          TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
);

CREATE INDEX IF NOT EXISTS handover_events_id ON handover_events(handover_id, id);
