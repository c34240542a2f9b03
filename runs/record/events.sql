-- The event log's one writer (runs/record/events.py). The run's last_seq is bumped and the
-- events inserted in one statement: the seq is allocated where it is used, and the
-- run's row stays locked from here to the commit (docs/architecture.md#locks).

-- name: append_one
WITH seq AS (
    UPDATE runs_run SET last_seq = last_seq + 1 WHERE id = %(run)s RETURNING last_seq
)
INSERT INTO runs_event
    (run_id, seq, type, step_id, attempt_number, schema_version, payload, created_at)
SELECT %(run)s, seq.last_seq, %(type)s, %(step)s, %(attempt)s, %(version)s, %(payload)s,
       statement_timestamp()
FROM seq
RETURNING seq

-- name: append_many
-- A transaction's events for one run, as one JSON array of [type, step_id, attempt_number,
-- payload] (events.py, _write): one parameter encoded once, instead of four arrays whose
-- every element the driver adapts on its own.
WITH seq AS (
    UPDATE runs_run SET last_seq = last_seq + %(n)s WHERE id = %(run)s RETURNING last_seq
)
INSERT INTO runs_event
    (run_id, seq, type, step_id, attempt_number, schema_version, payload, created_at)
SELECT %(run)s, seq.last_seq - %(n)s + e.ord, e.entry ->> 0, (e.entry ->> 1)::bigint,
       (e.entry ->> 2)::integer, %(version)s, e.entry -> 3, statement_timestamp()
FROM seq, jsonb_array_elements(%(events)s::jsonb) WITH ORDINALITY AS e(entry, ord)
