-- The breaker (breaker.py, docs/operating.md#breakers). Parameters only; statuses included.

-- name: count_outcomes
-- The attempts of one step name of one workflow (every run, every version; a map step's
-- batches share its name) that ended failed, crashed or unresolved within the window,
-- and after that step's last resume, so a resume starts the count again (the pauses'
-- audit, pausechange_resume_idx). The attempts by the partial index of such endings
-- (attempt_bad_outcome_idx, by finished_at: the window's rows only, of every workflow),
-- each step and run by primary key. Read after the outcome committed, in its own
-- statement: of two outcomes committing at once, the later reader sees both.
SELECT count(*)
FROM runs_attempt a
JOIN runs_step s ON s.id = a.step_id
JOIN runs_run r ON r.id = a.run_id
WHERE a.status = ANY(%(ended)s::text[])
  AND a.finished_at > greatest(
        statement_timestamp() - make_interval(secs => %(within)s),
        coalesce((SELECT max(c.at) FROM runs_pausechange c
                  WHERE c.workflow = %(workflow)s AND c.step = %(step)s
                    AND c.action = %(resume)s),
                 '-infinity'::timestamptz))
  AND s.name = %(step)s
  AND r.workflow = %(workflow)s
