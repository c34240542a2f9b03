-- Retention (retention.py). Parameters only; statuses included. Every statement runs on
-- Django's own cursor, which binds parameters on the client: the planner sees the
-- policy's values, so the scope's two conditions on the workflow fold away before
-- planning (`NULL::text IS NULL` is true): a policy for one workflow is planned with
-- `r.workflow = ...` alone, the default policy with the overrides' condition alone.

-- name: scope
-- The runs the policy governs and that are eligible, on alias r: finished past the
-- stage's window (days), counted from finished_at on the database's clock. The
-- workflow is the policy's, or NULL for the default policy, which governs every
-- workflow but the overrides (those with a policy of their own).
      AND r.status = ANY(%(finished)s)
      AND r.finished_at < now() - make_interval(days => %(days)s)
      -- no attempt still running (a cancelled run's step may still be finishing)
      AND NOT EXISTS (SELECT 1 FROM runs_attempt a
                      WHERE a.run_id = r.id AND a.status = %(attempt_running)s)
      -- no claim whose outcome is still open: it belongs to the operators' queue
      AND NOT EXISTS (SELECT 1 FROM runs_claim c
                      WHERE c.run_id = r.id AND c.item_key IS NULL AND c.status = ANY(%(open)s))
      AND (%(workflow)s::text IS NULL OR r.workflow = %(workflow)s)
      AND (%(workflow)s::text IS NOT NULL OR NOT (r.workflow = ANY(%(overrides)s)))


-- name: registry_candidates
-- Stage 1, map registries: a map step of an eligible run whose registry is missing or
-- not yet at its end.
    SELECT s.id, s.run_id FROM runs_run r
    JOIN runs_step s ON s.run_id = r.id AND s.pending_children IS NOT NULL
    LEFT JOIN runs_mapregistry m ON m.step_id = s.id
    WHERE r.payloads_compacted_at IS NULL
    -- include: scope
      AND (m.step_id IS NULL OR m.watermark < m.items)

-- name: registry_take
-- The run row first (docs/architecture.md, "Locks"), skipped if held: a retry that
-- holds it is reopening the run, which then is no candidate any more. Then the step
-- (registry_lock_step).
    -- include: registry_candidates
    ORDER BY r.finished_at, s.id LIMIT 1 FOR UPDATE OF r SKIP LOCKED

-- name: registry_lock_step
    SELECT id FROM runs_step WHERE id = %(step)s FOR UPDATE

-- name: registry_preview
-- The map steps stage 1 would record in registries, and the succeeded item claims it
-- would delete.
    SELECT count(*), coalesce(sum((SELECT count(*) FROM runs_claim c
                                   JOIN runs_step b ON b.id = c.step_id
                                   WHERE b.parent_id = x.id AND c.item_key IS NOT NULL
                                     AND c.status = %(succeeded)s)), 0)
    FROM (
    -- include: registry_candidates
    ) x


-- name: payload_candidates
-- Stage 2, payloads.
    SELECT r.id FROM runs_run r
    WHERE r.payloads_compacted_at IS NULL
    -- include: scope

-- name: payload_take
    -- include: payload_candidates
    -- A map's registry is compacted first (stage 1), so its item claims are few.
      AND NOT EXISTS (SELECT 1 FROM runs_step s LEFT JOIN runs_mapregistry m ON m.step_id = s.id
                      WHERE s.run_id = r.id AND s.pending_children IS NOT NULL
                        AND (m.step_id IS NULL OR m.watermark < m.items))
    ORDER BY r.finished_at LIMIT %(limit)s FOR UPDATE OF r SKIP LOCKED

-- name: payload_runs
-- The digest of a JSON value, computed by PostgreSQL from its text: a compacted value
-- is {"compacted": true, "size": n, "sha256": hex}. The payload statements write that
-- same expression for each column they compact (keep them alike).
    UPDATE runs_run
    SET input = jsonb_build_object(
            'compacted', true, 'size', octet_length(input::text),
            'sha256', encode(sha256(convert_to(input::text, 'UTF8')), 'hex')),
        result = CASE WHEN result IS NULL THEN NULL ELSE jsonb_build_object(
            'compacted', true, 'size', octet_length(result::text),
            'sha256', encode(sha256(convert_to(result::text, 'UTF8')), 'hex')) END,
        payloads_compacted_at = now(),
        retention_started_at = coalesce(retention_started_at, now())
    WHERE id = ANY(%(runs)s) AND payloads_compacted_at IS NULL

-- name: payload_steps
-- The run's rows in the lock order (docs/architecture.md): steps, claims, signals.
-- A batch's items ([{"key", "item"}], copies of the mapped step's result): each item
-- compacted, its key kept, in order (the registry stage, verify_history and the run
-- page read the keys and how many there are).
    UPDATE runs_step
    SET result = CASE WHEN result IS NULL THEN NULL ELSE jsonb_build_object(
            'compacted', true, 'size', octet_length(result::text),
            'sha256', encode(sha256(convert_to(result::text, 'UTF8')), 'hex')) END,
        items = CASE WHEN items IS NULL THEN NULL ELSE (
            SELECT coalesce(jsonb_agg(jsonb_build_object(
                'key', e.value->'key',
                'item', jsonb_build_object(
                    'compacted', true, 'size', octet_length((e.value->'item')::text),
                    'sha256', encode(sha256(convert_to((e.value->'item')::text, 'UTF8')), 'hex'))
            ) ORDER BY e.n), '[]'::jsonb)
            FROM jsonb_array_elements(items) WITH ORDINALITY AS e(value, n)) END
    WHERE run_id = ANY(%(runs)s) AND (result IS NOT NULL OR items IS NOT NULL)

