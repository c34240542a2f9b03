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

-- name: succeed_and_start
-- The finish of a step of the plan whose one dependent is a plain step that takes no
-- claim at its start, by a worker that runs that dependent next (finish.py, _chain): as
-- succeed_and_dependents, and when this success is the dependent's last dependency and
-- start.sql would start it now (its run active and not past its deadline, no pause of
-- its workflow or of its step: read as start.sql reads them), the same UPDATE takes it
-- from pending to running and its attempt is inserted. One statement and one version of
-- its row fewer than queued here and started by start.sql after; the events are the
-- same (step_queued, then step_started). Where it may not start now, it is queued, as
-- by succeed_and_dependents. Returns start.sql's columns (the dependent's row, the run's,
-- its dependencies' results: this step's from the parameter, as the statement's snapshot
-- still has it running), then (done, claimed, started) and the dependents row
-- step_succeeded() reads.
    -- include: fence_ctes
    , done AS (
    -- include: step_succeeds
        RETURNING id
    ), r AS (
        UPDATE runs_run SET steps_remaining = steps_remaining - 1
        WHERE id = %(run)s AND status <> %(compensating)s AND ends_as = ''
          AND EXISTS (SELECT 1 FROM done)
        RETURNING *
    ), go AS (
        SELECT NOT coalesce(r.deadline_at <= statement_timestamp(), false)
               AND NOT EXISTS (SELECT 1 FROM runs_pause p
                               WHERE p.workflow = r.workflow AND p.step IN ('', %(next)s))
               AS now
        FROM r
    ), d AS (
        UPDATE runs_step
        SET pending_deps = pending_deps - 1,
            status = CASE WHEN pending_deps <> 1 OR status <> %(pending)s THEN status
                          WHEN (SELECT now FROM go) THEN %(running)s ELSE %(queued)s END,
            queued_at = CASE WHEN pending_deps = 1 AND status = %(pending)s
                             THEN statement_timestamp() ELSE queued_at END,
            attempts = CASE WHEN pending_deps = 1 AND status = %(pending)s AND (SELECT now FROM go)
                            THEN attempts + 1 ELSE attempts END,
            started_at = CASE WHEN pending_deps = 1 AND status = %(pending)s
                                   AND (SELECT now FROM go)
                              THEN statement_timestamp() ELSE started_at END,
            error = CASE WHEN pending_deps = 1 AND status = %(pending)s AND (SELECT now FROM go)
                         THEN '' ELSE error END,
            current_attempt_id = CASE WHEN pending_deps = 1 AND status = %(pending)s
                                           AND (SELECT now FROM go)
                                      THEN nextval(pg_get_serial_sequence('runs_attempt', 'id'))
                                      ELSE current_attempt_id END
        WHERE run_id = %(run)s AND name = %(next)s AND parent_id IS NULL
          AND (SELECT steps_remaining FROM r) <> 0
          AND (SELECT status FROM r) = ANY(%(active)s)
        RETURNING *
    ), a AS (
    -- include: attempt_row
        -- Only a row this statement started: running, and started at its timestamp.
        FROM d WHERE d.status = %(running)s AND d.started_at = statement_timestamp()
        RETURNING id
    )
    SELECT d.*, r.*,
           (SELECT coalesce(jsonb_object_agg(x.name, x.result), '{}'::jsonb)
            FROM runs_step x
            WHERE x.run_id = d.run_id AND x.parent_id IS NULL
              AND x.name = ANY(d.depends_on) AND x.id <> %(step)s)
           || jsonb_build_object(%(name)s::text, %(result)s::jsonb),
           (SELECT count(*) FROM done), (SELECT count(*) FROM claim), (SELECT count(*) FROM a),
           r.steps_remaining, r.status, d.id, d.key, d.name, d.pending_deps, d.status
    FROM (SELECT 1) AS one LEFT JOIN r ON true LEFT JOIN d ON true
