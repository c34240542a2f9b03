-- What a step's success makes ready (ready.py). Parameters only; statuses included.

-- name: dependents_ctes
-- The run's counter of remaining steps goes down (only if `done` has a row: the step's
-- own transition happened) and, while the run is active with steps left, so do its
-- dependents' pending-dependency counters; a plain dependent whose last dependency
-- this was is queued in the same UPDATE. Once the run compensates (ends_as is set then,
-- and kept after it ends), steps_remaining counts its compensations, and a step of the
-- plan that succeeds late (a resolution after the cancel) does not touch it.
    r AS (
        UPDATE runs_run SET steps_remaining = steps_remaining - 1
        WHERE id = %(run)s AND status <> %(compensating)s AND ends_as = ''
          AND EXISTS (SELECT 1 FROM done)
        RETURNING steps_remaining, status
    ), d AS (
        UPDATE runs_step
        SET pending_deps = pending_deps - 1,
            status = CASE WHEN pending_deps = 1 AND status = %(pending)s
                          AND name = ANY(%(plain)s) THEN %(queued)s ELSE status END,
            queued_at = CASE WHEN pending_deps = 1 AND status = %(pending)s
                             AND name = ANY(%(plain)s) THEN statement_timestamp()
                             ELSE queued_at END
        WHERE run_id = %(run)s AND name = ANY(%(names)s) AND parent_id IS NULL
          AND (SELECT steps_remaining FROM r) <> 0
          AND (SELECT status FROM r) = ANY(%(active)s)
        RETURNING id, key, name, pending_deps, status
    )

-- name: dependents
-- After a success recorded by other statements (a resolution, a wait, a skip).
    WITH done AS (SELECT 1),
    -- include: dependents_ctes
    SELECT r.steps_remaining, r.status, d.id, d.key, d.name, d.pending_deps, d.status
    FROM r LEFT JOIN d ON true

-- name: batch_done
-- A batch succeeded: its map parent's count of batches to go, with the run row locked
-- first (the run before its other steps: docs/architecture.md, "Locks"; the InitPlan runs
-- before the parent's row is locked). NO KEY UPDATE is the lock the event log's seq
-- takes anyway.
    WITH run AS (SELECT 1 FROM runs_run WHERE id = %(run)s FOR NO KEY UPDATE)
    UPDATE runs_step SET pending_children = pending_children - 1
    WHERE id = %(parent)s AND EXISTS (SELECT 1 FROM run)
    RETURNING pending_children
