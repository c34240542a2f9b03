-- Probing unresolved claims (probe.py). Parameters only; statuses included.

-- name: take
-- The compare-and-set that lets one probe ask: the claim is unresolved, due, and free
-- (take_for_worker, take_for_operator). It takes the claim under a lease, all on the
-- database's clock, and returns probed_at: the probe's token, with which its answer
-- clears the lease only if no later probe has taken the claim over meanwhile. The
-- worker's probe counts its try, an operator's does not (counted).
    UPDATE runs_claim
    SET probed_at = statement_timestamp(),
        probe_lease_expires_at = statement_timestamp() + make_interval(secs => %(lease)s),
        probe_tries = probe_tries + %(counted)s
    WHERE id = %(claim)s AND status = %(unresolved)s
      AND (probe_after IS NULL OR probe_after <= statement_timestamp())

-- name: take_for_worker
-- Free for the worker's probe: never probed, or the previous probe's lease has passed,
-- and tries are left.
    -- include: take
      AND (probed_at IS NULL OR probe_lease_expires_at < statement_timestamp())
      AND probe_tries < %(max_tries)s
    RETURNING probed_at

-- name: take_for_operator
-- Free for an operator's probe: no probe holds it.
    -- include: take
      AND (probe_lease_expires_at IS NULL OR probe_lease_expires_at < statement_timestamp())
    RETURNING probed_at

-- name: lease_left
-- Seconds until the probe lease passes, on the database's clock (negative once past).
    SELECT EXTRACT(EPOCH FROM probe_lease_expires_at - statement_timestamp())::float
    FROM runs_claim WHERE id = %(claim)s
