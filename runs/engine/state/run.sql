-- The run's own edges on a step's hot path (run.py). Parameters only; statuses included.

-- name: start
-- pending -> running: the first step starts.
    UPDATE runs_run SET status = %(running)s, updated_at = statement_timestamp()
    WHERE id = %(run)s AND status = %(pending)s

-- name: succeed
-- running (or needs_reconciliation) -> succeeded: its result is its leaf steps' results
-- (the steps no other step depends on), gathered in the same statement.
    UPDATE runs_run
    SET status = %(succeeded)s, finished_at = statement_timestamp(),
        updated_at = statement_timestamp(),
        result = (SELECT coalesce(jsonb_object_agg(s.name, s.result), '{}'::jsonb)
                  FROM runs_step s
                  WHERE s.run_id = %(run)s AND s.name = ANY(%(leaves)s) AND s.parent_id IS NULL)
    WHERE id = %(run)s AND status = ANY(%(from)s)
