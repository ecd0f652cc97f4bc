-- One record of a run: every ended run ends with a `final` event (runs that failed or were
-- cancelled before this version have none: it is added from the row, with the reason) and
-- has one of the run statuses (running, done, partial, failed, cancelled, crashed).
UPDATE runs SET error = COALESCE(error, 'stored with an unknown status: ' || status), status = 'failed'
 WHERE status NOT IN ('running', 'done', 'partial', 'failed', 'cancelled', 'crashed');
-- only sqlite
-- Event payloads keep every field: what older versions left out is written as null.
UPDATE run_events SET data_json = json_insert(data_json, '$.task', NULL, '$.persona', NULL,
       '$.session', NULL, '$.context_from', NULL, '$.pid', NULL, '$.sandbox', NULL)
 WHERE kind = 'start';
UPDATE run_events SET data_json = json_insert(data_json, '$.error', NULL) WHERE kind = 'final';
INSERT INTO run_events (run_id, seq, kind, at, subtask, message, data_json)
SELECT r.id,
       COALESCE((SELECT MAX(e.seq) FROM run_events e WHERE e.run_id = r.id), 0) + 1,
       'final',
       COALESCE(r.finished_at, r.heartbeat_at, r.started_at),
       NULL,
       COALESCE(r.final_text, r.error, r.status),
       json_object('status', r.status, 'validated', json('[]'), 'not_validated', json('{}'),
                   'usage', json(r.usage_json), 'failure_count', 0,
                   'error', CASE WHEN r.status IN ('done', 'partial') THEN NULL
                                 ELSE COALESCE(r.error, r.status) END)
  FROM runs r
 WHERE r.status <> 'running'
   AND NOT EXISTS (SELECT 1 FROM run_events f WHERE f.run_id = r.id AND f.kind = 'final');
-- only postgres
UPDATE run_events SET data_json = (jsonb_build_object('task', NULL, 'persona', NULL,
       'session', NULL, 'context_from', NULL, 'pid', NULL, 'sandbox', NULL)
       || data_json::jsonb)::text
 WHERE kind = 'start';
UPDATE run_events SET data_json = (jsonb_build_object('error', NULL) || data_json::jsonb)::text
 WHERE kind = 'final';
INSERT INTO run_events (run_id, seq, kind, at, subtask, message, data_json)
SELECT r.id,
       COALESCE((SELECT MAX(e.seq) FROM run_events e WHERE e.run_id = r.id), 0) + 1,
       'final',
       COALESCE(r.finished_at, r.heartbeat_at, r.started_at),
       NULL,
       COALESCE(r.final_text, r.error, r.status),
       json_build_object('status', r.status, 'validated', '[]'::json, 'not_validated', '{}'::json,
                         'usage', r.usage_json::json, 'failure_count', 0,
                         'error', CASE WHEN r.status IN ('done', 'partial') THEN NULL
                                       ELSE COALESCE(r.error, r.status) END)::text
  FROM runs r
 WHERE r.status <> 'running'
   AND NOT EXISTS (SELECT 1 FROM run_events f WHERE f.run_id = r.id AND f.kind = 'final');
-- end only
