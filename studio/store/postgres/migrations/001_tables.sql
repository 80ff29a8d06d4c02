-- Process Studio on PostgreSQL, schema version 1: the tables of docs/data-model.md, with the keys that
-- make several server processes on one database safe (one row per run, one record per requestId).
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE processes (
  name TEXT NOT NULL, version INTEGER NOT NULL, sha256 TEXT, source TEXT, definition TEXT, description TEXT,
  file TEXT, published_at TIMESTAMPTZ, PRIMARY KEY (name, version));
CREATE TABLE runs (
  id TEXT PRIMARY KEY, process TEXT, version INTEGER, mode TEXT, state TEXT, outcome TEXT, started_by TEXT,
  started_at TIMESTAMPTZ, updated_at TIMESTAMPTZ, ended_at TIMESTAMPTZ, ended_by TEXT, ended_note TEXT,
  inputs TEXT, revision INTEGER, doc TEXT);
CREATE TABLE steps (
  run_id TEXT NOT NULL, step_id TEXT NOT NULL, kind TEXT, position INTEGER, state TEXT,
  ready_since TIMESTAMPTZ, due TIMESTAMPTZ, attempt INTEGER, claimed_by TEXT, lease_expires_at TIMESTAMPTZ,
  updated_at TIMESTAMPTZ, PRIMARY KEY (run_id, step_id));
CREATE TABLE file_blobs (id TEXT PRIMARY KEY, content BYTEA NOT NULL);
CREATE TABLE requests (
  caller TEXT NOT NULL, request_id TEXT NOT NULL, tool TEXT, args_sha256 TEXT, result TEXT,
  stored_at TIMESTAMPTZ, PRIMARY KEY (caller, request_id));
CREATE TABLE events (
  seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, occurred_at TIMESTAMPTZ, run_id TEXT, step_id TEXT,
  type TEXT, actor TEXT, payload JSONB);
CREATE TABLE tool_calls (
  seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, called_at TIMESTAMPTZ, tool TEXT, caller TEXT,
  ok BOOLEAN, code TEXT, issues JSONB, latency_ms DOUBLE PRECISION, request_id TEXT, run_id TEXT,
  step_id TEXT, attempt INTEGER, decision TEXT, replay BOOLEAN);
-- Run numbers (creation order, the tie-breaker of equal start times) drawn by every process alike.
CREATE SEQUENCE run_numbers;
-- The key that signs lease tokens and evidence urls, shared by every server process on this database.
-- A table of its own, apart from what analysts read: grant them SELECT on the others only.
CREATE TABLE signing_key (id INTEGER PRIMARY KEY CHECK (id = 1), key BYTEA NOT NULL);
