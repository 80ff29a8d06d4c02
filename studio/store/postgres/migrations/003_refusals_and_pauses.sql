-- Schema version 3: the issues of the last not-accepted submit per lease attempt (handed on when the lease
-- expires; written in the refusal's transaction), and a lookup of the kill switch's events, which every
-- server process reads back when another one paused or resumed agent work.
CREATE TABLE submit_refusals (
  run_id TEXT NOT NULL, step_id TEXT NOT NULL, attempt INTEGER NOT NULL, issues TEXT, refused_at TEXT,
  PRIMARY KEY (run_id, step_id, attempt));
CREATE INDEX events_pauses ON events (seq) WHERE type IN ('agent_work_paused', 'agent_work_resumed');
