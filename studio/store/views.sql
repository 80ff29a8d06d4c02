-- Analyst views (documented in docs/data-model.md). Test-mode runs are kept; filter on mode = 'live'.
CREATE OR REPLACE VIEW v_runs AS
SELECT r.id AS run_id, r.process, r.version, r.mode, r.state, r.outcome, r.started_by, r.started_at,
       r.ended_at, r.ended_by, r.ended_note AS ended_note,
       date_diff('second', r.started_at, r.ended_at) AS cycle_seconds,
       (SELECT count(*) FROM attempts a WHERE a.run_id = r.id) AS attempts,
       (SELECT count(*) FROM events e WHERE e.run_id = r.id AND e.type = 'step_rewound') AS rewinds
FROM runs r;

CREATE OR REPLACE VIEW v_step_attempts AS
SELECT a.run_id, r.process, r.version, r.mode, a.step_id, s.kind, a.attempt, a.actor, a.started_at, a.ended_at,
       date_diff('second', a.started_at, a.ended_at) AS seconds, a.result,
       a.result IN ('returned', 'rejected', 'check_failed', 'expired') AS reworked
FROM attempts a JOIN runs r ON r.id = a.run_id
LEFT JOIN steps s ON s.run_id = a.run_id AND s.step_id = a.step_id;

CREATE OR REPLACE VIEW v_work_items AS
SELECT w.id AS work_item_id, w.run_id, r.process, r.version, r.mode, w.step_id, w.kind, w.escalation,
       w.assigned_group, w.assigned_person, w.created_at, w.due, w.decided_at, w.decided_by, w.decision,
       w.closed_at, w.close_reason,
       date_diff('second', w.created_at, coalesce(w.decided_at, w.closed_at)) AS waiting_seconds,
       w.due IS NOT NULL AND coalesce(w.decided_at, w.closed_at) > w.due AS decided_late,
       w.closed_at IS NULL AS open
FROM work_items w JOIN runs r ON r.id = w.run_id;

CREATE OR REPLACE VIEW v_submissions AS
SELECT c.seq, c.called_at, c.tool, c.caller, c.run_id, r.process, r.version, r.mode, c.step_id, c.attempt, c.ok,
       CASE WHEN c.ok THEN 'accepted' ELSE c.code END AS status, c.issues,
       v.payload ->> 'result' AS check_result, v.payload ->> 'note' AS check_note
FROM tool_calls c
LEFT JOIN runs r ON r.id = c.run_id
LEFT JOIN events v ON v.type = 'check_verdict' AND v.run_id = c.run_id AND v.step_id = c.step_id
     AND CAST(v.payload ->> 'attempt' AS INTEGER) = c.attempt AND c.ok
WHERE (c.tool = 'submit' OR (c.tool = 'decide' AND c.decision = 'completed')) AND NOT c.replay;

CREATE OR REPLACE VIEW v_errors AS
SELECT c.seq, c.called_at, c.tool, c.caller, c.code, c.issues, c.run_id, c.step_id, c.request_id, c.latency_ms
FROM tool_calls c WHERE NOT c.ok;
