-- Concurrency slots and key holds (slots.py). Parameters only; statuses included.

-- name: release_ended
-- The scope's slots whose attempt has ended (committed as of this statement): deleted
-- here, by the next start in the scope, so that ending an attempt writes nothing more.
-- SKIP LOCKED: a slot another start is deleting (or just took) is left to it, so two
-- starts never wait on each other here.
    DELETE FROM runs_slot
    WHERE id IN (
        SELECT s.id FROM runs_slot s JOIN runs_attempt a ON a.id = s.attempt_id
        WHERE s.scope = %(scope)s AND a.status <> %(running)s
        ORDER BY s.n
        FOR UPDATE OF s SKIP LOCKED)

-- name: limit_max
-- A limit's max now: an operator's override (runs_limitsetting, by its unique key), else
-- the declared one (take, in_use, oldest_waiting).
    coalesce((SELECT o.max FROM runs_limitsetting o
              WHERE o.workflow = %(workflow)s AND o.step = %(step_name)s AND o.per = %(per)s),
             %(max)s)

-- name: rate_interval
-- A rate's seconds between two starts now: an operator's override (runs_ratesetting, by
-- its unique key), else the declared one (reserve, put_off).
    coalesce((SELECT o.every_seconds / o.starts FROM runs_ratesetting o
              WHERE o.workflow = %(workflow)s AND o.step = %(step_name)s AND o.per = %(per)s),
             %(interval)s)

