-- One usage tree across processes: a run started by another run (a handover child, a chain
-- step, a batch task) names its parent run; every run has a trace id and its own span id
-- (W3C trace context, so the OpenTelemetry export of a tree is one trace) and the caps it
-- ran under (tokens, cost, calls: JSON; NULL for runs stored before this migration).
ALTER TABLE runs ADD COLUMN parent_run_id TEXT;
ALTER TABLE runs ADD COLUMN trace_id TEXT;
ALTER TABLE runs ADD COLUMN span_id TEXT;
ALTER TABLE runs ADD COLUMN parent_span_id TEXT;
ALTER TABLE runs ADD COLUMN budget_json TEXT;
CREATE INDEX IF NOT EXISTS runs_parent ON runs(parent_run_id);
