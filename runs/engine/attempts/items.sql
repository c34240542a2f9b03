-- A map batch's items (items.py). Parameters only; statuses included.

-- name: fence_held
-- The item's fence when the lease is fresh: a share lock on the attempt row (no new row
-- version, no index or constraint work), held to the commit like the UPDATE's lock, so
-- recovery's UPDATE of the attempt waits for the item or the item sees it crashed.
    WITH held AS (
        SELECT 1 FROM runs_attempt
        WHERE id = %(attempt)s AND status = %(running)s
          AND lease_expires_at > statement_timestamp()
        FOR SHARE
    ), outcome AS (
        UPDATE runs_claim SET result = %(result)s
        WHERE id = %(claim)s AND EXISTS (SELECT 1 FROM held)
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM held), (SELECT count(*) FROM outcome)

-- name: fence_renewing
-- ... and once a quarter of the lease is spent (by this worker's clock), the fence
-- renews it, never past the attempt's bound (its timeout and grace).
    WITH held AS (
        UPDATE runs_attempt
        SET lease_expires_at = LEAST(statement_timestamp() + make_interval(secs => %(lease)s),
                                     started_at + make_interval(secs => %(until)s))
        WHERE id = %(attempt)s AND status = %(running)s
          AND lease_expires_at > statement_timestamp()
        RETURNING 1
    ), outcome AS (
        UPDATE runs_claim SET result = %(result)s
        WHERE id = %(claim)s AND EXISTS (SELECT 1 FROM held)
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM held), (SELECT count(*) FROM outcome)

-- name: fence_at_insert
-- A caller's transaction encloses the item: the commit-time fence (a deferred
-- constraint trigger, runs/sql/schema.sql) checks at the claim's insert instead.
    SET CONSTRAINTS runs_claim_item_fence IMMEDIATE
