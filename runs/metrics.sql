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
-- Steps waiting (queued or retrying) behind a pause, by workflow: the waiting steps by
-- their partial index (step_waiting_idx), each run by primary key, each pause by its
-- unique (workflow, step). Read only when a pause stands.
SELECT r.workflow, count(*)
FROM runs_step s JOIN runs_run r ON r.id = s.run_id
WHERE s.status IN (%(queued)s, %(retrying)s)
  AND EXISTS (SELECT 1 FROM runs_pause p
              WHERE p.workflow = r.workflow AND p.step IN ('', s.name))
GROUP BY r.workflow
