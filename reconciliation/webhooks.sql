-- The webhook outbox (reconciliation/webhooks.py, docs/operating.md#webhook).

-- name: enqueue
-- Claims unresolved for at least `min_age` seconds that have no row of this event yet.
-- The payload is built here, once: what is sent later does not depend on the claim still
-- being there.
INSERT INTO reconciliation_webhookdelivery
    (event, claim_id, payload, status, tries, next_attempt_at, created_at, last_error, history)
SELECT %(event)s, c.id,
       jsonb_build_object(
           'event', %(event)s,
           'claim_id', c.id,
           'run_id', c.run_id,
           'workflow', r.workflow,
           'step', s.name,
           'item_key', c.item_key,
           'key', c.key,
           'kind', c.kind,
           'unresolved_at', c.unresolved_at,
           'url', %(base)s || '/reconciliation/?claim=' || c.id
       ),
       %(pending)s, 0, now(), now(), '', '[]'::jsonb
FROM runs_claim c
JOIN runs_step s ON s.id = c.step_id
JOIN runs_run r ON r.id = c.run_id
WHERE c.status = %(unresolved)s
  AND c.unresolved_at <= now() - make_interval(secs => %(min_age)s)
ORDER BY c.unresolved_at, c.id
ON CONFLICT (claim_id, event) DO NOTHING

-- name: take_due
SELECT id, event, payload, tries FROM reconciliation_webhookdelivery
WHERE status = %(pending)s AND next_attempt_at <= now()
ORDER BY next_attempt_at, id
LIMIT 1
FOR UPDATE SKIP LOCKED

-- name: mark_delivered
-- Conditional on the row still pending (it is locked, but the count is checked anyway).
UPDATE reconciliation_webhookdelivery
SET status = %(delivered)s, tries = tries + 1, delivered_at = now(), last_error = '',
    history = history || jsonb_build_array(jsonb_build_object(
        'try', tries + 1, 'at', now(), 'outcome', 'delivered', 'status_code', %(code)s,
        'error', '', 'next_attempt_at', NULL))
WHERE id = %(id)s AND status = %(pending)s

-- name: mark_failed
-- delay NULL: the last try failed, the row is kept as failed (make_interval of NULL is NULL).
UPDATE reconciliation_webhookdelivery
SET status = %(status)s, tries = tries + 1, last_error = %(error)s,
    next_attempt_at = coalesce(now() + make_interval(secs => %(delay)s), next_attempt_at),
    history = history || jsonb_build_array(jsonb_build_object(
        'try', tries + 1, 'at', now(), 'outcome', %(outcome)s, 'status_code', %(code)s,
        'error', %(error)s, 'next_attempt_at', now() + make_interval(secs => %(delay)s)))
WHERE id = %(id)s AND status = %(pending)s

-- name: resend
UPDATE reconciliation_webhookdelivery
SET status = %(pending)s, tries = 0, next_attempt_at = now(), last_error = '',
    history = history || jsonb_build_array(jsonb_build_object(
        'try', NULL, 'at', now(), 'outcome', 'resent', 'status_code', NULL,
        'error', '', 'next_attempt_at', now()))
WHERE id = ANY(%(ids)s) AND status = %(failed)s
RETURNING id

-- name: enqueue_breaker
-- The pauses the engine's breaker made (runs_pausechange rows with its counts, by their
-- partial index pausechange_breaker_idx) that have no row of this event yet: one per
-- pause (UNIQUE(pause_id, event)), announced even if resumed before the scan. The
-- payload is built here, once, from the audit row, which outlives the pause.
INSERT INTO reconciliation_webhookdelivery
    (event, claim_id, pause_id, payload, status, tries, next_attempt_at, created_at,
     last_error, history)
SELECT %(event)s, NULL, c.pause_id,
       jsonb_build_object(
           'event', %(event)s,
           'pause_id', c.pause_id,
           'workflow', c.workflow,
           'step', c.step,
           'outcomes', c.breaker -> 'outcomes',
           'threshold', c.breaker -> 'threshold',
           'within_seconds', c.breaker -> 'within_seconds',
           'actor', c.actor,
           'reason', c.reason,
           'paused_at', c.at,
           'url', %(base)s || '/pauses/'
       ),
       %(pending)s, 0, now(), now(), '', '[]'::jsonb
FROM runs_pausechange c
WHERE c.breaker IS NOT NULL
  AND c.pause_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM reconciliation_webhookdelivery w
                  WHERE w.pause_id = c.pause_id AND w.event = %(event)s)
ORDER BY c.id
ON CONFLICT (pause_id, event) DO NOTHING
