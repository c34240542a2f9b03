-- Durable waits (waits.py). Parameters only.

-- name: consume_signal
-- Take the oldest unconsumed signal of that name of the run for this step.
    UPDATE runs_signal SET consumed_by_step_id = %(step)s, consumed_at = now()
    WHERE id = (
        SELECT id FROM runs_signal
        WHERE run_id = %(run)s AND name = %(name)s AND consumed_by_step_id IS NULL
        ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED
    )
    RETURNING id, payload, actor

-- name: insert_signal
-- No row if signal_one_per_name_when_refused already holds one of that name.
    INSERT INTO runs_signal (run_id, name, payload, actor, on_duplicate, created_at)
    VALUES (%(run)s, %(name)s, %(payload)s::jsonb, %(actor)s, %(on_duplicate)s, now())
    ON CONFLICT DO NOTHING RETURNING id
