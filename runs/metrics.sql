-- What /metrics reads from the database at each scrape (runs/metrics.py).

-- name: unresolved_claims
-- How many claims wait for a decision and the age of the oldest (claim_unresolved_idx).
SELECT count(*), coalesce(extract(epoch FROM now() - min(unresolved_at)), 0)
FROM runs_claim
WHERE status = %(unresolved)s

-- name: runs_by_status
SELECT status, count(*) FROM runs_run GROUP BY status

-- name: queued_steps
-- Steps queued for a worker and the age of the oldest (step_waiting_idx): workers that
-- stopped taking work.
SELECT count(*), coalesce(extract(epoch FROM now() - min(queued_at)), 0)
FROM runs_step
WHERE status = %(queued)s

-- name: retention_last_purge
-- Each enabled policy's last completed purge (a dry run is a preview, not a purge); a
-- policy never purged counts from its creation, so a beat that never ran is seen too.
SELECT p.name, extract(epoch FROM now() - coalesce(
    (SELECT max(u.finished_at) FROM runs_retentionpurge u
     WHERE u.policy_id = p.id AND NOT u.dry_run),
    p.created_at))
FROM runs_retentionpolicy p
WHERE p.enabled

-- name: webhook_pending
-- The webhook outbox's rows still to deliver (webhook_pending_idx).
SELECT count(*), coalesce(extract(epoch FROM now() - min(created_at)), 0)
FROM reconciliation_webhookdelivery
WHERE status = %(pending)s
