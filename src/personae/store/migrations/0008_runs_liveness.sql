-- Which process runs each run and when it was last seen alive (reconciled to 'crashed' when
-- the process is gone), and why a run failed or was cancelled.
ALTER TABLE runs ADD COLUMN pid INTEGER;
ALTER TABLE runs ADD COLUMN pid_started INTEGER;
ALTER TABLE runs ADD COLUMN host TEXT;
ALTER TABLE runs ADD COLUMN heartbeat_at TEXT;
ALTER TABLE runs ADD COLUMN error TEXT;
