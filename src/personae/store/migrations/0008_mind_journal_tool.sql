-- Earlier results of one tool (the prediction observe's surprise score is measured against)
-- are read newest first on every observe: an index keeps that a lookup as the journal grows.
CREATE INDEX IF NOT EXISTS mind_journal_tool ON mind_journal (dir, tool_name, id);
