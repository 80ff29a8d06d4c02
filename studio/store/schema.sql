-- Process Studio storage, schema version 4 (studio/store/migrate.py brings older files up to it).
-- Every table and view is documented in docs/data-model.md.
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
  ended_note VARCHAR, inputs VARCHAR, revision INTEGER, doc VARCHAR,
  -- the run's step_claimed and step_rewound events, counted as they are stored (studio/store/counts.py)
  claims BIGINT DEFAULT 0, rewinds BIGINT DEFAULT 0,
  -- the journal seq through which the materialisation that wrote this row ran; the run's `steps` rows carry
  -- the same: replacing them reads only the row groups whose min/max admit it (Store._materialise; 0: before
  -- schema version 4)
  materialised_seq BIGINT DEFAULT 0);
CREATE TABLE IF NOT EXISTS steps (
  run_id VARCHAR, step_id VARCHAR, kind VARCHAR, position INTEGER, state VARCHAR, ready_since TIMESTAMPTZ,
  due TIMESTAMPTZ, attempt INTEGER, claimed_by VARCHAR, lease_expires_at TIMESTAMPTZ, updated_at TIMESTAMPTZ,
  materialised_seq BIGINT DEFAULT 0);
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
-- What keeps a large store cheap to open, DuckDB only (docs/data-model.md, "What the engine keeps in memory"):
-- the 64-bit key digest of each replay record in `requests`, written with it, pruned with it, read at open
-- instead of computed (studio/store/retention.py; schema version 2).
CREATE TABLE IF NOT EXISTS request_keys (key_digest UBIGINT, stored_at TIMESTAMPTZ);
-- seconds_between(a, b): whole seconds from a to b as date_diff('second', a, b) counts them (the UTC second
-- boundaries crossed), in integer arithmetic: DuckDB's date_diff on TIMESTAMPTZ goes through ICU's calendar,
-- ~0.4 s per million rows. The analyst views use it; the PostgreSQL store defines the same function.
-- The casts (a no-op on these TIMESTAMPTZ columns) let DuckDB 1.1 bind the macro's untyped parameters.
CREATE OR REPLACE MACRO seconds_between(a, b) AS
  (epoch_us(CAST(b AS TIMESTAMPTZ)) // 1000000 - CAST(epoch_us(CAST(b AS TIMESTAMPTZ)) % 1000000 < 0 AS BIGINT))
  - (epoch_us(CAST(a AS TIMESTAMPTZ)) // 1000000 - CAST(epoch_us(CAST(a AS TIMESTAMPTZ)) % 1000000 < 0 AS BIGINT));
