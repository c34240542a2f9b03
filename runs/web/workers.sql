-- The workers page's read that the ORM does not say in one statement (runs/web/workers.py).

-- name: waiting
-- Queued steps: by the engine's rules none has a running attempt (only a running step
-- owns one, step_owned_only_while_running). The status list repeats step_waiting_idx's
-- condition so that the partial index serves the count and the minimum.
SELECT statement_timestamp(), count(*), min(queued_at)
FROM runs_step
WHERE status IN (%(queued)s, %(retrying)s) AND status = %(queued)s
