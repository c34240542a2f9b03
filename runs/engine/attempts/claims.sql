-- The claims an attempt takes (claims.py). Parameters only; statuses included.

-- name: insert_bounded
-- An in-flight claim (a map item's: already succeeded) in the caller's transaction.
-- lock_timeout is set for this statement's wait only: the subquery saves the
-- transaction's value and sets the bound (both local to the transaction) before the
-- insert can wait, and RETURNING restores the saved value, so the step's own effect runs
-- with whatever lock_timeout it had. A taken key returns no row, and RETURNING does not
-- run: restore_lock_timeout puts it back then.
    -- include: claim_row
    ON CONFLICT (key) DO NOTHING
    -- include: restoring

-- name: insert_bounded_new
-- The same for a key no earlier attempt can have committed (a map batch's first
-- attempt: claims.py, `new`): without ON CONFLICT, whose speculative insertion writes a
-- second WAL record. A taken key raises unique_violation; the wait stays bounded.
    -- include: claim_row
    -- include: restoring

-- name: claim_row
-- The claim row of insert_bounded and insert_bounded_new, with the bounded wait.
    INSERT INTO runs_claim (key, run_id, step_id, item_key, kind, status,
                            attempt_id, error, resolved_by, resolution_note,
                            created_at, completed_at)
    SELECT %(key)s, %(run)s, %(step)s, %(item)s, %(kind)s, %(status)s, %(attempt)s,
           '', '', '', now(), CASE WHEN %(completed)s THEN now() END
    FROM (SELECT set_config('lock_timeout', %(lock_timeout)s, true)
          FROM (SELECT set_config('runs.lock_timeout_before',
                                  current_setting('lock_timeout'), true))
               AS saved) AS bounded_wait

-- name: restoring
-- What an inserted claim returns: its id, and the transaction's lock_timeout restored.
    RETURNING id, set_config('lock_timeout',
                             current_setting('runs.lock_timeout_before'), true)

-- name: restore_lock_timeout
-- After a taken key: what the transaction goes on with (the retake of an idempotent item
-- waits for row locks) must not be bounded by the claim's lock timeout.
    SELECT set_config('lock_timeout', current_setting('runs.lock_timeout_before'), true)

-- name: take
-- Take, or on a retry of the same logical invocation take over, the step's claim: the
-- key's uniqueness is the arbiter. A retry re-owns an in-flight claim with the same key,
-- or an abandoned one (an idempotent step that gave up, retried by an operator: the same
-- key is what makes that safe); one that succeeded, failed or is unresolved returns no
-- row and is never taken again. hold_key: the step's declared hold (attempts/slots.py).
    INSERT INTO runs_claim (key, run_id, step_id, item_key, kind, status, attempt_id,
                            error, resolved_by, resolution_note, created_at, hold_key)
    VALUES (%(key)s, %(run)s, %(step)s, %(item)s, %(kind)s, %(in_flight)s, %(attempt)s,
            '', '', '', now(), %(hold_key)s)
    ON CONFLICT (key) DO UPDATE
        SET attempt_id = EXCLUDED.attempt_id, status = EXCLUDED.status, error = '',
            completed_at = NULL
        WHERE runs_claim.status = ANY(%(retakeable)s)
    RETURNING id, (xmax = 0) AS inserted
