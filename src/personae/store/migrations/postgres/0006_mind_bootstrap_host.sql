-- PostgreSQL variant of 0006_mind_bootstrap_host.sql: BIGINT for the process start time.
ALTER TABLE mind_bootstraps ADD COLUMN host_pid BIGINT;
ALTER TABLE mind_bootstraps ADD COLUMN host_started BIGINT;
CREATE INDEX IF NOT EXISTS mind_bootstraps_host ON mind_bootstraps (host_pid, host_started);
