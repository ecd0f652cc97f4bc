-- Conversations: sessions, messages (counted once when stored), summaries,
-- per-counter token cache, and token-estimate calibration per model.

CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    created TEXT NOT NULL,
    title TEXT,
    persona TEXT,
    last_seq INTEGER NOT NULL DEFAULT 0,
    message_count INTEGER NOT NULL DEFAULT 0,
    token_total INTEGER NOT NULL DEFAULT 0
);
-- only postgres: SQLite's implicit rowid as a column (queries order by insertion)
ALTER TABLE sessions ADD COLUMN rowid BIGINT GENERATED ALWAYS AS IDENTITY;
-- end only

CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool', 'system')),
    content TEXT NOT NULL,
    tool_calls TEXT,
    tool_call_id TEXT,
    tokens INTEGER NOT NULL CHECK (tokens >= 0),
    counter TEXT NOT NULL,
    created TEXT NOT NULL,
    -- The (session_id, seq) index this creates is what newest-first reads
    -- walk backward from the end of a session (cost grows with the rows read).
    UNIQUE (session_id, seq)
);

-- Counts of a message by a counter other than the one used at append time.
CREATE TABLE IF NOT EXISTS message_tokens (
    message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    counter TEXT NOT NULL,
    tokens INTEGER NOT NULL CHECK (tokens >= 0),
    PRIMARY KEY (message_id, counter)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS summaries (
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    covers_seq INTEGER NOT NULL CHECK (covers_seq >= 0),
    text TEXT NOT NULL,
    tokens INTEGER NOT NULL CHECK (tokens >= 0),
    counter TEXT NOT NULL,
    created TEXT NOT NULL
);

CREATE INDEX IF NOT EXISTS summaries_session_covers ON summaries (session_id, covers_seq DESC, id DESC);

CREATE TABLE IF NOT EXISTS token_calibration (
    model TEXT PRIMARY KEY,
    factor REAL NOT NULL CHECK (factor > 0),
    samples INTEGER NOT NULL DEFAULT 0,
    updated TEXT NOT NULL
);
