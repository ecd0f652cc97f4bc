-- The model's answer to each model call (text, tool calls, finish reason), redacted and
-- capped before it is stored: JSON of personae.store.answers.ModelAnswer; NULL for calls
-- stored before this migration.
ALTER TABLE model_calls ADD COLUMN answer_json TEXT;
