-- The queue's reads that the ORM does not say in one statement (reconciliation/queries.py).

-- name: queue_summary
-- Size, oldest age and stale count in one pass over claim_unresolved_idx.
SELECT count(*), now() - min(unresolved_at),
       count(*) FILTER (WHERE unresolved_at < now() - make_interval(secs => %(stale_seconds)s))
FROM runs_claim
WHERE status = %(unresolved)s
