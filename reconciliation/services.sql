-- The queue's own write (reconciliation/services.py, take_claim).

-- name: take_claim
-- One statement decides: a new take is inserted; an existing one is overwritten only if
-- it expired or is the same user's (a renewal: taken_at stays, expires_at moves on).
-- The claim row is read FOR SHARE, so a take and a resolution of the same claim
-- serialize: a take waiting behind a resolution re-reads the claim's status (READ
-- COMMITTED re-check) and inserts nothing, and a resolution that comes second deletes
-- the take in its own transaction.
-- Times are statement_timestamp(), like Django's Now() on PostgreSQL (the queue's
-- "is this take live?"), so a retry within one transaction sees the clock move.
INSERT INTO reconciliation_claimtake AS t (claim_id, taken_by_id, taken_at, expires_at)
SELECT c.id, %(user)s, statement_timestamp(),
       statement_timestamp() + make_interval(secs => %(seconds)s)
FROM runs_claim AS c
WHERE c.id = %(claim)s AND c.status = %(unresolved)s
FOR SHARE OF c
ON CONFLICT (claim_id) DO UPDATE SET
    taken_by_id = EXCLUDED.taken_by_id,
    taken_at = CASE WHEN t.taken_by_id = EXCLUDED.taken_by_id
                         AND t.expires_at > statement_timestamp()
                    THEN t.taken_at ELSE EXCLUDED.taken_at END,
    expires_at = EXCLUDED.expires_at
WHERE t.expires_at <= statement_timestamp() OR t.taken_by_id = EXCLUDED.taken_by_id
RETURNING t.taken_at, t.expires_at
