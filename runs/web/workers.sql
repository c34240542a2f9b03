-- The workers page's read that the ORM does not say in one statement (runs/web/workers.py).

-- name: waiting
-- Queued steps that can start: of a run where they may (a compensation's run
-- compensating, any other step's active), so a cancelled or failed run's leftovers are
-- not waiting for a worker. By the engine's rules none has a running attempt (only a
-- running step owns one, step_owned_only_while_running). The status list repeats
-- step_waiting_idx's condition so that the partial index serves the count and the
-- minimum, each run then by primary key. queued_at is when the step became ready (the
-- sweeper's republish leaves it), so the minimum is the real oldest wait. A step held
-- by a pause waits for a person, not a worker: counted apart, and not in the minimum;
-- so does one waiting for a slot of its concurrency limit or a key hold (waiting_for).
-- OFFSET 0 keeps the lateral a subquery: pulled up, its EXISTS became one subplan per
-- aggregate that reads `held`, three lookups of runs_pause per step instead of one.
SELECT statement_timestamp(), count(*) FILTER (WHERE NOT p.held AND s.waiting_for = ''),
       min(s.queued_at) FILTER (WHERE NOT p.held AND s.waiting_for = ''),
       count(*) FILTER (WHERE p.held),
       count(*) FILTER (WHERE NOT p.held AND s.waiting_for <> '')
FROM runs_step s JOIN runs_run r ON r.id = s.run_id
CROSS JOIN LATERAL (SELECT EXISTS (SELECT 1 FROM runs_pause
                                   WHERE workflow = r.workflow AND step IN ('', s.name))
                    AS held OFFSET 0) p
WHERE s.status IN (%(queued)s, %(retrying)s) AND s.status = %(queued)s
  AND r.status = ANY(CASE WHEN s.compensates = '' THEN %(active)s::text[]
                          ELSE %(compensating)s::text[] END)

-- name: limits
-- Each concurrency limit's scope with a slot in use (its attempt running), a step
-- waiting for it, or, for a key hold, an unresolved claim on its key
-- (docs/authoring.md#limits-and-holds). A slot's row outlives its attempt until the
-- next start in its scope deletes it: only running attempts' count. Three partial or
-- small reads: the slots table, step_waiting_for_idx, claim_hold_idx.
SELECT scope, sum(in_use)::int, sum(waiting)::int
FROM (
    SELECT s.scope, 1 AS in_use, 0 AS waiting
    FROM runs_slot s JOIN runs_attempt a ON a.id = s.attempt_id
    WHERE a.status = %(running)s
    UNION ALL
    SELECT waiting_for, 0, 1 FROM runs_step
    WHERE waiting_for <> '' AND status IN (%(queued)s, %(retrying)s)
    UNION ALL
    SELECT 'hold ' || hold_key, 1, 0 FROM runs_claim
    WHERE status = %(unresolved)s AND hold_key <> ''
) used
GROUP BY scope
ORDER BY sum(waiting) DESC, sum(in_use) DESC, scope
LIMIT 200
