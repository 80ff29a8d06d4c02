-- Schema version 5: every run document each write committed, with the seqs of the events that write
-- recorded for the run: the run as it was after any of its events, which a fork starts from
-- (studio/engine/fork.py). Written in the write's own statement; runs written before this version have
-- none, and a fork of them at an earlier event is refused as on an older DuckDB file.
CREATE TABLE run_revisions (
  run_id TEXT NOT NULL, revision INTEGER NOT NULL, first_seq BIGINT, last_seq BIGINT, doc TEXT,
  PRIMARY KEY (run_id, revision));
