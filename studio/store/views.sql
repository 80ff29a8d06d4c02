-- Derived tables (from the events log) and analyst views. Documented in docs/data-model.md.
-- Test-mode runs are included; filter on mode = 'live' for production figures.

CREATE OR REPLACE VIEW work_items AS
SELECT o.payload ->> 'workItem' AS id, o.run_id, o.step_id, o.payload ->> 'kind' AS kind,
       CAST(o.payload ->> 'escalation' AS BOOLEAN) AS escalation,
       o.payload -> 'assignedTo' ->> 'group' AS assigned_group,
       o.payload -> 'assignedTo' ->> 'person' AS assigned_person,
       o.occurred_at AS created_at, CAST(o.payload ->> 'due' AS TIMESTAMPTZ) AS due,
       CASE WHEN (c.payload ->> 'decision') IS NOT NULL THEN c.occurred_at END AS decided_at,
       c.payload ->> 'by' AS decided_by, c.payload ->> 'decision' AS decision,
       c.occurred_at AS closed_at, c.payload ->> 'reason' AS close_reason,
       CAST(o.payload ->> 'attempt' AS INTEGER) AS attempt
FROM events o
LEFT JOIN events c ON c.type = 'work_item_closed' AND c.run_id = o.run_id
     AND (c.payload ->> 'workItem') = (o.payload ->> 'workItem')
WHERE o.type = 'work_item_opened';

CREATE OR REPLACE VIEW leases AS
SELECT l.payload ->> 'tokenId' AS token_id, l.run_id, l.step_id, CAST(l.payload ->> 'attempt' AS INTEGER) AS attempt,
       l.actor AS claimant, l.occurred_at AS issued_at, CAST(l.payload ->> 'expiresAt' AS TIMESTAMPTZ) AS expires_at,
       e.occurred_at AS ended_at, e.payload ->> 'reason' AS end_reason
FROM events l
LEFT JOIN events e ON e.type = 'lease_ended' AND e.run_id = l.run_id
     AND (e.payload ->> 'tokenId') = (l.payload ->> 'tokenId')
WHERE l.type IN ('step_claimed', 'lease_renewed');

CREATE OR REPLACE VIEW attempts AS
SELECT c.run_id, c.step_id, CAST(c.payload ->> 'attempt' AS INTEGER) AS attempt, c.actor,
       c.occurred_at AS started_at, e.occurred_at AS ended_at,
       CASE WHEN (v.payload ->> 'result') = 'fail' THEN 'check_failed'
            WHEN (v.payload ->> 'result') = 'unsure' THEN 'check_unsure'
            ELSE e.payload ->> 'reason' END AS result
FROM events c
LEFT JOIN events e ON e.type = 'lease_ended' AND e.run_id = c.run_id AND e.step_id = c.step_id
     AND (e.payload ->> 'attempt') = (c.payload ->> 'attempt') AND (e.payload ->> 'reason') <> 'renewed'
LEFT JOIN events v ON v.type = 'check_verdict' AND v.run_id = c.run_id AND v.step_id = c.step_id
     AND (v.payload ->> 'attempt') = (c.payload ->> 'attempt')
WHERE c.type = 'step_claimed'
UNION ALL
SELECT w.run_id, w.step_id, w.attempt, coalesce(w.decided_by, w.assigned_group, w.assigned_person), w.created_at,
       w.closed_at,
       CASE WHEN (v.payload ->> 'result') = 'fail' THEN 'check_failed'
            WHEN (v.payload ->> 'result') = 'unsure' THEN 'check_unsure'
            ELSE coalesce(w.decision, w.close_reason) END
FROM work_items w
LEFT JOIN events v ON v.type = 'check_verdict' AND v.run_id = w.run_id AND v.step_id = w.step_id
     AND CAST(v.payload ->> 'attempt' AS INTEGER) = w.attempt;

CREATE OR REPLACE VIEW held_events AS
SELECT s.payload ->> 'event' AS id, s.run_id, s.payload ->> 'name' AS name, s.payload -> 'data' AS data,
       s.actor AS sent_by, s.occurred_at AS sent_at, c.step_id AS consumed_by,
       coalesce(c.occurred_at, d.occurred_at) AS settled_at,
       CASE WHEN c.seq IS NOT NULL THEN 'consumed' WHEN d.seq IS NOT NULL THEN 'discarded' END AS settled
