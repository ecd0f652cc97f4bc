-- What a run was started with, so it can be replayed faithfully (persona, profile, handover
-- text, the conversation's position, the project's files by hash), and which run a replay
-- re-ran (with how: from which call, against which model or prompt).
ALTER TABLE runs ADD COLUMN inputs_json TEXT;
ALTER TABLE runs ADD COLUMN replay_of TEXT;
ALTER TABLE runs ADD COLUMN replay_json TEXT;
