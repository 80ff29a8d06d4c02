-- Process Studio storage, schema version 1. Documented in docs/data-model.md.
CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR);
CREATE TABLE IF NOT EXISTS processes (
  name VARCHAR, version INTEGER, sha256 VARCHAR, source VARCHAR, definition JSON,
  description VARCHAR, file VARCHAR, published_at TIMESTAMPTZ, PRIMARY KEY (name, version));
CREATE TABLE IF NOT EXISTS runs (
  id VARCHAR PRIMARY KEY, process VARCHAR, version INTEGER, mode VARCHAR, state VARCHAR, outcome VARCHAR,
  started_by VARCHAR, started_at TIMESTAMPTZ, updated_at TIMESTAMPTZ, ended_at TIMESTAMPTZ, ended_by VARCHAR,
  ended_note VARCHAR, inputs JSON, doc JSON);
CREATE TABLE IF NOT EXISTS steps (
  run_id VARCHAR, step_id VARCHAR, kind VARCHAR, position INTEGER, state VARCHAR, ready_since TIMESTAMPTZ,
  due TIMESTAMPTZ, attempt INTEGER, claimed_by VARCHAR, lease_expires_at TIMESTAMPTZ, updated_at TIMESTAMPTZ,
  PRIMARY KEY (run_id, step_id));
CREATE TABLE IF NOT EXISTS work_items (
  id VARCHAR PRIMARY KEY, run_id VARCHAR, step_id VARCHAR, kind VARCHAR, escalation BOOLEAN,
  assigned_group VARCHAR, assigned_person VARCHAR, created_at TIMESTAMPTZ, due TIMESTAMPTZ,
  decided_at TIMESTAMPTZ, decided_by VARCHAR, decision VARCHAR, closed_at TIMESTAMPTZ, close_reason VARCHAR);
CREATE TABLE IF NOT EXISTS attempts (
  run_id VARCHAR, step_id VARCHAR, attempt INTEGER, actor VARCHAR, started_at TIMESTAMPTZ, ended_at TIMESTAMPTZ,
  result VARCHAR, PRIMARY KEY (run_id, step_id, attempt));
CREATE TABLE IF NOT EXISTS leases (
  token_id VARCHAR PRIMARY KEY, run_id VARCHAR, step_id VARCHAR, attempt INTEGER, claimant VARCHAR,
  issued_at TIMESTAMPTZ, expires_at TIMESTAMPTZ, ended_at TIMESTAMPTZ, end_reason VARCHAR);
CREATE TABLE IF NOT EXISTS held_events (
  id VARCHAR PRIMARY KEY, run_id VARCHAR, name VARCHAR, data JSON, sent_by VARCHAR, sent_at TIMESTAMPTZ,
  consumed_by VARCHAR, settled_at TIMESTAMPTZ, settled VARCHAR);
CREATE TABLE IF NOT EXISTS files (
  id VARCHAR PRIMARY KEY, file_name VARCHAR, content_type VARCHAR, bytes BIGINT, sha256 VARCHAR,
  uploaded_by VARCHAR, uploaded_at TIMESTAMPTZ);
CREATE TABLE IF NOT EXISTS file_blobs (id VARCHAR PRIMARY KEY, content BLOB);
CREATE TABLE IF NOT EXISTS requests (
  caller VARCHAR, request_id VARCHAR, tool VARCHAR, args_sha256 VARCHAR, result JSON, stored_at TIMESTAMPTZ,
  PRIMARY KEY (caller, request_id));
CREATE SEQUENCE IF NOT EXISTS events_seq;
CREATE TABLE IF NOT EXISTS events (
  seq BIGINT PRIMARY KEY, occurred_at TIMESTAMPTZ, run_id VARCHAR, step_id VARCHAR, type VARCHAR, actor VARCHAR,
  payload JSON);
CREATE TABLE IF NOT EXISTS tool_calls (
  seq BIGINT, called_at TIMESTAMPTZ, tool VARCHAR, caller VARCHAR, ok BOOLEAN, code VARCHAR, issues JSON,
  latency_ms DOUBLE, request_id VARCHAR, run_id VARCHAR, step_id VARCHAR, attempt INTEGER, decision VARCHAR, replay BOOLEAN);
