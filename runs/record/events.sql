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
WITH seq AS (
    UPDATE runs_run SET last_seq = last_seq + %(n)s WHERE id = %(run)s RETURNING last_seq
)
INSERT INTO runs_event
    (run_id, seq, type, step_id, attempt_number, schema_version, payload, created_at)
SELECT %(run)s, seq.last_seq - %(n)s + e.ord, e.type, e.step_id, e.attempt_number,
       %(version)s, e.payload, statement_timestamp()
FROM seq, unnest(%(types)s::text[], %(steps)s::bigint[], %(attempts)s::integer[],
                 %(payloads)s::jsonb[]) WITH ORDINALITY AS e(type, step_id, attempt_number,
                                                              payload, ord)