-- name: take
-- The lowest slot number below the limit (an operator's override of its max, if one:
-- runs_limitsetting, by its unique key) that no row holds, inserted for this attempt,
-- unless an older step waits for this scope (oldest first: a freed slot is handed to
-- it, slots.hand_over), one a pause holds excepted. Returns whether a number looked free and the one taken: a
-- number another start inserted meanwhile conflicts on slot_scope_n_unique and is not
-- taken (DO NOTHING, after waiting for that start's commit), and the caller asks again
-- in a new snapshot. The unique index, not this statement's reading, holds the limit.
    WITH free AS (
        SELECT g AS n
        FROM generate_series(0, (
            -- include: limit_max
        ) - 1) g
        WHERE NOT EXISTS (SELECT 1 FROM runs_slot s WHERE s.scope = %(scope)s AND s.n = g)
          AND NOT EXISTS (
              SELECT 1 FROM runs_step w
              WHERE w.waiting_for = %(scope)s AND w.status = ANY(%(waiting)s::text[])
                AND w.id <> %(step)s AND w.held_at IS NULL
                AND (w.queued_at, w.id) < (%(queued_at)s::timestamptz, %(step)s))
        ORDER BY g
        LIMIT 1
    ), taken AS (
        INSERT INTO runs_slot (scope, n, attempt_id, step_id, taken_at)
        SELECT %(scope)s, n, %(attempt)s, %(step)s, statement_timestamp() FROM free
        ON CONFLICT ON CONSTRAINT slot_scope_n_unique DO NOTHING
        RETURNING n
    )
    SELECT (SELECT count(*) FROM free), (SELECT n FROM taken)

-- name: held
-- The unresolved claims on a hold key (claim_hold_idx).
    SELECT count(*) FROM runs_claim
    WHERE hold_key = %(hold)s AND status = %(unresolved)s

-- name: clear_waiting
-- Started: it waits for nothing, and a rate's turn it held is spent.
    UPDATE runs_step SET waiting_for = '', rate_due_at = NULL
    WHERE id = %(step)s AND (waiting_for <> '' OR rate_due_at IS NOT NULL)

-- name: mark_waiting
-- A start found no slot (or a hold): the step stays as it is (queued or retrying), its
-- message gone; it records what it waits for, once per scope (the event is written
-- only when this changes the row).
    UPDATE runs_step SET waiting_for = %(scope)s
    WHERE id = %(step)s AND status = ANY(%(waiting)s::text[]) AND waiting_for <> %(scope)s
    RETURNING key, run_id

-- name: in_use
-- The scope's slots whose attempt still runs, and the limit's max now (an operator's
-- override, else the declared one).
    SELECT (SELECT count(*) FROM runs_slot s JOIN runs_attempt a ON a.id = s.attempt_id
            WHERE s.scope = %(scope)s AND a.status = %(running)s),
           (
               -- include: limit_max
           )

-- name: oldest_waiting
-- The steps waiting for the scope, oldest first (step_waiting_for_idx), as many as the
-- limit has slots free now (its max, or an operator's override, less the slots of
-- running attempts); not one a pause turned away since (held_at): its resume sends it,
-- and the take's order ignores it. One statement, so that the hand-over after every
-- attempt of a limited step costs one index probe when nobody waits.
    SELECT id FROM runs_step
    WHERE waiting_for = %(scope)s AND status = ANY(%(waiting)s::text[]) AND held_at IS NULL
    ORDER BY queued_at, id
    LIMIT greatest(0,
        (
            -- include: limit_max
        )
        - (SELECT count(*) FROM runs_slot s JOIN runs_attempt a ON a.id = s.attempt_id
           WHERE s.scope = %(scope)s AND a.status = %(running)s))

-- name: oldest_held
-- The steps a key hold kept waiting, oldest first, once no claim holds the key.
    SELECT id FROM runs_step
    WHERE waiting_for = %(scope)s AND status = ANY(%(waiting)s::text[]) AND held_at IS NULL
      AND NOT EXISTS (SELECT 1 FROM runs_claim
                      WHERE hold_key = %(hold)s AND status = %(unresolved)s)
    ORDER BY queued_at, id
    LIMIT %(limit)s

-- name: waiting_scopes
-- One waiting step per scope (its oldest), with what names its definition: the
-- sweeper's pass over every scope someone waits for.
    SELECT DISTINCT ON (s.waiting_for) s.waiting_for, s.id, r.workflow, r.version, s.name,
           r.input
    FROM runs_step s JOIN runs_run r ON r.id = s.run_id
    WHERE s.waiting_for <> '' AND s.status = ANY(%(waiting)s::text[])
    ORDER BY s.waiting_for, s.queued_at, s.id
    LIMIT %(limit)s

-- name: forget_scope
-- A scope no definition declares any more (a new version of the workflow): its steps
-- wait for nothing, and the sweeper's republish of lost messages takes them on.
    UPDATE runs_step SET waiting_for = ''
    WHERE waiting_for = %(scope)s AND status = ANY(%(waiting)s::text[])

-- name: reserve
-- A rate's turn (slots.py): the clock of the scope moves on by one interval from its
-- next start or from now, whichever is later; the turn this start takes is that time
-- less the interval (an operator's override of the rate, runs_ratesetting, if one), and
-- the seconds until it are returned (0: now). In the start's
-- transaction: a start refused for any reason gives its turn back with its rollback.
-- The row lock makes the starts of one scope take turns for this statement only.
    WITH rate AS (
        SELECT (
            -- include: rate_interval
        ) AS interval
    )
    INSERT INTO runs_rateclock (scope, next_at)
    SELECT %(scope)s, statement_timestamp() + make_interval(secs => interval) FROM rate
    ON CONFLICT (scope) DO UPDATE
        SET next_at = greatest(runs_rateclock.next_at, statement_timestamp())
                      + make_interval(secs => (SELECT interval FROM rate))
    RETURNING greatest(0, EXTRACT(EPOCH FROM next_at - statement_timestamp())::float
                          - (SELECT interval FROM rate))

-- name: lock_step
-- The step's row before its rate's clock, in the order a start takes them.
    SELECT 1 FROM runs_step WHERE id = %(step)s FOR UPDATE

-- name: put_off
-- A start over its rate: the step keeps a turn of its own (rate_due_at), reserved on
-- the scope's clock, and its message is due then (message_due_at, which the sweeper
-- counts its republish bound from). Returns the seconds until the turn.
    WITH rate AS (
        SELECT (
            -- include: rate_interval
        ) AS interval
    ), turn AS (
        INSERT INTO runs_rateclock (scope, next_at)
        SELECT %(scope)s, statement_timestamp() + make_interval(secs => interval) FROM rate
        ON CONFLICT (scope) DO UPDATE
            SET next_at = greatest(runs_rateclock.next_at, statement_timestamp())
                          + make_interval(secs => (SELECT interval FROM rate))
        RETURNING next_at - make_interval(secs => (SELECT interval FROM rate)) AS at
    )
    UPDATE runs_step SET rate_due_at = (SELECT at FROM turn),
                         message_due_at = (SELECT at FROM turn)
    WHERE id = %(step)s AND status = ANY(%(waiting)s::text[])
    RETURNING greatest(0, EXTRACT(EPOCH FROM rate_due_at - statement_timestamp())::float)
