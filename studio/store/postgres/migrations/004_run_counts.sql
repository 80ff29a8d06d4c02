-- Schema version 4: each run's step_claimed and step_rewound events counted in `runs` (claims, rewinds),
-- which v_runs reads instead of counting the log (studio/store/counts.py; the DuckDB store adds them as it
-- materialises). Here a trigger adds them as events are inserted: the run's row is locked by the write
-- that records them, and the write path's upsert of `runs` leaves these columns alone.
ALTER TABLE runs ADD COLUMN claims BIGINT NOT NULL DEFAULT 0, ADD COLUMN rewinds BIGINT NOT NULL DEFAULT 0;
UPDATE runs SET claims = c.claims, rewinds = c.rewinds
FROM (SELECT run_id, count(*) FILTER (WHERE type = 'step_claimed') AS claims,
             count(*) FILTER (WHERE type = 'step_rewound') AS rewinds
      FROM events WHERE type IN ('step_claimed', 'step_rewound') GROUP BY run_id) c
WHERE runs.id = c.run_id;
CREATE FUNCTION count_run_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE runs SET claims = claims + CASE WHEN NEW.type = 'step_claimed' THEN 1 ELSE 0 END,
                  rewinds = rewinds + CASE WHEN NEW.type = 'step_rewound' THEN 1 ELSE 0 END
  WHERE id = NEW.run_id;
  RETURN NULL;
END $$;
CREATE TRIGGER events_count_run AFTER INSERT ON events
FOR EACH ROW WHEN (NEW.type IN ('step_claimed', 'step_rewound')) EXECUTE FUNCTION count_run_event();
