-- Schema version 2: the lookups the engine makes on every call, so they stay fast as history grows.
CREATE INDEX steps_lease_expiry ON steps (lease_expires_at) WHERE lease_expires_at IS NOT NULL;
CREATE INDEX runs_live ON runs (id) WHERE ended_at IS NULL;
CREATE INDEX events_run ON events (run_id, seq);
CREATE INDEX tool_calls_refused ON tool_calls (run_id, step_id, attempt) WHERE code = 'not_accepted';
CREATE INDEX events_file ON events ((payload ->> 'file')) WHERE type = 'file_uploaded';
