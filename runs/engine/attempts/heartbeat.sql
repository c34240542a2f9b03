-- The heartbeat's own connection (heartbeat.py). Parameters only; statuses included.

-- name: renew
-- Extend a live lease; no row if it was lost (expired on the database's clock, or the
-- attempt no longer runs).
    UPDATE runs_attempt
    -- Never past the attempt's bound (its timeout and grace; NULL: none): LEAST skips a NULL.
    SET lease_expires_at = LEAST(statement_timestamp() + make_interval(secs => %(lease)s),
                                 started_at + make_interval(secs => %(until)s))
    WHERE id = %(attempt)s AND status = %(running)s AND lease_expires_at > statement_timestamp()
