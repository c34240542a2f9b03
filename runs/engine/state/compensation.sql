-- Compensation (compensation.py). Parameters only; statuses included.

-- name: one_done
-- A compensation succeeded: one fewer to go (steps_remaining counts them while the run
-- compensates); no row if the run ended meanwhile (a compensation failed for good).
    UPDATE runs_run SET steps_remaining = steps_remaining - 1
    WHERE id = %(run)s AND status = %(compensating)s
    RETURNING steps_remaining, ends_as
