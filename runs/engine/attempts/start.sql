-- Starting an attempt (start.py). Parameters only; statuses included.

-- name: start
-- One statement: queued (or retrying and due) -> running, the attempt inserted and made
-- current, and what the attempt needs returned: the step's row, its run's row, the
-- results of its dependencies (a batch's are its map parent's), whether the attempt
-- was inserted, and a batch's parent's plan revision.
--
-- The UPDATE is on one table with one WHERE on the row being updated; the run's status
-- is read by primary key in a scalar subquery (a compensation step's run must be
-- compensating, any other step's active: as an EXISTS the planner may turn it into a
-- join that scans every active run, bench/scale.py showed). A second delivery blocked
-- on this row re-checks the status of the row's newest version (READ COMMITTED
-- re-evaluation), so it can never reopen a step that started and finished meanwhile.
-- The run's status is read FOR KEY SHARE: at its newest version, after waiting for a
-- transition that locks the run FOR UPDATE (a cancel) to commit, and held until the
-- start commits, so such a transition waits for a start in flight instead of committing
-- under it. The attempt's id comes from its sequence in the UPDATE itself (the foreign
-- key is checked at commit). A retry is due by statement_timestamp(), the clock that
-- set its next_attempt_at. A pause is read in the statement's snapshot: a pause that
-- commits after the statement began does not stop it (that start came first), and
-- every start that begins after the pause committed is refused. span_id: the attempt's
-- span (runs/ops/tracing.py), NULL while tracing is off.
    WITH s AS (
        UPDATE runs_step
        SET status = %(running)s, attempts = attempts + 1, started_at = statement_timestamp(),
            next_attempt_at = NULL, error = '',
            current_attempt_id = nextval(pg_get_serial_sequence('runs_attempt', 'id'))
        WHERE id = %(step_id)s
          AND (status = %(queued)s
               OR (status = %(retrying)s AND next_attempt_at <= statement_timestamp()))
          AND (SELECT runs_run.status FROM runs_run WHERE runs_run.id = runs_step.run_id
               FOR KEY SHARE)
              = ANY(CASE WHEN compensates = '' THEN %(active)s::text[]
                         ELSE %(compensating)s::text[] END)
          -- Not past the run's deadline (policies/deadlines.py), read by primary key; a
          -- compensation still starts: a deadline must not block its own undoing.
          AND (compensates <> ''
               OR NOT coalesce((SELECT runs_run.deadline_at <= statement_timestamp()
                                FROM runs_run WHERE runs_run.id = runs_step.run_id), false))
          -- Not paused (policies/pauses.py): no pause of the run's workflow, whole ('')
          -- or of this step's definition name (a batch's name is its map step's). Probed
          -- by pause_workflow_step_unique; the run's workflow is read by primary key.
          AND NOT EXISTS (
              SELECT 1 FROM runs_pause p
              WHERE p.workflow = (SELECT runs_run.workflow FROM runs_run
                                  WHERE runs_run.id = runs_step.run_id)
                AND p.step IN ('', runs_step.name))
        RETURNING *
    ), a AS (
    -- include: attempt_row
        FROM s
        RETURNING id
    )
    SELECT s.*, r.*,
           (SELECT coalesce(jsonb_object_agg(d.name, d.result), '{}'::jsonb)
            FROM runs_step d
            WHERE d.run_id = s.run_id AND d.parent_id IS NULL
              AND d.name = ANY(CASE WHEN s.parent_id IS NULL THEN s.depends_on ELSE
                  (SELECT p.depends_on FROM runs_step p WHERE p.id = s.parent_id) END)),
           (SELECT count(*) FROM a),
           (SELECT p.plan_revision FROM runs_step p WHERE p.id = s.parent_id)
    FROM s JOIN runs_run r ON r.id = s.run_id

-- name: attempt_row
-- The attempt a start inserts, from the row of the step it moved to running (its
-- current_attempt_id and attempts set by that UPDATE), followed by `FROM <that row>`:
-- this statement's and finish.sql's succeed_and_start (StartParams gives both the
-- same parameters).
        INSERT INTO runs_attempt (id, step_id, run_id, number, status, worker, started_at,
                                  lease_expires_at, error, span_id)
        SELECT current_attempt_id, id, run_id, attempts, %(running_attempt)s, %(worker)s,
               statement_timestamp(),
               statement_timestamp() + make_interval(secs => %(lease)s), '', %(span_id)s

-- name: early_by
-- How early a retry's message came: the delay that remains on the database's clock.
    SELECT EXTRACT(EPOCH FROM next_attempt_at - statement_timestamp())::float
    FROM runs_step WHERE id = %(step)s AND status = %(retrying)s
      AND next_attempt_at > statement_timestamp()
