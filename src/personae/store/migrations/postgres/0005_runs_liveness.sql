-- PostgreSQL variant of 0005_runs_liveness.sql: BIGINT for the process start time.
ALTER TABLE runs ADD COLUMN pid BIGINT;
ALTER TABLE runs ADD COLUMN pid_started BIGINT;
ALTER TABLE runs ADD COLUMN host TEXT;
ALTER TABLE runs ADD COLUMN heartbeat_at TEXT;
ALTER TABLE runs ADD COLUMN error TEXT;
