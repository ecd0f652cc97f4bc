-- One bootstrap unlocks one session of one project. `scope` names the project store a
-- bootstrap belongs to (machine name and the real path of its .personae/state.db), so rows
-- of another project on a shared PostgreSQL database unlock nothing; rows from before this
-- migration have none and unlock nothing.
ALTER TABLE mind_bootstraps ADD COLUMN scope TEXT;
CREATE INDEX IF NOT EXISTS mind_bootstraps_scope ON mind_bootstraps (scope, session_id);

-- What the hook gate saw when a host called an unlock tool: the host's session id for that
-- call (and the host's call id, where the host passes it to the MCP server too). The mind
-- server binds the bootstrap it records to this session, never to a session id the model
-- passes.
CREATE TABLE IF NOT EXISTS mind_bootstrap_claims (
  id INTEGER PRIMARY KEY,
  scope TEXT NOT NULL,
  session_id TEXT NOT NULL,
  call_id TEXT,
  host_pid INTEGER,
  host_started INTEGER,
  created_unix REAL NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0)
);
CREATE INDEX IF NOT EXISTS mind_bootstrap_claims_call ON mind_bootstrap_claims (scope, call_id);
