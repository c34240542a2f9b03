-- The decision reports' reads (runs/web/decisions.py, docs/operating.md#reports), from the
-- event log only: a claim's `claim_unresolved` event says when its outcome became
-- unknown, its `claim_resolved` event when, how and by whom it was decided (the actor
-- "probe" is the step's probe, any other a person). Each statement starts from
-- event_claim_decision_idx: the type list repeats its condition, so that the partial
-- index serves the range on created_at.

-- name: levels
-- How many claims each workflow's runs had unresolved: one count per bucket, +1 per
-- claim that became unresolved in it, -1 per claim decided in it; bucket 0 is
-- everything before the period (the level at its start), and the page adds them up.
-- Only the index and runs_run's primary key are read (type and run_id are included).
SELECT r.workflow, width_bucket(e.created_at, %(edges)s::timestamptz[]) AS bucket,
       sum(CASE WHEN e.type = %(unresolved)s THEN 1 ELSE -1 END)::int AS delta
FROM runs_event e JOIN runs_run r ON r.id = e.run_id
WHERE e.type IN (%(unresolved)s, %(resolved)s) AND e.created_at < %(until)s
GROUP BY 1, 2
ORDER BY 1, 2

-- name: decided
-- The claims decided in [since, until): workflow, step name, outcome, who decided, when,
-- and when the claim became unresolved (the latest claim_unresolved of the same run and
-- key before the decision, by event_run_type_idx). Included by the statements below.
WITH decided AS (
    SELECT r.workflow, coalesce(s.name, '') AS step, e.payload->>'outcome' AS outcome,
           e.payload->>'actor' AS actor, e.created_at AS decided_at,
           u.created_at AS unresolved_at
    FROM runs_event e
    JOIN runs_run r ON r.id = e.run_id
    LEFT JOIN runs_step s ON s.id = e.step_id
    LEFT JOIN LATERAL (
        SELECT u.created_at FROM runs_event u
        WHERE u.run_id = e.run_id AND u.type = %(unresolved)s AND u.seq < e.seq
          AND u.payload->>'key' = e.payload->>'key'
        ORDER BY u.seq DESC
        LIMIT 1
    ) u ON true
    WHERE e.type IN (%(unresolved)s, %(resolved)s) AND e.type = %(resolved)s
      AND e.created_at >= %(since)s AND e.created_at < %(until)s
)

-- name: time_to_decide
-- Per workflow and week of the decision (weeks start on Monday, in the pages' time
-- zone): decisions, and the median and 95th percentile of the time from unresolved to
-- decided, in seconds (percentile_cont: interpolated between the two nearest).
-- include: decided
SELECT workflow, date_trunc('week', decided_at AT TIME ZONE %(tz)s)::date AS week,
       count(*)::int,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM decided_at - unresolved_at)),
       percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM decided_at - unresolved_at))
FROM decided
WHERE unresolved_at IS NOT NULL
GROUP BY 1, 2
ORDER BY 1, 2

-- name: deciders
-- Per workflow: claims settled by its probe, and by a person.
-- include: decided
SELECT workflow, count(*) FILTER (WHERE actor = %(probe)s)::int,
       count(*) FILTER (WHERE actor IS DISTINCT FROM %(probe)s)::int
FROM decided
GROUP BY 1
ORDER BY 1

-- name: outcomes
-- Per workflow and step: claims decided as succeeded (the effect happened) and failed.
-- include: decided
SELECT workflow, step, count(*) FILTER (WHERE outcome = %(succeeded)s)::int,
       count(*) FILTER (WHERE outcome = %(failed)s)::int
FROM decided
GROUP BY 1, 2
ORDER BY 1, 2

-- name: operators
-- Per person who decided (the probe is not an operator: see deciders), the most first.
-- include: decided
SELECT actor, count(*) FILTER (WHERE outcome = %(succeeded)s)::int,
       count(*) FILTER (WHERE outcome = %(failed)s)::int
FROM decided
WHERE actor IS DISTINCT FROM %(probe)s
GROUP BY 1
ORDER BY count(*) DESC, 1