FROM events s
LEFT JOIN events c ON c.type = 'event_consumed' AND (c.payload ->> 'event') = (s.payload ->> 'event')
LEFT JOIN events d ON d.type = 'events_discarded' AND d.run_id = s.run_id
     AND list_contains(CAST(d.payload -> 'events' AS VARCHAR[]), s.payload ->> 'event')
WHERE s.type = 'event_sent';

CREATE OR REPLACE VIEW files AS
SELECT payload ->> 'file' AS id, payload ->> 'name' AS file_name, payload ->> 'contentType' AS content_type,
       CAST(payload ->> 'bytes' AS BIGINT) AS bytes, payload ->> 'sha256' AS sha256, actor AS uploaded_by,
       occurred_at AS uploaded_at
FROM events WHERE type = 'file_uploaded';

CREATE OR REPLACE VIEW v_runs AS
SELECT r.id AS run_id, r.process, r.version, r.mode, r.state, r.outcome, r.started_by, r.started_at,
       r.ended_at, r.ended_by, r.ended_note,
       seconds_between(r.started_at, r.ended_at) AS cycle_seconds,
       r.claims, r.rewinds  -- counted as events are stored (studio/store/counts.py)
FROM runs r;

CREATE OR REPLACE VIEW v_step_attempts AS
SELECT a.run_id, r.process, r.version, r.mode, a.step_id, s.kind, a.attempt, a.actor, a.started_at, a.ended_at,
       seconds_between(a.started_at, a.ended_at) AS seconds, a.result,
       a.result IN ('returned', 'rejected', 'check_failed', 'expired') AS reworked
FROM attempts a JOIN runs r ON r.id = a.run_id
LEFT JOIN steps s ON s.run_id = a.run_id AND s.step_id = a.step_id;

CREATE OR REPLACE VIEW v_work_items AS
SELECT w.id AS work_item_id, w.run_id, r.process, r.version, r.mode, w.step_id, w.kind, w.escalation,
       w.assigned_group, w.assigned_person, w.created_at, w.due, w.decided_at, w.decided_by, w.decision,
       w.closed_at, w.close_reason,
       seconds_between(w.created_at, w.closed_at) AS waiting_seconds,
       w.due IS NOT NULL AND w.closed_at > w.due AS decided_late,
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

-- The operator's kill switch (studio/engine/pauses.py): one row per pause, active until resumed.
CREATE OR REPLACE VIEW v_pauses AS
SELECT p.payload ->> 'pause' AS pause_id, p.payload ->> 'process' AS process, p.payload ->> 'step' AS step_id,
       p.payload ->> 'agent' AS agent, p.occurred_at AS paused_at, p.actor AS paused_by,
       p.payload ->> 'reason' AS reason, r.occurred_at AS resumed_at, r.actor AS resumed_by,
       r.payload ->> 'reason' AS resume_reason, r.seq IS NULL AS active
FROM events p
LEFT JOIN events r ON r.type = 'agent_work_resumed' AND (r.payload ->> 'pause') = (p.payload ->> 'pause')
WHERE p.type = 'agent_work_paused';

-- Events a run holds now: sent, not yet consumed by a wait_for step nor discarded at the run's end.
-- send_event bounds them per run (studio/limits.py, docs/limits.md).
CREATE OR REPLACE VIEW v_held_events AS
SELECT h.id AS event_id, h.run_id, r.process, r.version, r.mode, r.state AS run_state, h.name, h.data,
       h.sent_by, h.sent_at
FROM held_events h JOIN runs r ON r.id = h.run_id
WHERE h.settled IS NULL;

-- Time travel (studio/engine/fork.py): one row per fork, from its `fork_started` event. The fork's log
-- begins with copies of its source's first `at_event` events (seq below `forked_seq`).
CREATE OR REPLACE VIEW v_forks AS
SELECT f.run_id, (f.payload ->> 'fromRun') AS from_run_id, CAST(f.payload ->> 'atEvent' AS INTEGER) AS at_event,
       CAST(f.payload ->> 'atSeq' AS BIGINT) AS from_seq, f.seq AS forked_seq, f.actor AS forked_by,
       f.occurred_at AS forked_at, r.process, r.version, r.state
FROM events f JOIN runs r ON r.id = f.run_id
WHERE f.type = 'fork_started';
