-- The host process a bootstrap came from (the stdio MCP client that started the mind
-- server): pid and kernel start time. The hook gate of the same host process finds it among
-- its own ancestors, so hosts whose hook input has no session id the model can see
-- (Copilot CLI) and hosts whose transcript lags (Claude Code) can still be unlocked.
ALTER TABLE mind_bootstraps ADD COLUMN host_pid INTEGER;
ALTER TABLE mind_bootstraps ADD COLUMN host_started INTEGER;
CREATE INDEX mind_bootstraps_host ON mind_bootstraps (host_pid, host_started);
