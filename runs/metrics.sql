-- What /metrics reads from the database at each scrape (runs/metrics.py).

-- name: unresolved_claims
-- How many claims wait for a decision and the age of the oldest (claim_unresolved_idx).
SELECT count(*), coalesce(extract(epoch FROM now() - min(unresolved_at)), 0)
FROM runs_claim
WHERE status = %(unresolved)s

-- name: runs_by_status
SELECT status, count(*) FROM runs_run GROUP BY status

-- name: pauses
SELECT count(*) FROM runs_pause

-- name: paused_steps
-- Steps waiting (queued or retrying) behind a pause: the waiting steps by their partial
-- index (step_waiting_idx), each run by primary key, each pause by its unique
-- (workflow, step). Read only when a pause stands. One total, as the alert rules read it
-- (docker/prometheus/alerts.yml subtracts it from the queued steps).
SELECT count(*)
FROM runs_step s JOIN runs_run r ON r.id = s.run_id
WHERE s.status IN (%(queued)s, %(retrying)s)
  AND EXISTS (SELECT 1 FROM runs_pause p
              WHERE p.workflow = r.workflow AND p.step IN ('', s.name))

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
