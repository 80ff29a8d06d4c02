-- Process Studio storage, schema version 1. Every table and view is documented in docs/data-model.md.
-- The write-ahead journal is a SQLite file beside this one (`<db>.journal`, see studio/store/journal.py);
-- these tables are materialised from it in bulk, before any read and at close. `journal_applied` holds
-- the last journal record applied here (committed with it). Column order = the row types in rows.py.
CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR);
CREATE TABLE IF NOT EXISTS journal_applied (seq BIGINT);
-- The digest of the schema and views applied (they are replaced only when it changes).
CREATE TABLE IF NOT EXISTS schema_applied (sha256 VARCHAR);
CREATE TABLE IF NOT EXISTS processes (
  name VARCHAR, version INTEGER, sha256 VARCHAR, source VARCHAR, definition VARCHAR,
  description VARCHAR, file VARCHAR, published_at TIMESTAMPTZ);
CREATE TABLE IF NOT EXISTS runs (
  id VARCHAR, process VARCHAR, version INTEGER, mode VARCHAR, state VARCHAR, outcome VARCHAR,
  started_by VARCHAR, started_at TIMESTAMPTZ, updated_at TIMESTAMPTZ, ended_at TIMESTAMPTZ, ended_by VARCHAR,
  ended_note VARCHAR, inputs VARCHAR, revision INTEGER, doc VARCHAR);
CREATE TABLE IF NOT EXISTS steps (
  run_id VARCHAR, step_id VARCHAR, kind VARCHAR, position INTEGER, state VARCHAR, ready_since TIMESTAMPTZ,
  due TIMESTAMPTZ, attempt INTEGER, claimed_by VARCHAR, lease_expires_at TIMESTAMPTZ, updated_at TIMESTAMPTZ);
CREATE TABLE IF NOT EXISTS file_blobs (id VARCHAR, content BLOB);
CREATE TABLE IF NOT EXISTS requests (
  caller VARCHAR, request_id VARCHAR, tool VARCHAR, args_sha256 VARCHAR, result VARCHAR, stored_at TIMESTAMPTZ);
CREATE TABLE IF NOT EXISTS events (
  seq BIGINT, occurred_at TIMESTAMPTZ, run_id VARCHAR, step_id VARCHAR, type VARCHAR, actor VARCHAR,
  payload JSON);
CREATE TABLE IF NOT EXISTS tool_calls (
  seq BIGINT, called_at TIMESTAMPTZ, tool VARCHAR, caller VARCHAR, ok BOOLEAN, code VARCHAR, issues JSON,
  latency_ms DOUBLE, request_id VARCHAR, run_id VARCHAR, step_id VARCHAR, attempt INTEGER, decision VARCHAR,
  replay BOOLEAN);
-- The issues of the last not-accepted submit per lease attempt: handed on when the lease expires, so they
-- are kept as durably as the refusal's replay record (written in the same transaction).
CREATE TABLE IF NOT EXISTS submit_refusals (
  run_id VARCHAR, step_id VARCHAR, attempt INTEGER, issues VARCHAR, refused_at VARCHAR);
-- Every run document each accepted write committed, with the seqs of the events that write recorded for
-- the run: the run as it was after any of its events, which a fork starts from (studio/engine/fork.py).
CREATE TABLE IF NOT EXISTS run_revisions (
  run_id VARCHAR, revision INTEGER, first_seq BIGINT, last_seq BIGINT, doc VARCHAR);
-- The point look-up the engine makes of history it does not keep in memory: an ended run by id (see
-- docs/data-model.md, "What the engine keeps in memory"; a replay record is found by its stored_at).
CREATE INDEX IF NOT EXISTS runs_id ON runs (id);
