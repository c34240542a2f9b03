-- Unresolved claims (unresolved.py).

-- name: seconds_until_probe
-- How long until each claim's probe is due, on the database's clock.
    SELECT id, GREATEST(0, EXTRACT(EPOCH FROM probe_after - now()))::float
    FROM runs_claim WHERE id = ANY(%(claims)s) AND probe_after IS NOT NULL
