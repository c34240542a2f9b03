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
-- The changes are added up per run first, from the index alone (type and run_id are
-- included); each run's workflow is then looked up by primary key (a subquery: joined,
-- the planner read all of runs_run to hash it, 40 ms at 100,000 runs, for a few
-- thousand claim events).
SELECT (SELECT r.workflow FROM runs_run r WHERE r.id = c.run_id) AS workflow, c.bucket,
       sum(c.delta)::int
FROM (
    SELECT e.run_id, width_bucket(e.created_at, %(edges)s::timestamptz[]) AS bucket,
           sum(CASE WHEN e.type = %(unresolved)s THEN 1 ELSE -1 END) AS delta
    FROM runs_event e
    WHERE e.type IN (%(unresolved)s, %(resolved)s) AND e.created_at < %(until)s
    GROUP BY 1, 2
) c
GROUP BY 1, 2
ORDER BY 1, 2

-- name: decided
-- The claims decided in [since, until): workflow, step name, outcome, who decided, when,
-- and when the claim became unresolved (the latest claim_unresolved of the same run and
-- key before the decision, by event_run_type_idx). Read once (the CTE is used four
-- times, so PostgreSQL materializes it) for the four reports below.
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

-- name: decisions
-- Four reports in one statement, a row each: (report, name, detail, n1, n2, p50, p95).
--   time:      per workflow (name) and week of the decision (detail: its Monday, in the
--              pages' time zone), decisions (n1) and the median and 95th percentile of
--              the time from unresolved to decided, in seconds (percentile_cont:
--              interpolated between the two nearest);
--   deciders:  per workflow, claims settled by its probe (n1) and by a person (n2);
--   outcomes:  per workflow and step (detail), decided as succeeded (n1: the effect
--              happened) and as failed (n2);
--   operators: per person who decided (the probe is not one), succeeded and failed.
-- include: decided
SELECT 'time' AS report, workflow,
       date_trunc('week', decided_at AT TIME ZONE %(tz)s)::date::text, count(*)::int, NULL::int,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM decided_at - unresolved_at)),
       percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM decided_at - unresolved_at))
FROM decided
WHERE unresolved_at IS NOT NULL
GROUP BY 2, 3
UNION ALL
SELECT 'deciders', workflow, '', count(*) FILTER (WHERE actor = %(probe)s)::int,
       count(*) FILTER (WHERE actor IS DISTINCT FROM %(probe)s)::int, NULL, NULL
FROM decided
GROUP BY 2
UNION ALL
SELECT 'outcomes', workflow, step, count(*) FILTER (WHERE outcome = %(succeeded)s)::int,
       count(*) FILTER (WHERE outcome = %(failed)s)::int, NULL, NULL
FROM decided
GROUP BY 2, 3
UNION ALL
SELECT 'operators', actor, '', count(*) FILTER (WHERE outcome = %(succeeded)s)::int,
       count(*) FILTER (WHERE outcome = %(failed)s)::int, NULL, NULL
FROM decided
WHERE actor IS DISTINCT FROM %(probe)s
GROUP BY 2
ORDER BY 1, 2, 3
