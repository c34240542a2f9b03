-- Pausing and resuming (pauses.py). Parameters only; statuses included.

-- name: insert_pause
-- The unique (workflow, step) refuses a second pause of the same thing: nothing is
-- returned then, and the caller reads the standing pause to say whose it is.
    INSERT INTO runs_pause (workflow, step, actor, reason, created_at)
    VALUES (%(workflow)s, %(step)s, %(actor)s, %(reason)s, statement_timestamp())
    ON CONFLICT ON CONSTRAINT pause_workflow_step_unique DO NOTHING
    RETURNING id, created_at

-- name: lock_pauses
-- The pauses of the resumed pause's workflow, locked in id order (so two of them cannot
-- deadlock): two resumes of one workflow (its whole pause and a step's, say) take
-- turns, and the second reads the waiting steps (waiting_behind, a statement of its
-- own, after this lock) with the first's delete committed: what both held is sent by
-- the second. A pause deleted by the resume we waited for is not returned.
    SELECT id FROM runs_pause
    WHERE workflow = (SELECT workflow FROM runs_pause WHERE id = %(pause)s)
    ORDER BY id
    FOR UPDATE

-- name: delete_pause
    DELETE FROM runs_pause WHERE id = %(pause)s RETURNING workflow, step

-- name: waiting_behind
-- The steps a resume republishes: queued, or retrying, of a run where they may start
-- (a compensation's run compensating, any other step's active), of the resumed
-- workflow (and step name), whose delivery a pause turned away (held_at: a step whose
-- message is still queued gets it after the resume, and a second one would double the
-- backlog), and not held by a pause still standing. The partial index on waiting steps
-- (step_waiting_idx) then each run by primary key. Oldest first.
    SELECT s.id
    FROM runs_step s JOIN runs_run r ON r.id = s.run_id
    WHERE s.status = ANY(%(waiting)s::text[])
      AND s.held_at IS NOT NULL
      AND r.workflow = %(workflow)s
      AND (%(step)s = '' OR s.name = %(step)s)
      AND r.status = ANY(CASE WHEN s.compensates = '' THEN %(active)s::text[]
                              ELSE %(compensating)s::text[] END)
      AND NOT EXISTS (SELECT 1 FROM runs_pause p
                      WHERE p.workflow = r.workflow AND p.step IN ('', s.name))
    ORDER BY s.queued_at NULLS FIRST, s.id
    LIMIT %(limit)s

-- name: holding
-- The pause that holds a step now, if one (the whole workflow's first).
    SELECT p.id, p.step, p.actor, p.reason
    FROM runs_step s JOIN runs_run r ON r.id = s.run_id
    JOIN runs_pause p ON p.workflow = r.workflow AND p.step IN ('', s.name)
    WHERE s.id = %(step_id)s
    ORDER BY p.step
    LIMIT 1

-- name: mark_held
-- A pause turned this step's delivery away: its message is off the broker, the resume
-- sends another (waiting_behind). The step's row alone, by primary key; nothing else is
-- locked in its transaction.
    UPDATE runs_step SET held_at = statement_timestamp()
    WHERE id = %(step_id)s AND status = ANY(%(waiting)s::text[]) AND held_at IS NULL

-- name: mark_due
-- When each republished step's message is due: its countdown from now, on the
-- database's clock. The sweeper counts its bound from then (recover.republish_stale), so
-- it does not send again a message still on its way; queued_at stays as it was (since
-- when the step waits). The steps are locked in id order (docs/architecture.md#locks)
-- by the subquery, before any is written; one a start took meanwhile is left out.
    UPDATE runs_step s
    SET message_due_at = statement_timestamp() + make_interval(secs => d.delay),
        held_at = NULL
    FROM (SELECT id FROM runs_step
          WHERE id = ANY(%(ids)s::bigint[]) AND status = ANY(%(waiting)s::text[])
          ORDER BY id
          FOR UPDATE) AS w
    JOIN unnest(%(ids)s::bigint[], %(delays)s::float8[]) AS d(id, delay) ON d.id = w.id
    WHERE s.id = w.id
