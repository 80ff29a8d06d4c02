-- Analyst views that answer docs/queries.md (loaded after views.sql). Documented in docs/queries.md.

-- One row per visit of a step: from the first time it was reached (ready, work item opened, waiting for its
-- event) to the moment it was left (`done`, or `rewound` by a rejection). A visit that has not ended yet has
-- no row; neither has an end with no reach before it (a second end event of the same visit). Escalations, expired leases and check failures stay inside the visit they interrupt.
CREATE OR REPLACE VIEW v_step_visits AS
WITH ends AS (
  SELECT seq, run_id, step_id, occurred_at, actor, 'done' AS how FROM events WHERE type = 'step_done'
  UNION ALL
  SELECT seq, run_id, unnest(CAST(payload -> 'steps' AS VARCHAR[])) AS step_id, occurred_at, actor, 'rewound' AS how
  FROM events WHERE type = 'step_rewound'
),
numbered AS (
  SELECT *, lag(seq, 1, 0) OVER (PARTITION BY run_id, step_id ORDER BY seq) AS after_seq FROM ends
),
starts AS (
  SELECT seq, run_id, step_id, occurred_at FROM events
  WHERE type IN ('step_ready', 'work_item_opened', 'step_waiting') AND step_id IS NOT NULL
)
SELECT n.run_id, r.process, r.version, r.mode, n.step_id, st.kind,
       row_number() OVER (PARTITION BY n.run_id, n.step_id ORDER BY n.seq) AS visit,
       min(s.occurred_at) AS reached_at, n.occurred_at AS left_at, n.how,
       seconds_between(min(s.occurred_at), n.occurred_at) AS seconds, n.seq AS end_seq, n.actor AS left_by
FROM numbered n
JOIN starts s ON s.run_id = n.run_id AND s.step_id = n.step_id AND s.seq > n.after_seq AND s.seq < n.seq
JOIN runs r ON r.id = n.run_id
LEFT JOIN steps st ON st.run_id = n.run_id AND st.step_id = n.step_id
GROUP BY n.run_id, r.process, r.version, r.mode, n.step_id, st.kind, n.seq, n.occurred_at, n.how, n.actor;
