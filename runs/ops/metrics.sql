-- What /metrics reads from the database at each scrape (runs/ops/metrics.py).

-- name: unresolved_claims
-- How many claims wait for a decision and the age of the oldest (claim_unresolved_idx).
SELECT count(*), coalesce(extract(epoch FROM now() - min(unresolved_at)), 0)
FROM runs_claim
WHERE status = %(unresolved)s

-- name: runs_by_status
SELECT status, count(*) FROM runs_run GROUP BY status

-- name: pauses
-- All pauses, and those the engine's breaker made (actor engine:breaker).
SELECT count(*), count(*) FILTER (WHERE actor = %(breaker)s) FROM runs_pause

-- name: paused_steps
-- Steps waiting (queued or retrying) behind a pause, of runs where they could start
-- otherwise (as queued_steps): the waiting steps by their partial index
-- (step_waiting_idx), each run by primary key, each pause by its unique (workflow,
-- step). Read only when a pause stands. One total, as the alert rules read it
-- (docker/prometheus/alerts.yml subtracts it from the queued steps).
SELECT count(*)
FROM runs_step s JOIN runs_run r ON r.id = s.run_id
WHERE s.status IN (%(queued)s, %(retrying)s)
  AND r.status = ANY(CASE WHEN s.compensates = '' THEN %(active)s::text[]
                          ELSE %(compensating)s::text[] END)
  AND EXISTS (SELECT 1 FROM runs_pause p
              WHERE p.workflow = r.workflow AND p.step IN ('', s.name))

-- name: queued_steps
-- Steps queued for a worker and the age of the oldest: workers that stopped taking
-- work. Only steps that can start: of a run where they may (a compensation's run
-- compensating, any other step's active); a cancelled or failed run's leftovers wait
-- for nothing. The status list repeats step_waiting_idx's condition so that the partial
-- index serves it, each run then by primary key. queued_at is when the step became
-- ready (the sweeper's republish leaves it): the age is the real wait. The count
-- includes steps held by a pause (the alert subtracts durable_runs_paused_steps); the
-- age does not: a step a person holds back is not waiting for a worker, and a pause
-- of an hour would otherwise read as workers that stopped taking work.
SELECT count(*), coalesce(extract(epoch FROM now() - min(s.queued_at) FILTER (
           WHERE NOT EXISTS (SELECT 1 FROM runs_pause p
                             WHERE p.workflow = r.workflow AND p.step IN ('', s.name)))), 0)
FROM runs_step s JOIN runs_run r ON r.id = s.run_id
WHERE s.status IN (%(queued)s, %(retrying)s) AND s.status = %(queued)s
  AND r.status = ANY(CASE WHEN s.compensates = '' THEN %(active)s::text[]
                          ELSE %(compensating)s::text[] END)

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
