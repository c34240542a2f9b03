-- What /metrics reads from the database at each scrape (runs/metrics.py).

-- name: unresolved_claims
-- How many claims wait for a decision and the age of the oldest (claim_unresolved_idx).
SELECT count(*), coalesce(extract(epoch FROM now() - min(unresolved_at)), 0)
FROM runs_claim
WHERE status = %(unresolved)s

-- name: runs_by_status
SELECT status, count(*) FROM runs_run GROUP BY status