-- name: payload_claims
-- A resolved claim cannot change (runs_claim_resolution_final): it keeps its result
-- and its evidence (only an unresolved claim gets evidence, and a resolution is the
-- only way out of unresolved) until the dedup stage deletes it.
    UPDATE runs_claim
    SET result = CASE WHEN result IS NULL THEN NULL ELSE jsonb_build_object(
            'compacted', true, 'size', octet_length(result::text),
            'sha256', encode(sha256(convert_to(result::text, 'UTF8')), 'hex')) END,
        evidence = CASE WHEN evidence IS NULL THEN NULL ELSE jsonb_build_object(
            'compacted', true, 'size', octet_length(evidence::text),
            'sha256', encode(sha256(convert_to(evidence::text, 'UTF8')), 'hex')) END
    WHERE run_id = ANY(%(runs)s) AND (result IS NOT NULL OR evidence IS NOT NULL)
      AND resolved_at IS NULL

-- name: payload_signals
    UPDATE runs_signal
    SET payload = jsonb_build_object(
            'compacted', true, 'size', octet_length(payload::text),
            'sha256', encode(sha256(convert_to(payload::text, 'UTF8')), 'hex'))
    WHERE run_id = ANY(%(runs)s) AND payload IS NOT NULL

-- name: payload_search_keys
-- A run's search keys are copies of its input's values (runs/workflows/search.py):
-- they go with the input they were taken from.
    DELETE FROM runs_runsearchkey WHERE run_id = ANY(%(runs)s)

-- name: payload_preview
-- Counted as if stage 1 had run: the item claims it deletes are not counted here.
    SELECT count(*), coalesce(sum(1
        + (SELECT count(*) FROM runs_step s WHERE s.run_id = x.id
           AND (s.result IS NOT NULL OR s.items IS NOT NULL))
        + (SELECT count(*) FROM runs_claim c WHERE c.run_id = x.id
           AND (c.result IS NOT NULL OR c.evidence IS NOT NULL)
           AND c.resolved_at IS NULL AND NOT (c.item_key IS NOT NULL AND c.status = %(succeeded)s))
        + (SELECT count(*) FROM runs_signal g WHERE g.run_id = x.id
           AND g.payload IS NOT NULL)), 0),
        coalesce(sum((SELECT count(*) FROM runs_runsearchkey k WHERE k.run_id = x.id)), 0)
    FROM (
    -- include: payload_candidates
    ) x


-- name: event_candidates
-- Stage 3, events.
    SELECT r.id FROM runs_run r
    WHERE r.compacted_at IS NULL
    -- include: scope

-- name: event_take
    -- include: event_candidates
    ORDER BY r.finished_at LIMIT %(limit)s FOR UPDATE OF r SKIP LOCKED

-- name: retention_on
-- The only place that sets it. SET LOCAL ends with the transaction, and an error rolls
-- it back with the batch; it is also switched off right after the deletes
-- (retention_off), so that a purge called inside a caller's transaction (where this
-- batch is a savepoint) leaves no right to delete behind it.
    SET LOCAL durable_runs.retention = 'on'

-- name: retention_off
    SET LOCAL durable_runs.retention = 'off'

-- name: events_remaining
-- How many events each of the runs still has.
    SELECT r, (SELECT count(*) FROM runs_event e WHERE e.run_id = r)
    FROM unnest(%(runs)s::uuid[]) r

-- name: events_of_runs
    SELECT run_id, seq, type, payload FROM runs_event WHERE run_id = ANY(%(runs)s)
    ORDER BY run_id, seq

-- name: delete_events_of_runs
    DELETE FROM runs_event WHERE run_id = ANY(%(runs)s)

-- name: oldest_events
-- A run too big for what is left of the batch's budget: its oldest events, up to it.
    SELECT seq, type, payload FROM runs_event WHERE run_id = %(run)s ORDER BY seq LIMIT %(limit)s

-- name: delete_oldest_events
    DELETE FROM runs_event WHERE run_id = %(run)s AND seq <= %(last)s

-- name: event_preview
    SELECT count(*), coalesce(sum((SELECT count(*) FROM runs_event e WHERE e.run_id = x.id)), 0)
    FROM (
    -- include: event_candidates
    ) x


-- name: dedup_candidates
-- Stage 4: the dedup window ends.
    SELECT r.id FROM runs_run r
    WHERE r.claims_purged_at IS NULL
      AND r.compacted_at IS NOT NULL AND r.payloads_compacted_at IS NOT NULL
    -- include: scope

-- name: dedup_take
    -- include: dedup_candidates
    ORDER BY r.finished_at LIMIT %(limit)s FOR UPDATE OF r SKIP LOCKED

-- name: dedup_preview
    SELECT count(*),
           coalesce(sum((SELECT count(*) FROM runs_claim c WHERE c.run_id = x.id)), 0),
           coalesce(sum((SELECT count(*) FROM runs_submissionkey k WHERE k.run_id = x.id)), 0)
    FROM (
    -- include: dedup_candidates
    ) x
