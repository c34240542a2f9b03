-- The pages' reads that the ORM does not say in one statement (runs/web/queries.py).

-- name: counts_by_status
-- Each status counted up to %(cap)s index entries (run_status_newest_idx), not a
-- GROUP BY over every run.
SELECT s.status, (
    SELECT count(*) FROM (
        SELECT 1 FROM runs_run r WHERE r.status = s.status LIMIT %(cap)s
    ) AS capped
)
FROM unnest(%(statuses)s::text[]) AS s(status)

-- name: this_minute
SELECT date_trunc('minute', now())

-- name: succeeded_per_minute
-- From the partial index on succeeded steps' finished_at.
SELECT date_trunc('minute', finished_at), count(*)
FROM runs_step
WHERE status = %(succeeded)s AND finished_at >= %(since)s
GROUP BY 1
