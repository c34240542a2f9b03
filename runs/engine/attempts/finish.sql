-- Finishing an attempt (finish.py). Parameters only; statuses included.

-- name: fence_ctes
-- The fence: the attempt leaves `running` only while it holds its lease (database
-- clock); its claim succeeds only if it is still this attempt's and in flight.
    WITH fenced AS (
        UPDATE runs_attempt
        SET status = %(attempt_succeeded)s, finished_at = statement_timestamp(), error = ''
        WHERE id = %(attempt)s AND status = %(attempt_running)s
          AND lease_expires_at > statement_timestamp()
        RETURNING id
    ), claim AS (
        UPDATE runs_claim SET status = %(claim_succeeded)s, result = %(result)s,
                              completed_at = statement_timestamp()
        WHERE id = %(claim)s AND status = %(in_flight)s AND attempt_id = %(attempt)s
          AND EXISTS (SELECT 1 FROM fenced)
        RETURNING id
    )

-- name: hold_attempt
-- The attempt's row, at the strength its fence's UPDATE takes, before a finish that may
-- fail its run takes the run FOR UPDATE (finish.py, _hold_attempt_and_run): the attempt
-- before the run (docs/architecture.md, "Locks"). The fence still decides.
    SELECT 1 FROM runs_attempt WHERE id = %(attempt)s FOR NO KEY UPDATE

-- name: step_succeeds
-- The step's own transition, only if this attempt still owns it.
    UPDATE runs_step SET status = %(succeeded)s, result = %(result)s,
                         finished_at = statement_timestamp(), current_attempt_id = NULL
    WHERE id = %(step)s AND status = %(running)s
      AND current_attempt_id = (SELECT id FROM fenced)

-- name: succeed
-- A batch's or a compensation's finish: fence, claim, step.
    -- include: fence_ctes
    -- include: step_succeeds
    RETURNING (SELECT count(*) FROM claim)

-- name: succeed_and_dependents
-- The finish of a step of the plan: fence, claim, step, the run's counter and the
-- dependents' (ready.sql), in one statement.
    -- include: fence_ctes
    , done AS (
    -- include: step_succeeds
        RETURNING id
    ),
    -- include: dependents_ctes
    SELECT (SELECT count(*) FROM done), (SELECT count(*) FROM claim),
           r.steps_remaining, r.status, d.id, d.key, d.name, d.pending_deps, d.status
    FROM (SELECT 1) AS one LEFT JOIN r ON true LEFT JOIN d ON true
